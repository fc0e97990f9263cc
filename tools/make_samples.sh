#!/usr/bin/env bash
# Builds the test audio in AudioSamples/ from synthetic speech (espeak-ng),
# synthetic noise and tones (sox), together with a ground-truth CSV per file.
#
# Usage: tools/make_samples.sh [output-dir]      (default: AudioSamples/)
#        KEEP_WORK=1 keeps the temporary pieces and prints where they are.
#
# Every file is assembled from pieces whose lengths are measured in samples
# after they are made, so segment times in the *.truth.csv files are exact by
# construction. sox runs in repeatable mode (-R) with dithering off (-D), so
# noise, silence and the encoders give the same bytes on every run with the
# same sox and espeak-ng versions.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out_dir=${1:-"$here/../AudioSamples"}
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)

for tool in sox soxi espeak-ng awk; do
  command -v "$tool" >/dev/null || { echo "missing tool: $tool" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'if [[ -n "${KEEP_WORK:-}" ]]; then echo "pieces kept in $work" >&2; else rm -rf "$work"; fi' EXIT

SOX=(sox -R -D -V1)
SPEECH_PEAK_DB=-3     # speech pieces are peak-normalised to this level
MIX_SPEECH_PEAK_DB=-4 # speech inside a speech-over-noise mixture
WHITE_PEAK_DB=-20     # white noise stretches
PINK_PEAK_DB=-18      # pink noise stretches
MIX_NOISE_PEAK_DB=-28 # noise bed under speech (about 10 dB SNR)
TONE_AMPLITUDE=0.25   # sine tone, about -12 dBFS peak
ESPEAK_SPEED=160      # words per minute

# Pieces get unique temp names (callers run in subshells, so no shared counter).
next_name() { mktemp --suffix=.wav -p "$work" piece-XXXXXXXX; }

# speak VOICE RATE TEXT PEAK_DB -> prints path of a tightly trimmed mono PCM16 piece
speak() {
  local voice=$1 rate=$2 text=$3 peak=$4 raw out
  raw=$(next_name)
  out=$(next_name)
  espeak-ng -v "$voice" -s "$ESPEAK_SPEED" -w "$raw" "$text"
  "${SOX[@]}" "$raw" -c 1 -b 16 "$out" \
    rate -v "$rate" gain -n "$peak" \
    silence 1 0.002 -50d reverse silence 1 0.002 -50d reverse
  echo "$out"
}

# silence RATE SECONDS
silence() {
  local out; out=$(next_name)
  "${SOX[@]}" -r "$1" -c 1 -n -b 16 "$out" trim 0 "$2"
  echo "$out"
}

# noise RATE SECONDS KIND(whitenoise|pinknoise) PEAK_DB
noise() {
  local out; out=$(next_name)
  "${SOX[@]}" -r "$1" -c 1 -n -b 16 "$out" synth "$2" "$3" gain -n "$4"
  echo "$out"
}

# tone RATE SECONDS FREQ (10 ms raised-cosine fades at both ends)
tone() {
  local out; out=$(next_name)
  "${SOX[@]}" -r "$1" -c 1 -n -b 16 "$out" synth "$2" sine "$3" vol "$TONE_AMPLITUDE" \
    fade h 0.01 "$2" 0.01
  echo "$out"
}

samples() { soxi -s "$1"; }

# A track is a list file of "path label" lines; rendering concatenates the
# pieces and writes one truth row per piece.
add() { echo "$2 $3" >>"$work/track-$1.list"; }

# speech_over_noise TRACK RATE VOICE TEXT LEAD_S TAIL_S KIND:
# noise bed, speech starts LEAD_S after the noise, noise continues TAIL_S after it.
speech_over_noise() {
  local track=$1 rate=$2 voice=$3 text=$4 lead=$5 tail=$6 kind=$7
  local sp lead_n sp_n tail_n bed a b c mixed
  sp=$(speak "$voice" "$rate" "$text" "$MIX_SPEECH_PEAK_DB")
  sp_n=$(samples "$sp")
  lead_n=$(awk -v s="$lead" -v r="$rate" 'BEGIN { printf "%d", s * r + 0.5 }')
  tail_n=$(awk -v s="$tail" -v r="$rate" 'BEGIN { printf "%d", s * r + 0.5 }')
  bed=$(noise "$rate" "$((lead_n + sp_n + tail_n))s" "$kind" "$MIX_NOISE_PEAK_DB")
  a=$(next_name); b=$(next_name); c=$(next_name); mixed=$(next_name)
  "${SOX[@]}" "$bed" "$a" trim 0s "${lead_n}s"
  "${SOX[@]}" "$bed" "$b" trim "${lead_n}s" "${sp_n}s"
  "${SOX[@]}" "$bed" "$c" trim "$((lead_n + sp_n))s"
  "${SOX[@]}" -m -v 1 "$b" -v 1 "$sp" -b 16 "$mixed"
  add "$track" "$a" noise
  add "$track" "$mixed" speech
  add "$track" "$c" noise
}

# render TRACK OUT_WAV CHANNEL TRUTH_CSV [PAD_TO_SAMPLES]
render() {
  local track=$1 out=$2 channel=$3 truth=$4 pad_to=${5:-0}
  local list="$work/track-$track.list" files=() pos=0 path label len total
  while read -r path label; do
    len=$(samples "$path")
    files+=("$path")
    echo "$channel $pos $((pos + len)) $label" >>"$work/track-$track.rows"
    pos=$((pos + len))
  done <"$list"
  if ((pad_to > pos)); then
    path=$(next_name)
    "${SOX[@]}" -r "$(soxi -r "${files[0]}")" -c 1 -n -b 16 "$path" trim 0s "$((pad_to - pos))s"
    files+=("$path")
    echo "$channel $pos $pad_to silence" >>"$work/track-$track.rows"
    pos=$pad_to
  fi
  if ((${#files[@]} == 1)); then cp "${files[0]}" "$out"; else "${SOX[@]}" "${files[@]}" "$out"; fi
  total=$(samples "$out")
  ((total == pos)) || { echo "length mismatch in $track: $total != $pos" >&2; exit 1; }
  local rate; rate=$(soxi -r "$out")
  # Adjacent pieces with the same label become one row.
  awk -v r="$rate" '
    function flush() { if (have) printf "%d,%.3f,%.3f,%s\n", ch, s / r, e / r, lab }
    have && $4 == lab && $2 == e { e = $3; next }
    { flush(); ch = $1; s = $2; e = $3; lab = $4; have = 1 }
    END { flush() }' "$work/track-$track.rows" >>"$truth"
}

new_truth() { echo "channel,start,end,label" >"$1"; }

# Fails when a file's peak is at or above -1 dBFS.
check_peak() {
  local pk
  pk=$(sox "$1" -n stats 2>&1 | awk '/^Pk lev dB/ { print $4 }')
  awk -v p="$pk" -v f="$1" 'BEGIN { if (p + 0 >= -1.0) { print "peak too high in " f ": " p " dBFS" > "/dev/stderr"; exit 1 } }'
}

# ---------------------------------------------------------------------------
# speech-noise-16k: mono 16 kHz, speech in five languages, noise, tone, mixture
R=16000
T=main
add $T "$(silence $R 1.0)" silence
add $T "$(speak en $R 'The quick brown fox jumps over the lazy dog near the river bank.' $SPEECH_PEAK_DB)" speech
add $T "$(silence $R 0.7)" silence
add $T "$(noise $R 2.5 whitenoise $WHITE_PEAK_DB)" noise
add $T "$(silence $R 0.5)" silence
add $T "$(speak en-us+f3 $R 'Please call Stella and ask her to bring these things with her from the store.' $SPEECH_PEAK_DB)" speech
add $T "$(silence $R 0.6)" silence
add $T "$(tone $R 1.5 440)" tone
add $T "$(silence $R 0.5)" silence
add $T "$(speak de $R 'Der Wind weht heute kräftig über die Felder, aber die Sonne scheint.' $SPEECH_PEAK_DB)" speech
add $T "$(silence $R 0.6)" silence
add $T "$(noise $R 2.5 pinknoise $PINK_PEAK_DB)" noise
add $T "$(silence $R 0.5)" silence
add $T "$(speak fr $R 'Le petit chat dort tranquillement sur le canapé du salon.' $SPEECH_PEAK_DB)" speech
add $T "$(silence $R 0.6)" silence
speech_over_noise $T $R es 'El tren de la mañana llega siempre a las ocho en punto a la estación central.' 1.0 0.8 whitenoise
add $T "$(silence $R 0.6)" silence
add $T "$(speak en+m3 $R 'Seven bright stars were shining above the quiet harbour.' $SPEECH_PEAK_DB)" speech
add $T "$(silence $R 1.0)" silence

truth="$out_dir/speech-noise-16k.truth.csv"
new_truth "$truth"
render $T "$work/speech-noise-16k.wav" 0 "$truth"
check_peak "$work/speech-noise-16k.wav"
cp "$work/speech-noise-16k.wav" "$out_dir/speech-noise-16k.wav"
"${SOX[@]}" "$work/speech-noise-16k.wav" -C 8 "$out_dir/speech-noise-16k.flac"
"${SOX[@]}" "$work/speech-noise-16k.wav" -C 4 "$out_dir/speech-noise-16k.ogg"

# ---------------------------------------------------------------------------
# stereo-16k: two channels with independent timelines
L=left; Rt=right
add $L "$(silence $R 0.8)" silence
add $L "$(speak en-us $R 'Turn left at the second street and walk up to the old bridge.' $SPEECH_PEAK_DB)" speech
add $L "$(silence $R 3.0)" silence
add $L "$(speak de+f4 $R 'Wir treffen uns morgen früh vor dem Bahnhof.' $SPEECH_PEAK_DB)" speech
add $L "$(silence $R 2.2)" silence
add $L "$(speak en+f2 $R 'The meeting ends at noon.' $SPEECH_PEAK_DB)" speech
add $L "$(silence $R 2.4)" silence
add $L "$(speak en-us $R 'Thanks, see you there.' $SPEECH_PEAK_DB)" speech

add $Rt "$(silence $R 2.5)" silence
add $Rt "$(speak fr+f2 $R "Il fait beau aujourd'hui, allons nous promener au parc." $SPEECH_PEAK_DB)" speech
add $Rt "$(silence $R 1.2)" silence
add $Rt "$(noise $R 1.5 pinknoise $PINK_PEAK_DB)" noise
add $Rt "$(silence $R 1.6)" silence
add $Rt "$(speak es+m1 $R 'Mañana vamos a la playa con toda la familia.' $SPEECH_PEAK_DB)" speech
add $Rt "$(silence $R 1.0)" silence
add $Rt "$(noise $R 1.0 whitenoise $WHITE_PEAK_DB)" noise

# Both channels end with at least 0.5 s of silence and have equal length.
add $L "$(silence $R 0.5)" silence
add $Rt "$(silence $R 0.5)" silence
len_l=0; len_r=0
while read -r p _; do len_l=$((len_l + $(samples "$p"))); done <"$work/track-$L.list"
while read -r p _; do len_r=$((len_r + $(samples "$p"))); done <"$work/track-$Rt.list"
len_max=$((len_l > len_r ? len_l : len_r))

truth="$out_dir/stereo-16k.truth.csv"
new_truth "$truth"
render $L "$work/left.wav" 0 "$truth" $len_max
render $Rt "$work/right.wav" 1 "$truth" $len_max
"${SOX[@]}" -M "$work/left.wav" "$work/right.wav" -b 16 "$out_dir/stereo-16k.wav"
check_peak "$out_dir/stereo-16k.wav"

# ---------------------------------------------------------------------------
# speech-44k: mono 44.1 kHz speech with silences
R=44100
T=s44
add $T "$(silence $R 0.6)" silence
add $T "$(speak en-us+m3 $R 'A large red truck rolled slowly down the hill.' $SPEECH_PEAK_DB)" speech
add $T "$(silence $R 1.0)" silence
add $T "$(speak en+f3 $R 'She sells sea shells by the sea shore every summer.' $SPEECH_PEAK_DB)" speech
add $T "$(silence $R 0.6)" silence
add $T "$(speak de $R 'Guten Abend, wie geht es dir?' $SPEECH_PEAK_DB)" speech
add $T "$(silence $R 0.6)" silence

truth="$out_dir/speech-44k.truth.csv"
new_truth "$truth"
render $T "$out_dir/speech-44k.wav" 0 "$truth"
check_peak "$out_dir/speech-44k.wav"

# ---------------------------------------------------------------------------
# speech-8k: mono 8 kHz speech with silences
R=8000
T=s8
add $T "$(silence $R 0.7)" silence
add $T "$(speak en-us $R 'Your call is important to us, please stay on the line.' $SPEECH_PEAK_DB)" speech
add $T "$(silence $R 0.8)" silence
add $T "$(speak es $R 'Para continuar en español, marque el número dos.' $SPEECH_PEAK_DB)" speech
add $T "$(silence $R 0.7)" silence
add $T "$(speak en-us+f3 $R 'Thank you for waiting.' $SPEECH_PEAK_DB)" speech
add $T "$(silence $R 0.7)" silence

truth="$out_dir/speech-8k.truth.csv"
new_truth "$truth"
render $T "$out_dir/speech-8k.wav" 0 "$truth"
check_peak "$out_dir/speech-8k.wav"

# ---------------------------------------------------------------------------
echo "written to $out_dir:"
for f in speech-noise-16k.wav speech-noise-16k.flac speech-noise-16k.ogg stereo-16k.wav speech-44k.wav speech-8k.wav; do
  printf '  %-24s %s Hz, %s ch, %s s\n' "$f" "$(soxi -r "$out_dir/$f")" "$(soxi -c "$out_dir/$f")" "$(soxi -D "$out_dir/$f")"
done
