#!/usr/bin/env bash
# A wake phrase's training set from espeak-ng voices alone, and its held-out tests.
#
#   tools/make_wake_phrase.sh OUT [PHRASE] [VARIANTS] [SPEECH_COMMANDS]
#
# PHRASE (default "hey earshot") is spoken by espeak-ng in its 8 English accents, each with
# VARIANTS of its voice variants (default all, about 100; fewer for a quick set), one take per
# voice at a speed and pitch drawn from the voice's name. Every fifth variant (in sorted order) is
# held out: never in training, in any accent. Negatives ("other"): each voice says three of the
# distractors below (a held-out voice one) (words that share sounds with the phrase, other wake phrases, sentences),
# noise clips, and, when SPEECH_COMMANDS is given (../shared/data/speech-commands), the words
# of its speakers whose ids start with 0-7 (those of 8-f stay out of training, for evaluation)
# and its _silence_ recordings.
#
# Writes OUT/train/{PHRASE-LABEL,other}/*.wav (16 kHz mono; the label is the phrase with spaces
# as dashes), OUT/test/... for the held-out voices, and two streams of the held-out voices:
# OUT/stream.wav (each take of the phrase between distractors, 1 to 2 s apart, over quiet noise;
# truth in OUT/stream.truth.csv) and OUT/distractors.wav (distractors only; OUT/none.truth.csv).
# Deterministic (espeak-ng and sox with fixed seeds).
set -euo pipefail
export LC_ALL=C  # file and voice order
out=${1:?usage: tools/make_wake_phrase.sh OUT [PHRASE] [VARIANTS] [SPEECH_COMMANDS]}
phrase=${2:-hey earshot}
count=${3:-1000}
commands=${4:-}
for tool in espeak-ng sox soxi; do command -v "$tool" >/dev/null || { echo "missing tool: $tool (apt-get install espeak-ng sox)" >&2; exit 1; }; done
label=${phrase// /-}
accents="en-gb en-us en-gb-scotland en-gb-x-rp en-gb-x-gbclan en-gb-x-gbcwmd en-029 en-us-nyc"
mapfile -t variants < <(espeak-ng --voices=variant | awk 'NR > 1 { sub(/^!v\//, "", $5); print $5 }' | LC_ALL=C sort | head -n "$count")
distractors=("hey" "earshot" "hey there" "hey you" "hear shot" "a hot shot" "hey everyone" "ear" "shot" "hey siri" "okay nabu"
             "hey jarvis" "alexa" "hey mycroft" "early shot" "here it is" "every shot" "hey earth" "headshot" "she is short"
             "the meeting moved to thursday afternoon" "please pass the salt and pepper" "turn left at the second light"
             "my brother bought a new bicycle" "it might rain later this evening" "hey can you hear me" "a clear shot")
SOX=(sox -R -D -V1)
# A number from a name (stable across runs and machines).
pick() { printf '%s' "$1" | cksum | awk -v n="$2" '{ print $1 % n }'; }
say() {  # say VOICE TEXT FILE: 16 kHz, trimmed of espeak-ng's silence, then 0.1 s each side
  local voice=$1 text=$2 file=$3
  local s=$((120 + $(pick "$voice$text" 81))) p=$((25 + $(pick "$text$voice" 51)))
  espeak-ng -v "$voice" -s "$s" -p "$p" -w "$file.raw.wav" "$text"
  "${SOX[@]}" "$file.raw.wav" -r 16000 -c 1 -b 16 "$file" norm -3 silence 1 0.01 -50d reverse silence 1 0.01 -50d reverse pad 0.1 0.1
  rm "$file.raw.wav"
}
if [ -e "$out" ] && [ ! -f "$out/.wake-phrase-set" ]; then echo "$out exists and is not a set this script made: not replacing it" >&2; exit 1; fi
if [ -n "$commands" ] && [ ! -d "$commands/_silence_" ]; then echo "$commands: not Speech Commands (no _silence_ folder)" >&2; exit 1; fi
rm -rf "$out"
mkdir -p "$out"/{train,test}/"$label" "$out"/{train,test}/other
touch "$out/.wake-phrase-set"
for k in "${!variants[@]}"; do
  v=${variants[$k]}
  set=train
  [ $((k % 5)) = 4 ] && set=test
  for a in $accents; do
    voice="$a+$v"
    say "$voice" "$phrase" "$out/$set/$label/$a-$v.wav"
    # Training voices say three distractors, held-out voices one (their stream's).
    takes=3
    [ "$set" = test ] && takes=1
    for n in $(seq 1 $takes); do
      key=$voice
      [ "$n" -gt 1 ] && key="$voice#$n"
      d=${distractors[$(pick "$key" ${#distractors[@]})]}
      suffix=""
      [ "$n" -gt 1 ] && suffix="-$n"
      say "$voice" "$d" "$out/$set/other/$a-$v$suffix.wav"
    done
  done
done
for k in $(seq 1 40); do
  color=$(case $((k % 3)) in 0) echo whitenoise;; 1) echo pinknoise;; *) echo brownnoise;; esac)
  "${SOX[@]}" -n -r 16000 -c 1 -b 16 "$out/train/other/noise-$k.wav" synth 1.5 $color vol "0.0$((k % 9 + 1))"
done
if [ -n "$commands" ]; then
  # Keyword folders hold <speaker>_nohash_<n>.flac (the first pattern; unknown words start with
  # a letter), _unknown_ holds <word>_<speaker>_nohash_<n>.wav.flac, _silence_ numbered noise.
  shopt -s nullglob
  for f in "$commands"/*/[0-7]*_nohash_*.flac "$commands"/_unknown_/*_[0-7]???????_nohash_*.flac "$commands"/_silence_/*.flac; do
    w=$(basename "$(dirname "$f")")
    "${SOX[@]}" "$f" -r 16000 -c 1 -b 16 "$out/train/other/sc-$w-$(basename "$f" .flac).wav"
  done
fi
# The streams of held-out voices: the phrase between distractors, and distractors alone.
stream() {  # stream NAME WITH_PHRASE
  local name=$1 with=$2 t=0.5 i=0 pieces=("$out/gap0.wav")
  : > "$out/$name.truth.csv"
  "${SOX[@]}" -n -r 16000 -c 1 -b 16 "$out/gap0.wav" trim 0 0.5
  for f in "$out"/test/other/*.wav; do
    local base; base=$(basename "$f")
    local items=("$f")
    [ "$with" = 1 ] && items+=("$out/test/$label/$base")
    for g in "${items[@]}"; do
      i=$((i + 1))
      local len; len=$(soxi -D "$g")
      if [ "$g" != "$f" ]; then
        awk -v t="$t" -v l="$len" -v lab="$label" 'BEGIN { printf "%.3f,%.3f,%s\n", t + 0.1, t + l - 0.1, lab }' >> "$out/$name.truth.csv"
      fi
      local gap; gap=$(awk -v i="$i" 'BEGIN { printf "%.2f", 1 + (i * 37 % 10) / 10 }')
      "${SOX[@]}" -n -r 16000 -c 1 -b 16 "$out/gap$i.wav" trim 0 "$gap"
      pieces+=("$g" "$out/gap$i.wav")
      t=$(awk -v t="$t" -v l="$len" -v g="$gap" 'BEGIN { printf "%.3f", t + l + g }')
    done
  done
  "${SOX[@]}" "${pieces[@]}" "$out/words.wav"
  "${SOX[@]}" -n -r 16000 -c 1 -b 16 "$out/noise.wav" synth "$(soxi -D "$out/words.wav")" pinknoise vol 0.01
  "${SOX[@]}" -m "$out/words.wav" "$out/noise.wav" "$out/$3.wav"
  rm -f "$out"/gap*.wav "$out/words.wav" "$out/noise.wav"
}
stream stream 1 stream
stream none 0 distractors
echo "$out: $(find "$out/train/$label" -name '*.wav' | wc -l) takes of '$phrase' and $(find "$out/train/other" -name '*.wav' | wc -l) others in training;" \
  "held out: $(find "$out/test/$label" -name '*.wav' | wc -l) takes, stream $(soxi -d "$out/stream.wav"), distractors $(soxi -d "$out/distractors.wav")"
