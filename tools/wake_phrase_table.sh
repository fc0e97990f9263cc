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
audios=("$set/stream.wav" "$set/distractors.wav" "$neg/unseen.wav" "$neg/seen.wav")
truths=("$set/stream.truth.csv" "$set/none.truth.csv" "$neg/none.truth.csv" "$neg/none.truth.csv")
for th in $thresholds; do
  row="| $th |"
  total=0; seconds=0
  for k in 0 1 2 3; do
    json=$("$earshot" evaluate --model "$model" --stream "${audios[$k]}" --truth "${truths[$k]}" --threshold "$th" --format json)
    fa=$(field falseAlarms <<<"$json"); s=$(field seconds <<<"$json")
    [ -n "$fa" ] && [ -n "$s" ] || { echo "no figures from earshot evaluate on ${audios[$k]}: $json" >&2; exit 1; }
    if [ "$k" = 0 ]; then
      row="$row $(field hits <<<"$json") of $(field keywords <<<"$json") | $fa in $(hours "$s") h |"
    else
      row="$row $fa in $(hours "$s") h |"
      total=$((total + fa)); seconds=$(awk -v a="$seconds" -v b="$s" 'BEGIN { print a + b }')
    fi
  done
  echo "$row $total in $(hours "$seconds") h ($(awk -v n="$total" -v s="$seconds" 'BEGIN { printf "%.2f", n * 3600 / s }') per hour) |"
done
