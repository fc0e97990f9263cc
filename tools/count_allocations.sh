#!/usr/bin/env bash
# Heap allocations per model step, one stream: runs `earshot bench model` over the sample with
# 1 and with 3 timed passes under an LD_PRELOAD malloc counter; the difference divided by the
# extra steps is the count per step (start-up and loading cancel out).
#   swift build -c release && tools/count_allocations.sh [MODEL]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-silero-vad}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -shared -fPIC -O2 "$root/tools/alloc/malloc_count.c" -o "$work/malloc_count.so" -ldl
count() {
  LD_PRELOAD="$work/malloc_count.so" "$root/.build/release/earshot" bench model --model "$model" --repeat "$1" 2>&1 \
    | sed -n 's/^malloc calls: //p'
}
chunks=$("$root/.build/release/earshot" bench model --model "$model" --repeat 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["chunks"])')
one=$(count 1)
three=$(count 3)
echo "$model: $(( (three - one) / (2 * chunks) )) heap allocations per step ($one and $three malloc calls for 2 and 4 passes of $chunks steps)"
