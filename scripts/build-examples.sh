#!/usr/bin/env bash
# Builds the example packages in Examples/ (each depends on this checkout by path) and runs
# them on a bundled sample: they must print the segments earshot label finds.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
expected=$(swift run -q earshot label -f csv AudioSamples/stereo-16k.wav --channels each | tail -n +2 | wc -l)
for example in FileLabeller MultiChannel; do
  (cd "Examples/$example" && swift build -q)
done
labelled=$(Examples/FileLabeller/.build/debug/FileLabeller "$root/AudioSamples/speech-8k.wav" | wc -l)
want=$(swift run -q earshot label -f csv AudioSamples/speech-8k.wav | tail -n +2 | wc -l)
[ "$labelled" = "$want" ] || { echo "FileLabeller: $labelled segments, earshot label: $want"; exit 1; }
channels=$(Examples/MultiChannel/.build/debug/MultiChannel "$root/AudioSamples/stereo-16k.wav" | wc -l)
[ "$channels" = "$expected" ] || { echo "MultiChannel: $channels segments, earshot label --channels each: $expected"; exit 1; }
echo "examples built and run: FileLabeller $labelled segments, MultiChannel $channels segments (as earshot label)"
