#!/usr/bin/env bash
# Trains the classifiers the project ships, with `earshot train`, from the data sets beside the
# project (../shared/data, or $EARSHOT_DATA), and evaluates them with `earshot evaluate`.
#
#   swift build -c release && tools/train_models.sh [digits|keywords|all]
#
# Models/digits    FSDD (8 kHz): trained on takes 5-49 of every speaker, tested on takes 0-4
#                  (the data set's usual split); a second model trained without one speaker is
#                  tested on that speaker (tools/.cache/digits-without-<speaker>, not shipped).
# Models/keywords  Speech Commands' 12 classes: speakers whose id starts with 0, 1 or 2 (and
#                  the silence clips whose number is a multiple of 4) are held out of training
#                  and validation entirely, and the model is tested on them, clip by clip and
#                  spliced into a long stream (tools/make_keyword_stream.sh).
#
# The file lists go to tools/.cache/*.csv; the evaluations to tools/.cache/*.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${EARSHOT_DATA:-"$root/../shared/data"}
cache="$root/tools/.cache"
earshot="$root/.build/release/earshot"
mkdir -p "$cache"
[[ -x "$earshot" ]] || { echo "build first: swift build -c release" >&2; exit 1; }
what=${1:-all}

digits() {
  local fsdd="$data/fsdd" left_out=yweweler
  [[ -d "$fsdd" ]] || { echo "no FSDD at $fsdd" >&2; exit 1; }
  # <digit>_<speaker>_<take>.flac
  ls "$fsdd" | awk -v dir="$fsdd" -v out="$cache" -v left="$left_out" '
    BEGIN { print "file,label" > out "/digits-train.csv"; print "file,label" > out "/digits-test.csv"
            print "file,label" > out "/digits-train-without.csv"; print "file,label" > out "/digits-speaker.csv" }
    match($0, /^[0-9]_[a-z]+_[0-9]+\.flac$/) {
      split($0, p, /[_.]/); line = dir "/" $0 "," p[1]
      print line > out "/digits-" (p[3] < 5 ? "test" : "train") ".csv"
      if (p[2] == left) print line > out "/digits-speaker.csv"
      else if (p[3] >= 5) print line > out "/digits-train-without.csv"
    }'
  "$earshot" train --force --data "$cache/digits-train.csv" --validation-split 0.1 --output "$root/Models/digits" \
    --epochs 40 --patience 10 --augment noise,gain,shift --seed 1 \
    --description "Spoken digits 0-9 (English), 8 kHz, one score per 10 ms step; trained by tools/train_models.sh." \
    --author "Earshot, from the Free Spoken Digit Dataset (Zohar Jackson et al.)" --license "CC BY-SA 4.0 (the data's)"
  "$earshot" evaluate --model "$root/Models/digits" --data "$cache/digits-test.csv" | tee "$cache/digits-test.txt"
  "$earshot" train --force --data "$cache/digits-train-without.csv" --validation-split 0.1 --output "$cache/digits-without-$left_out" \
    --epochs 40 --patience 10 --augment noise,gain,shift --seed 1
  "$earshot" evaluate --model "$cache/digits-without-$left_out" --data "$cache/digits-speaker.csv" | tee "$cache/digits-speaker.txt"
}

keywords() {
  local sc="$data/speech-commands"
  [[ -d "$sc" ]] || { echo "no Speech Commands at $sc" >&2; exit 1; }
  # <label>/<speaker>_nohash_<n>.flac, _unknown_/<word>_<speaker>_nohash_<n>.wav.flac, _silence_/<n>.flac
  (cd "$sc" && find . -name '*.flac' | sort) | awk -v dir="$sc" -v out="$cache" '
    BEGIN { print "file,label" > out "/keywords-train.csv"; print "file,label" > out "/keywords-test.csv" }
    {
      path = substr($0, 3); split(path, p, "/"); label = p[1]; name = p[2]
      hex = "[0-9a-f]"  # (mawk has no {8})
      if (match(name, hex hex hex hex hex hex hex hex "_nohash")) held = substr(name, RSTART, 1) ~ /[012]/
      else { n = name; sub(/\..*/, "", n); held = (n % 4 == 0) }
      print dir "/" path "," label > out "/keywords-" (held ? "test" : "train") ".csv"
    }'
  "$earshot" train --force --data "$cache/keywords-train.csv" --group-by '([0-9a-f]{8})_nohash' --validation-split 0.15 \
    --background _silence_ --output "$root/Models/keywords" --epochs 60 --patience 12 --augment noise,gain,shift,speed,mask --seed 1 \
    --context-seconds 1.5 \
    --description "Speech Commands keywords (yes no up down left right on off stop go, unknown words, silence), 16 kHz, one score per 10 ms step; trained by tools/train_models.sh." \
    --author "Earshot, from Speech Commands v0.02 test files (Pete Warden)" --license "CC BY 4.0 (the data's)"
  "$earshot" evaluate --model "$root/Models/keywords" --data "$cache/keywords-test.csv" | tee "$cache/keywords-test.txt"
  "$root/tools/make_keyword_stream.sh"
  for threshold in 0.5 0.7 0.85; do
    "$earshot" evaluate --model "$root/Models/keywords" --stream "$cache/keyword-stream.wav" \
      --truth "$cache/keyword-stream.truth.csv" --threshold "$threshold"
  done | tee "$cache/keywords-stream.txt"
}

case "$what" in
  digits) digits ;;
  keywords) keywords ;;
  all) digits; keywords ;;
  *) echo "usage: tools/train_models.sh [digits|keywords|all]" >&2; exit 64 ;;
esac
