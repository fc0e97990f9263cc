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
