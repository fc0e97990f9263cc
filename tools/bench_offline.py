#!/usr/bin/env python3
"""Offline benchmark: one hour of 16 kHz mono audio labelled end to end, three runners.

The hour (tools/.cache/hour-16k.wav, PCM16 mono 16 kHz, exactly 3600 s) is
AudioSamples/speech-noise-16k.wav repeated and cut; it is built once and reused.
Each round runs every runner once on that file, back to back (the order rotates from
round to round), so all of them meet the same machine load; the medians over the
rounds and their ratios are printed. All runners use Silero VAD v6 on one thread.

  earshot                 `earshot bench offline --audio FILE --repeat 1 --json` (the
                          engine's own timing); if this Earshot has no `bench offline`,
                          the wall time of the `earshot label` process below instead.
  earshot_label_process   wall time of the process `earshot label FILE --format jsonl
                          --output /dev/null`, from start to exit (model load included).
  sherpa_onnx_vad         wall time of the process `sherpa-onnx-vad` (PyPI sherpa-onnx-bin)
                          with the original silero_vad.onnx from the silero-vad 6.2.3 wheel,
                          one thread, default VAD settings; it writes the speech-only audio
                          to a temporary WAV file and prints one line per speech segment.
  onnxruntime_loop        onnxruntime from Python, chunk by chunk as tools/bench_silero_ort.py
                          streams it (512 new samples, 64 of context, LSTM state carried),
                          one thread; wall time from reading the file (session creation
                          included) to the last chunk, inside this process.

Usage: tools/.venv/bin/python tools/bench_offline.py [--repeat N] [--json]
           [--earshot PATH] [--sherpa PATH] [--model FILE] [--only NAME ...]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import silero_reference as ref  # noqa: E402
from earshot_bench import snake_keys  # noqa: E402

ROOT = ref.ROOT
CACHE = ROOT / "tools" / ".cache"
SOURCE = ROOT / "AudioSamples" / "speech-noise-16k.wav"
HOUR = CACHE / "hour-16k.wav"
RATE = 16000
SECONDS = 3600
MODEL = ROOT / "Models" / "sources" / "silero_vad.onnx"  # the silero-vad 6.2.3 wheel's file, bundled
RUNNERS = ("earshot", "earshot_label_process", "sherpa_onnx_vad", "onnxruntime_loop")
SEGMENT_LINE = re.compile(r"^\s*\d+(\.\d+)?\s+--\s+\d+(\.\d+)?\s*$")


# ------------------------------------------------------------------ the hour of audio

def hour_file() -> Path:
    """The hour of audio, built on first use."""
    import soundfile as sf
    want = RATE * SECONDS
    if HOUR.exists():
        info = sf.info(str(HOUR))
        if (info.samplerate, info.channels, info.frames, info.subtype) == (RATE, 1, want, "PCM_16"):
            return HOUR
    source, rate = sf.read(str(SOURCE), dtype="int16", always_2d=True)
    if rate != RATE or source.shape[1] != 1:
        raise SystemExit(f"{SOURCE}: expected 16 kHz mono, got {rate} Hz, {source.shape[1]} channels")
    source = source[:, 0]
    reps = -(-want // len(source))
    audio = np.tile(source, reps)[:want]
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = HOUR.with_suffix(".tmp.wav")
    sf.write(str(tmp), audio, RATE, subtype="PCM_16")
    tmp.replace(HOUR)
    return HOUR


def warm_page_cache(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


# ------------------------------------------------------------------ runners

def timed(cmd: list[str], **kw) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return wall, done


def has_bench_offline(earshot: str, audio: Path) -> bool:
    """Whether this Earshot build knows `bench offline`."""
    done = subprocess.run([earshot, "bench", "offline", "--help"], capture_output=True, text=True)
    return "unknown benchmark" not in (done.stdout + done.stderr)


def run_earshot_bench(earshot: str, audio: Path) -> dict:
    cmd = [earshot, "bench", "offline", "--audio", str(audio), "--repeat", "1", "--json"]
    process_wall, done = timed(cmd)
    line = [s for s in done.stdout.splitlines() if s.strip().startswith("{")][-1]
    doc = snake_keys(json.loads(line))
    return {"wall_seconds": float(doc["wall_seconds"]), "process_wall_seconds": process_wall,
            "segments": doc.get("segments"), "report": doc}


def label_command(earshot: str, audio: Path) -> list[str]:
    return [earshot, "label", str(audio), "--format", "jsonl", "--output", "/dev/null"]


def run_earshot_label(earshot: str, audio: Path) -> dict:
    wall, _ = timed(label_command(earshot, audio))
    return {"wall_seconds": wall}


def sherpa_command(sherpa: str, model: Path, audio: Path, out: Path) -> list[str]:
    return [sherpa, "--vad-num-threads=1", "--vad-provider=cpu", f"--silero-vad-model={model}",
            str(audio), str(out)]


def run_sherpa(sherpa: str, model: Path, audio: Path, tmpdir: Path) -> dict:
    out = tmpdir / "sherpa-speech.wav"
    wall, done = timed(sherpa_command(sherpa, model, audio, out))
    lines = (done.stdout + "\n" + done.stderr).splitlines()
    segments = sum(1 for s in lines if SEGMENT_LINE.match(s))
    if segments == 0 or not out.exists():
        raise SystemExit(f"sherpa-onnx-vad produced no segments:\n{done.stderr[-2000:]}")
    out_bytes = out.stat().st_size
    out.unlink()
    return {"wall_seconds": wall, "segments": segments, "output_wav_bytes": out_bytes}


def run_ort_loop(model: Path, audio_path: Path) -> dict:
    chunk, context = ref.STREAMING[RATE]
    t0 = time.perf_counter()
    audio = ref.read_audio(audio_path, RATE)
    sess = ref.session(str(model))
    sr = np.array(RATE, dtype=np.int64)
    state = np.zeros((2, 1, 128), dtype=np.float32)
    ctx = np.zeros((1, context), dtype=np.float32)
    n = 0
    for piece in ref.chunks(audio, chunk):
        x = np.concatenate([ctx, piece[None, :]], axis=1)
        _, state = sess.run(None, {"input": x, "state": state, "sr": sr})
        ctx = x[:, -context:]
        n += 1
    return {"wall_seconds": time.perf_counter() - t0, "chunks": n}


# ------------------------------------------------------------------ summary

def summary(runs: list[dict], audio_seconds: float, **extra) -> dict:
    walls = [r["wall_seconds"] for r in runs]
    med = statistics.median(walls)
    out = {"wall_seconds_median": round(med, 3), "wall_seconds_best": round(min(walls), 3),
           "wall_seconds_all": [round(w, 3) for w in walls],
           "x_realtime": round(audio_seconds / med, 1)}
    segs = {r.get("segments") for r in runs if r.get("segments") is not None}
    if segs:
        out["segments"] = segs.pop() if len(segs) == 1 else sorted(segs)
    out.update(extra)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds (default 3)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--earshot", default=str(ROOT / ".build" / "release" / "earshot"))
    ap.add_argument("--sherpa", default=None,
                    help="sherpa-onnx-vad executable (default: next to this Python, else PATH)")
    ap.add_argument("--model", type=Path, default=MODEL,
                    help="silero_vad.onnx for sherpa-onnx-vad and onnxruntime")
    ap.add_argument("--only", nargs="+", choices=RUNNERS[:1] + RUNNERS[2:],
                    help="run only these runners (the earshot label process goes with earshot)")
    args = ap.parse_args()

    wanted = set(args.only or RUNNERS)
    if "earshot" in wanted:
        wanted.add("earshot_label_process")
    sherpa = args.sherpa or str(Path(sys.executable).parent / "sherpa-onnx-vad")
    if not Path(sherpa).exists():
        sherpa = shutil.which("sherpa-onnx-vad") or sherpa
    if "sherpa_onnx_vad" in wanted and not Path(sherpa).exists():
        raise SystemExit("sherpa-onnx-vad not found: pip install sherpa-onnx-bin into tools/.venv")
    if not args.model.exists():
        raise SystemExit(f"{args.model}: missing (Models/sources/silero_vad.onnx is the silero-vad 6.2.3 wheel's file)")

    log = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    audio = hour_file()
    import soundfile as sf
    audio_seconds = sf.info(str(audio)).frames / RATE
    warm_page_cache(audio)
    bench_offline = "earshot" in wanted and has_bench_offline(args.earshot, audio)

    runs: dict[str, list[dict]] = {k: [] for k in RUNNERS}
    order = [k for k in RUNNERS if k in wanted]
    with tempfile.TemporaryDirectory(prefix="bench-offline-") as tmp:
        tmpdir = Path(tmp)
        for r in range(args.repeat):
            turn = order[r % len(order):] + order[:r % len(order)]
            for name in turn:
                if name == "earshot":
                    if not bench_offline:
                        continue            # taken from the label process below
                    res = run_earshot_bench(args.earshot, audio)
                elif name == "earshot_label_process":
                    res = run_earshot_label(args.earshot, audio)
                elif name == "sherpa_onnx_vad":
                    res = run_sherpa(sherpa, args.model, audio, tmpdir)
                else:
                    res = run_ort_loop(args.model, audio)
                runs[name].append(res)
                log(f"round {r + 1}/{args.repeat} {name}: {res['wall_seconds']:.2f} s"
                    + (f", {res['segments']} segments" if res.get("segments") is not None else ""))
    if "earshot" in wanted and not bench_offline:
        runs["earshot"] = runs["earshot_label_process"]

    result: dict = {"audio": str(audio.relative_to(ROOT)), "audio_seconds": audio_seconds,
                    "repeats": args.repeat, "threads": 1}
    if "earshot" in wanted:
        result["earshot"] = summary(
            runs["earshot"], audio_seconds,
            source="earshot bench offline" if bench_offline
            else "earshot label process (this build has no `bench offline`)")
        result["earshot_label_process"] = summary(
            runs["earshot_label_process"], audio_seconds,
            command=" ".join(label_command(args.earshot, audio)))
    if "sherpa_onnx_vad" in wanted:
        result["sherpa_onnx_vad"] = summary(
            runs["sherpa_onnx_vad"], audio_seconds,
            command=" ".join(sherpa_command(sherpa, args.model, audio, Path("<tmp>/speech.wav"))))
    if "onnxruntime_loop" in wanted:
        import onnxruntime as ort
        result["onnxruntime_loop"] = summary(runs["onnxruntime_loop"], audio_seconds,
                                             onnxruntime=ort.__version__,
                                             chunks=runs["onnxruntime_loop"][0]["chunks"])
    if "earshot" in result:
        e = result["earshot"]["wall_seconds_median"]
        for key, name in (("ratio_sherpa_over_earshot", "sherpa_onnx_vad"),
                          ("ratio_ortloop_over_earshot", "onnxruntime_loop")):
            if name in result:
                result[key] = round(result[name]["wall_seconds_median"] / e, 2)

    if args.json:
        print(json.dumps(result))
        return 0
    print(f"\n{audio_seconds:.0f} s of 16 kHz mono audio, one thread, median of {args.repeat} "
          f"alternating rounds")
    print(f"{'runner':<24}{'wall s':>9}{'x real time':>13}{'segments':>10}")
    for name in RUNNERS:
        if name in result:
            s = result[name]
            segs = s.get("segments", "")
            print(f"{name:<24}{s['wall_seconds_median']:>9.2f}{s['x_realtime']:>13.0f}{segs!s:>10}")
    if "earshot" in result:
        print(f"earshot figure: {result['earshot']['source']}")
    for key in ("ratio_sherpa_over_earshot", "ratio_ortloop_over_earshot"):
        if key in result:
            print(f"{key}: {result[key]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
