#!/usr/bin/env bash
# Creates tools/.venv with the Python packages the tools/ scripts use (PyPI only).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python3 -m venv "$here/.venv"
"$here/.venv/bin/pip" install -q --upgrade pip
"$here/.venv/bin/pip" install -q -r "$here/requirements.txt"
echo "tools venv ready: $here/.venv/bin/python"
