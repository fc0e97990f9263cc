#!/usr/bin/env bash
# Spoken digits on speakers never heard: for each FSDD speaker, trains with `earshot train`'s
# defaults on the other speakers' takes (a tenth held out for validation) and tests on all 500
# takes of the one left out. Prints one line per fold, then the mean and the worst.
#
#   swift build -c release && tools/digits_folds.sh [EARSHOT_BINARY] [EXTRA TRAIN FLAGS...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fsdd=${EARSHOT_DATA:-"$root/../shared/data"}/fsdd
earshot=${1:-"$root/.build/release/earshot"}
shift || true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
speakers=$(ls "$fsdd" | awk -F_ '/^[0-9]_[a-z]+_[0-9]+\.flac$/ { print $2 }' | sort -u)
results=()
for left in $speakers; do
  ls "$fsdd" | awk -v dir="$fsdd" -v out="$work" -v left="$left" '
    BEGIN { print "file,label" > out "/train.csv"; print "file,label" > out "/test.csv" }
    /^[0-9]_[a-z]+_[0-9]+\.flac$/ { split($0, p, /[_.]/); print dir "/" $0 "," p[1] > out "/" (p[2] == left ? "test" : "train") ".csv" }'
  start=$(date +%s)
  "$earshot" train -q --force --data "$work/train.csv" --validation-split 0.1 --seed 1 --output "$work/model" "$@"
  seconds=$(( $(date +%s) - start ))
  accuracy=$("$earshot" evaluate --model "$work/model" --data "$work/test.csv" --format json | python3 -c 'import json,sys; print("%.1f" % (100 * json.load(sys.stdin)["accuracy"]))')
  echo "without $left: $accuracy% on $left's 500 takes ($seconds s of training)"
  results+=("$accuracy")
done
printf '%s\n' "${results[@]}" | awk '{ s += $1; if (NR == 1 || $1 < w) w = $1 } END { printf "mean %.1f%%, worst %.1f%% over %d folds\n", s / NR, w, NR }'
