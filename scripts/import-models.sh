#!/usr/bin/env bash
# Makes the bundled model packages from their published sources in Models/sources with
# `earshot import` (each package's model.json text beside the graph comes from the
# sidecar Models/sources/NAME.json). Run from anywhere; builds earshot first.
#   scripts/import-models.sh [--binary PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
binary=""
if [ "${1:-}" = "--binary" ]; then binary=$2; fi
if [ -z "$binary" ]; then swift build -c release --product earshot >/dev/null; binary=.build/release/earshot; fi

"$binary" import Models/sources/silero_vad.onnx --set sr=16000 --state state=stateN --context 64 --chunk 512 --rate 16000 \
  --manifest Models/sources/silero-vad.json --output Models/silero-vad --force
"$binary" import Models/sources/silero_vad.onnx --set sr=8000 --state state=stateN --context 32 --chunk 256 --rate 8000 \
  --manifest Models/sources/silero-vad-8k.json --output Models/silero-vad-8k --force
cp Models/sources/LICENSE-silero-vad Models/silero-vad/LICENSE
cp Models/sources/LICENSE-silero-vad Models/silero-vad-8k/LICENSE

# microWakeWord's wake-word models (pymicro-wakeword 2.5.0, Apache-2.0): each .tflite with its JSON
# config beside it gives the wake phrase, the detection rule and TFLite Micro's audio front end.
for m in okay_nabu hey_jarvis alexa hey_mycroft; do
  name=${m//_/-}
  "$binary" import "Models/sources/microwakeword/$m.tflite" --output "Models/$name" --force --license Apache-2.0 \
    --source "microWakeWord $m.tflite, from pymicro-wakeword 2.5.0 (PyPI)"
  cp Models/sources/microwakeword/LICENSE "Models/$name/LICENSE"
done
