#!/usr/bin/env bash
# Soak test of `earshot listen`: a paced capture device (ALSA's file plugin reading a FIFO fed
# at real-time rate by pv) with 8 channels for 30 minutes; RSS sampled every minute. Passes when
# RSS stays flat (max - min after the first minute within 5 MB) and no audio was dropped.
#
#   tools/soak.sh [--minutes 30] [--channels 8] [--model silero-vad] [--binary .build/release/earshot]
#
# Needs pv (installed with apt-get when missing and run as root). Writes its files to a
# temporary folder it names, and prints a table and a verdict; exit 0 on pass, 1 on fail.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=30 channels=8 model=silero-vad binary=.build/release/earshot
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --channels) channels=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    *) echo "usage: tools/soak.sh [--minutes N] [--channels N] [--model NAME] [--binary PATH]" >&2; exit 64 ;;
  esac
done
if ! command -v pv >/dev/null; then
  if [ "$(id -u)" = 0 ]; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pv >/dev/null; else echo "soak: needs pv" >&2; exit 1; fi
fi
[ -x "$binary" ] || { echo "soak: no $binary (swift build -c release)" >&2; exit 1; }

work=$(mktemp -d)
echo "soak: files in $work"
# The sample on every channel, each channel shifted by a second so that they differ.
python3 - "$work/audio.raw" "$channels" <<'EOF'
import struct, sys, wave
path, channels = sys.argv[1], int(sys.argv[2])
with wave.open("AudioSamples/speech-noise-16k.wav") as w:
    frames = w.readframes(w.getnframes())
mono = struct.unpack("<%dh" % (len(frames) // 2), frames)
n = len(mono)
out = [mono[(i + 16000 * c) % n] for i in range(n) for c in range(channels)]
with open(path, "wb") as f:
    f.write(struct.pack("<%dh" % len(out), *out))
EOF
mkfifo "$work/fifo"
cat > "$work/alsa.conf" <<EOF
pcm.soak { type file; slave.pcm { type null }; file "/dev/null"; infile "$work/fifo"; format "raw" }
EOF
bytes_per_second=$((16000 * 2 * channels))
# Feeds the FIFO at real-time rate for as long as the soak runs.
(while true; do cat "$work/audio.raw"; done | pv -qL "$bytes_per_second" > "$work/fifo") &
feeder=$!
ALSA_CONFIG_PATH="$work/alsa.conf" "$binary" listen --device soak --channels "$channels" --model "$model" \
  --format jsonl --verbose > "$work/events.jsonl" 2> "$work/stderr" &
listener=$!
cleanup() { kill "$listener" "$feeder" 2>/dev/null || true; pkill -P "$feeder" 2>/dev/null || true; }
trap cleanup EXIT

rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$listener/status"; }
printf "%6s  %10s  %8s  %8s\n" minute "RSS (kB)" segments dropped
samples=()
for ((m = 1; m <= minutes; m++)); do
  sleep 60
  kill -0 "$listener" 2>/dev/null || { echo "soak: listen stopped early:"; cat "$work/stderr"; exit 1; }
  r=$(rss); samples+=("$r")
  segments=$(grep -c '"event":"ended"' "$work/events.jsonl" || true)
  dropped=$(grep -c '"event":"dropped"' "$work/events.jsonl" || true)
  printf "%6d  %10d  %8d  %8d\n" "$m" "$r" "$segments" "$dropped"
done
kill -TERM "$listener"
wait "$listener" || { echo "soak: listen exited $?"; exit 1; }
cat "$work/stderr"
# Flat: after the first minute (workspaces and buffers reach their size), within 5 MB.
steady=("${samples[@]}")
[ "$minutes" -gt 1 ] && steady=("${samples[@]:1}")
lo=$(printf "%s\n" "${steady[@]}" | sort -n | head -1)
hi=$(printf "%s\n" "${steady[@]}" | sort -n | tail -1)
spread=$((hi - lo))
dropped=$(grep -c '"event":"dropped"' "$work/events.jsonl" || true)
echo "soak: $minutes min, $channels channels: RSS spread ${spread} kB (after minute 1: $lo..$hi kB), $dropped drop events"
if [ "$spread" -le 5120 ] && [ "$dropped" -eq 0 ]; then echo "soak: pass"; else echo "soak: FAIL"; exit 1; fi
