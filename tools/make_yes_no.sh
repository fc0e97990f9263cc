#!/usr/bin/env bash
# A small two-word set as a new user would make one: espeak-ng saying "yes" and "no" in 8
# voices (4 takes each: two speeds, two pitches), plus noise clips, as label folders; and a
# stream of the held-out voices' words with gaps over quiet noise, with its truth.
#
#   tools/make_yes_no.sh OUT [HELD_OUT_VOICES]
#
# Writes OUT/train/{yes,no,noise}/VOICE-*.wav (16 kHz mono), OUT/test/... for the held-out
# voices (default en-029 and en-us-nyc), OUT/stream.wav and OUT/stream.truth.csv.
# Deterministic (espeak-ng and sox with fixed seeds).
set -euo pipefail
out=${1:?usage: tools/make_yes_no.sh OUT [HELD_OUT_VOICES]}
held=${2:-"en-029 en-us-nyc"}
for tool in espeak-ng sox; do command -v "$tool" >/dev/null || { echo "missing tool: $tool (apt-get install espeak-ng sox)" >&2; exit 1; }; done
voices="en-gb en-us en-gb-scotland en-gb-x-rp en-gb-x-gbclan en-gb-x-gbcwmd en-029 en-us-nyc"
SOX=(sox -R -D -V1)
rm -rf "$out"
for v in $voices; do
  set=train
  for h in $held; do [ "$h" = "$v" ] && set=test; done
  for w in yes no; do
    mkdir -p "$out/$set/$w"
    for s in 140 185; do
      for p in 35 65; do
        espeak-ng -v "$v" -s "$s" -p "$p" -w "$out/$set/$w/raw.wav" "$w"
        # 16 kHz, the word alone (leading and trailing silence cut), then 0.1 s of silence each side.
        "${SOX[@]}" "$out/$set/$w/raw.wav" -r 16000 "$out/$set/$w/$v-$s-$p.wav" silence 1 0.01 0.5% reverse silence 1 0.01 0.5% reverse pad 0.1 0.1
        rm "$out/$set/$w/raw.wav"
      done
    done
  done
  mkdir -p "$out/$set/noise"
  for k in 1 2 3 4; do
    color=$([ $((k % 2)) = 0 ] && echo pinknoise || echo whitenoise)
    "${SOX[@]}" -n -r 16000 -c 1 "$out/$set/noise/$v-$k.wav" synth 0.8 $color vol 0.0$((k + 1))
  done
done
# The stream: every held-out word in turn, 1 to 2 s apart, over quiet pink noise.
t=0.5
: > "$out/stream.truth.csv"
pieces=("$out/gap0.wav")
"${SOX[@]}" -n -r 16000 -c 1 "$out/gap0.wav" trim 0 0.5
i=0
for f in "$out"/test/yes/*.wav "$out"/test/no/*.wav; do
  i=$((i + 1))
  label=$(basename "$(dirname "$f")")
  len=$(soxi -D "$f")
  # The word's speech is the clip less its 0.1 s pads.
  awk -v t="$t" -v l="$len" -v lab="$label" 'BEGIN { printf "%.3f,%.3f,%s\n", t + 0.1, t + l - 0.1, lab }' >> "$out/stream.truth.csv"
  gap=$(awk -v i="$i" 'BEGIN { printf "%.2f", 1 + (i * 37 % 10) / 10 }')
  "${SOX[@]}" -n -r 16000 -c 1 "$out/gap$i.wav" trim 0 "$gap"
  pieces+=("$f" "$out/gap$i.wav")
  t=$(awk -v t="$t" -v l="$len" -v g="$gap" 'BEGIN { printf "%.3f", t + l + g }')
done
"${SOX[@]}" "${pieces[@]}" "$out/words.wav"
"${SOX[@]}" -n -r 16000 -c 1 "$out/noise.wav" synth "$(soxi -D "$out/words.wav")" pinknoise vol 0.01
"${SOX[@]}" -m "$out/words.wav" "$out/noise.wav" "$out/stream.wav"
rm -f "$out"/gap*.wav "$out/words.wav" "$out/noise.wav"
echo "$out: $(find "$out/train" -name '*.wav' | wc -l) training clips, $(find "$out/test" -name '*.wav' | wc -l) held-out, stream $(soxi -d "$out/stream.wav")"
