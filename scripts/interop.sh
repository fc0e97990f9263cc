#!/usr/bin/env bash
# Checks `earshot serve` with the real Wyoming client (PyPI wyoming 1.10.2, the package Home
# Assistant's Wyoming integration uses) through tools/wyoming_interop.py; then what operators'
# tools see (tools/operate_check.py): /metrics parsed by PyPI prometheus-client's parser, the
# service found over mDNS by PyPI zeroconf's ServiceBrowser, JSON log lines, and a worker's
# metrics when redis-server is installed. The client lives in a
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
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import wyoming, prometheus_client, zeroconf" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q wyoming==1.10.2 prometheus-client==0.26.0 zeroconf==0.154.0
fi
[ -x .build/debug/earshot ] || swift build --product earshot
"$venv/bin/python" tools/wyoming_interop.py --earshot .build/debug/earshot
echo "again, with every client read in batches (--read-batch-clients 1):"
"$venv/bin/python" tools/wyoming_interop.py --earshot .build/debug/earshot --read-batch-clients 1
echo "metrics, zeroconf and JSON logs:"
redis=(); if command -v redis-server >/dev/null; then redis=(--redis-server "$(command -v redis-server)"); fi
"$venv/bin/python" tools/operate_check.py --earshot .build/debug/earshot "${redis[@]}"
