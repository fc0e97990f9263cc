#!/usr/bin/env bash
# Builds a long stream for keyword spotting from held-out speakers: spoken keywords (and
# _unknown_ words as distractors), each trimmed to the word with sox's silence effect, spliced
# between gaps of 1 to 3 s, over pink noise and the held-out _silence_ recordings. Writes the
# stream (16 kHz mono WAV) and its truth (start,end,label in seconds: the words' exact places).
#
#   tools/train_models.sh keywords   # writes tools/.cache/keywords-test.csv
#   tools/make_keyword_stream.sh [OUT.wav] [KEYWORDS] [DISTRACTORS] [SEED]
#   earshot evaluate --model keywords --stream OUT.wav --truth OUT.truth.csv
#
# Defaults: tools/.cache/keyword-stream.wav, 240 keywords, 60 distractors, seed 7. The words come
# from tools/.cache/keywords-test.csv, or from the file,label CSV in $KEYWORD_LIST (a validation
# stream for `earshot train --validation-stream`, from the validation speakers' clips).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
list=${KEYWORD_LIST:-"$root/tools/.cache/keywords-test.csv"}
out=${1:-"$root/tools/.cache/keyword-stream.wav"}
keywords=${2:-240}
distractors=${3:-60}
seed=${4:-7}
[[ -f "$list" ]] || { echo "no $list: run tools/train_models.sh keywords first" >&2; exit 1; }
for tool in sox soxi awk; do command -v "$tool" >/dev/null || { echo "missing tool: $tool" >&2; exit 1; }; done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
SOX=(sox -R -D -V1)

# The words: a seeded shuffle of the held-out files, keywords first then distractors, then mixed.
awk -F, -v seed="$seed" -v k="$keywords" -v d="$distractors" '
  NR > 1 && $2 != "_silence_" { if ($2 == "_unknown_") u[nu++] = $0; else w[nw++] = $0 }
  NR > 1 && $2 == "_silence_" { print $1 > "'"$work"'/silence.list" }
  function shuffle(a, n,   i, j, t) { for (i = n - 1; i > 0; i--) { j = int(rand() * (i + 1)); t = a[i]; a[i] = a[j]; a[j] = t } }
  END {
    srand(seed); shuffle(w, nw); shuffle(u, nu)
    for (i = 0; i < k && i < nw; i++) all[n++] = w[i]
    for (i = 0; i < d && i < nu; i++) all[n++] = u[i]
    shuffle(all, n)
    for (i = 0; i < n; i++) printf "%s,%.3f\n", all[i], 1 + 2 * rand()
  }' "$list" > "$work/words.list"

# Each word trimmed to its speech, after its gap; the truth from the pieces' measured lengths.
: > "$work/pieces.list"
t=0
echo "start,end,label" > "${out%.wav}.truth.csv"
i=0
while IFS=, read -r file label gap; do
  i=$((i + 1))
  "${SOX[@]}" -n -r 16000 -c 1 -b 16 "$work/gap$i.wav" trim 0 "$gap"
  # Trimmed where the sound falls 40 dB below the word's own peak (a fixed level would cut
  # into quiet speakers' words and soft consonants); its level kept.
  threshold=$("${SOX[@]}" "$file" -n stat 2>&1 | awk '/^Maximum amplitude/ { printf "%.5f%%", $3 }')
  "${SOX[@]}" "$file" -r 16000 -c 1 -b 16 "$work/word$i.wav" silence 1 0.02 "$threshold" reverse silence 1 0.02 "$threshold" reverse
  g=$(soxi -s "$work/gap$i.wav"); w=$(soxi -s "$work/word$i.wav")
  start=$((t + g)); end=$((start + w)); t=$end
  [[ "$w" -gt 0 ]] && awk -v s="$start" -v e="$end" -v l="$label" 'BEGIN { printf "%.4f,%.4f,%s\n", s / 16000, e / 16000, l }' >> "${out%.wav}.truth.csv"
  echo "$work/gap$i.wav" >> "$work/pieces.list"
  echo "$work/word$i.wav" >> "$work/pieces.list"
done < "$work/words.list"
"${SOX[@]}" -n -r 16000 -c 1 -b 16 "$work/tail.wav" trim 0 2
echo "$work/tail.wav" >> "$work/pieces.list"
xargs "${SOX[@]}" < <(cat "$work/pieces.list"; echo "$work/speech.wav")
length=$(soxi -D "$work/speech.wav")

# Background: the held-out silence recordings end to end (looped to the length), plus pink noise.
xargs "${SOX[@]}" < <(cat "$work/silence.list"; echo "$work/rooms.wav")
"${SOX[@]}" "$work/rooms.wav" -r 16000 -c 1 -b 16 "$work/rooms-long.wav" repeat 200 trim 0 "$length" vol 0.5
"${SOX[@]}" -n -r 16000 -c 1 -b 16 "$work/pink.wav" synth "$length" pinknoise vol 0.01
"${SOX[@]}" -m "$work/speech.wav" "$work/rooms-long.wav" "$work/pink.wav" -b 16 "$out"
echo "$out: $(soxi -d "$out"), $(($(wc -l < "${out%.wav}.truth.csv") - 1)) words; truth in ${out%.wav}.truth.csv" >&2
