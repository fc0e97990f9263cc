#!/usr/bin/env bash
# Checks `earshot serve` with the real Wyoming client (PyPI wyoming 1.10.2, the package Home
# Assistant's Wyoming integration uses) through tools/wyoming_interop.py. The client lives in a
# venv in the cache folder (~/.cache/earshot); python3 and its venv module come from apt when
# missing (sudo when not root). Builds earshot (debug) when it is not built.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -m venv --help >/dev/null 2>&1; then
  sudo=""; if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3 python3-venv
fi
venv="${XDG_CACHE_HOME:-$HOME/.cache}/earshot/wyoming-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import wyoming" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q wyoming==1.10.2
fi
[ -x .build/debug/earshot ] || swift build --product earshot
"$venv/bin/python" tools/wyoming_interop.py --earshot .build/debug/earshot
echo "again, with every client read in batches (--read-batch-clients 1):"
"$venv/bin/python" tools/wyoming_interop.py --earshot .build/debug/earshot --read-batch-clients 1
