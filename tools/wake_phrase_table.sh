#!/usr/bin/env bash
# A wake-phrase model's stream table: phrases found and false alarms at each threshold, on
# tools/make_wake_phrase.sh's streams and tools/make_negative_streams.sh's negative audio.
#
#   tools/wake_phrase_table.sh MODEL SET NEGATIVES [THRESHOLDS]
#
# SET is make_wake_phrase.sh's OUT, NEGATIVES make_negative_streams.sh's OUT; THRESHOLDS
# defaults to "0.5 0.9 0.95". EARSHOT names the binary (default .build/release/earshot).
# Prints a Markdown table.
set -euo pipefail
model=${1:?usage: tools/wake_phrase_table.sh MODEL SET NEGATIVES [THRESHOLDS]}
set=${2:?usage}
neg=${3:?usage}
thresholds=${4:-"0.5 0.9 0.95"}
earshot=${EARSHOT:-.build/release/earshot}
field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p"; }
hours() { awk -v s="$1" 'BEGIN { printf "%.2f", s / 3600 }'; }
echo "| threshold | held-out takes found | false alarms among them | distractors | unseen real speech | seen real speech | all negatives |"
echo "|---|---|---|---|---|---|---|"
for th in $thresholds; do
  row="| $th |"
  total=0; seconds=0
  for pair in "$set/stream.wav $set/stream.truth.csv" "$set/distractors.wav $set/none.truth.csv" \
              "$neg/unseen.wav $neg/none.truth.csv" "$neg/seen.wav $neg/none.truth.csv"; do
    read -r audio truth <<<"$pair"
    json=$("$earshot" evaluate --model "$model" --stream "$audio" --truth "$truth" --threshold "$th" --format json)
    fa=$(field falseAlarms <<<"$json"); s=$(field seconds <<<"$json")
    if [ "$audio" = "$set/stream.wav" ]; then
      row="$row $(field hits <<<"$json") of $(field keywords <<<"$json") | $fa in $(hours "$s") h |"
    else
      row="$row $fa in $(hours "$s") h |"
      total=$((total + fa)); seconds=$(awk -v a="$seconds" -v b="$s" 'BEGIN { print a + b }')
    fi
  done
  echo "$row $total in $(hours "$seconds") h ($(awk -v n="$total" -v s="$seconds" 'BEGIN { printf "%.2f", n * 3600 / s }') per hour) |"
done
