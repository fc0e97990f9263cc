#!/usr/bin/env bash
# Long negative audio from ../shared/data, for counting false alarms of a wake phrase none of its
# speakers says: every recording resampled to 16 kHz mono and spliced, each followed by 0.25 s
# of quiet noise.
#
#   tools/make_negative_streams.sh OUT [DATA]
#
# Writes OUT/unseen.wav (the words of Speech Commands' speakers whose ids start with 8-f, and all
# of FSDD: what tools/make_wake_phrase.sh never trains on), OUT/seen.wav (the words of speakers
# 0-7, which it trains on when given them) and OUT/none.truth.csv (no phrase in either). Speech
# Commands' _silence_ recordings (noise, no speaker) are in neither.
set -euo pipefail
export LC_ALL=C  # file order
out=${1:?usage: tools/make_negative_streams.sh OUT [DATA]}
data=${2:-"$(dirname "$0")/../../shared/data"}
for tool in sox soxi; do command -v "$tool" >/dev/null || { echo "missing tool: $tool (apt-get install sox)" >&2; exit 1; }; done
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sox -R -D -V1 -n -r 16000 -c 1 -b 16 -t raw "$work/gap.raw" synth 0.25 pinknoise vol 0.003
splice() {  # splice NAME FILES...
  local name=$1; shift
  : > "$work/$name.raw"
  for f in "$@"; do
    sox -R -D -V1 "$f" -r 16000 -c 1 -b 16 -e signed-integer -t raw - >> "$work/$name.raw"
    cat "$work/gap.raw" >> "$work/$name.raw"
  done
  sox -V1 -r 16000 -c 1 -b 16 -e signed-integer -t raw "$work/$name.raw" "$out/$name.wav"
}
shopt -s nullglob
# Keyword folders hold <speaker>_nohash_<n>.flac; _unknown_ holds <word>_<speaker>_nohash_<n>.wav.flac.
sc="$data/speech-commands"
words() {  # words FIRST_DIGITS: the words of the speakers whose ids start with one of them
  local d
  for d in "$sc"/*/; do
    case $(basename "$d") in
      _silence_) ;;
      _unknown_) printf '%s\n' "$d"*_[$1]???????_nohash_*.flac ;;
      *) printf '%s\n' "$d"[$1]*_nohash_*.flac ;;
    esac
  done
}
mapfile -t unseen < <(words 89a-f)
mapfile -t seen < <(words 0-7)
splice unseen "${unseen[@]}" "$data"/fsdd/*.flac
splice seen "${seen[@]}"
: > "$out/none.truth.csv"
for n in unseen seen; do echo "$out/$n.wav: $(soxi -d "$out/$n.wav")"; done
