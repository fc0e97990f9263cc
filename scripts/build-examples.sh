#!/usr/bin/env bash
# Builds the example packages in Examples/ (each depends on this checkout by path) and runs
# them on a bundled sample: they must print the segments earshot label finds.
#
# Both depend on the product Earshot alone, which must build and run on a machine without
# libhiredis-dev (only EarshotCluster links hiredis). As root, each is built with hiredis's
# headers hidden (an empty folder over /usr/include/hiredis, in a mount namespace of its own):
# what it compiles there (all of a graph that held CHiredis, on a fresh checkout) fails. Everywhere,
# no example may link libhiredis: that fails a graph holding CHiredis whose modules the checkout's
# build compiled already.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# Runs a command where /usr/include/hiredis looks empty (when this can be arranged: root, unshare).
without_hiredis() {
  if [ "$(id -u)" = 0 ] && [ -d /usr/include/hiredis ] && unshare -m true 2>/dev/null; then
    local empty
    empty=$(mktemp -d)
    local status=0
    unshare -m sh -c 'mount --bind "$1" /usr/include/hiredis && shift && exec "$@"' sh "$empty" "$@" || status=$?
    rmdir "$empty"
    return "$status"
  else
    echo "note: hiredis's headers cannot be hidden here (root and unshare are needed); the link check still runs" >&2
    "$@"
  fi
}

# The checkout's own build folder for both: the library's modules are the ones `swift build` (or
# `swift test`) compiled there (the same targets with the same flags), so an example compiles its
# own sources only, and the second reuses what the first built. On a fresh checkout the first
# example compiles the library, with hiredis's headers hidden. Either way, an example that linked
# hiredis fails the ldd check below.
build="$root/.build"
expected=$(swift run -q earshot label -f csv AudioSamples/stereo-16k.wav --channels each | tail -n +2 | wc -l)
for example in FileLabeller MultiChannel; do
  (cd "Examples/$example" && without_hiredis swift build -q --scratch-path "$build") || {
    echo "$example did not build without libhiredis-dev: does the product Earshot depend on EarshotRedis?"; exit 1; }
  if ldd "$build/debug/$example" | grep -q hiredis; then
    echo "$example links libhiredis: the product Earshot must not depend on EarshotRedis"; exit 1
  fi
done
labelled=$("$build/debug/FileLabeller" "$root/AudioSamples/speech-8k.wav" | wc -l)
want=$(swift run -q earshot label -f csv AudioSamples/speech-8k.wav | tail -n +2 | wc -l)
[ "$labelled" = "$want" ] || { echo "FileLabeller: $labelled segments, earshot label: $want"; exit 1; }
channels=$("$build/debug/MultiChannel" "$root/AudioSamples/stereo-16k.wav" | wc -l)
[ "$channels" = "$expected" ] || { echo "MultiChannel: $channels segments, earshot label --channels each: $expected"; exit 1; }
echo "examples built without hiredis and run: FileLabeller $labelled segments, MultiChannel $channels segments (as earshot label)"
