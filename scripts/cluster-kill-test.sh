#!/usr/bin/env bash
# The kill test from the shell, with the release binary: a redis-server of its own on a free
# loopback port, 3 workers, 60 sources of the bundled samples published at real-time pace;
# worker w1 is killed with SIGKILL mid-stream and started again later, then a 4th worker joins.
# At the end every source's events (earshot events) must equal earshot label on its audio.
# Usage: scripts/cluster-kill-test.sh [SOURCES]   (needs redis-server: scripts/install-packages.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-60}
e=.build/release/earshot
[ -x $e ] || swift build -c release >/dev/null
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=redis://127.0.0.1:$port
redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no --daemonize yes --logfile "$dir/redis.log"
trap 'redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true; kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
say() { echo "[$(date +%T.%3N)] $*"; }
files=(AudioSamples/speech-44k.wav AudioSamples/speech-8k.wav AudioSamples/speech-noise-16k.wav)
for w in w1 w2 w3; do $e worker --redis "$url" --name $w --claim-after 2 2>"$dir/$w.log" & eval "pid_$w=$!"; done
say "3 workers started; publishing $n sources at real-time pace"
for i in $(seq 0 $((n - 1))); do
  $e publish -q --redis "$url" --source "src-$i" --realtime "${files[$((i % 3))]}" &
done
sleep 3; kill -9 "$pid_w1"; say "kill -9 w1 (pid $pid_w1), mid-stream"
sleep 5; $e worker --redis "$url" --name w1 --claim-after 2 2>"$dir/w1-again.log" & pid_w1=$!; say "w1 started again"
sleep 2; $e worker --redis "$url" --name w4 --claim-after 2 2>"$dir/w4.log" & pid_w4=$!; say "w4 joins"
until [ "$(redis-cli -p "$port" scard earshot:active)" = 0 ] && [ "$(redis-cli -p "$port" xlen earshot:sources)" -ge "$n" ]; do sleep 0.5; done
say "every source has ended"
bad=0
for i in $(seq 0 $((n - 1))); do
  f=${files[$((i % 3))]}
  diff <($e events --redis "$url" --source "src-$i" -f csv | cut -d, -f2-) <($e label -q -f csv "$f" | cut -d, -f2-) >/dev/null || { bad=$((bad + 1)); say "src-$i differs from label"; }
done
kill -TERM "$pid_w2" "$pid_w3" "$pid_w1" "$pid_w4"; wait "$pid_w2" "$pid_w3" "$pid_w1" "$pid_w4" 2>/dev/null || true
say "claims: $(cat "$dir"/w*.log | grep -c 'claimed source entry'); sources taken by w4: $(grep -c 'took source' "$dir/w4.log")"
grep -h "stopped;" "$dir"/w*.log | sed 's/^/    /'
say "$((n - bad)) of $n sources equal earshot label; $bad differ"
[ $bad = 0 ]
