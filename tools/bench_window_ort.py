#!/usr/bin/env python3
"""Peer benchmark: a fixed-window classifier (`earshot import --window N --hop H`) on
onnxruntime, one thread, window by window, side by side with `earshot bench model`.

onnxruntime runs the source .onnx on the windows the package's stream classifies (the window
starts as zeros; each step shifts in the hop's new samples, the last hop padded with zeros), and
each round also runs `earshot bench model` (one stream, one thread, the same blocks) right after,
so both meet the same machine load. Prints the medians of the mean time per step and the ratio.

Usage: tools/.venv/bin/python tools/bench_window_ort.py --onnx MODEL.onnx --model-dir PACKAGE
           [--audio FILE] [--repeat N] [--json]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from earshot_bench import earshot_us  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--onnx", required=True, type=Path)
    ap.add_argument("--model-dir", required=True, type=Path)
    ap.add_argument("--audio", default=str(ROOT / "AudioSamples" / "speech-noise-16k.wav"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--earshot", default=str(ROOT / ".build" / "release" / "earshot"))
    args = ap.parse_args()

    import onnxruntime as ort

    a = json.loads((args.model_dir / "model.json").read_text())["audio"]
    rate, hop, context = a["sampleRate"], a["chunkSamples"], a["contextSamples"]
    window = hop + context
    audio, file_rate = sf.read(args.audio, dtype="float32")
    if audio.ndim > 1:
        audio = audio.mean(axis=1)
    if file_rate != rate:
        raise SystemExit(f"{args.audio}: {file_rate} Hz, the package takes {rate} Hz")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(args.onnx), options, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    steps = (len(audio) + hop - 1) // hop
    padded = np.concatenate([np.zeros(context, np.float32), audio, np.zeros(steps * hop - len(audio), np.float32)])
    windows = [padded[k * hop:k * hop + window][None, :].copy() for k in range(steps)]
    per_run, earshot_runs = [], []
    for r in range(args.repeat + 1):  # round 0 warms up
        t0 = time.perf_counter()
        for x in windows:
            sess.run(None, {name: x})
        elapsed = (time.perf_counter() - t0) / steps
        if r:
            per_run.append(elapsed)
            earshot_runs.append(earshot_us(args.earshot, str(args.model_dir), args.audio))
    us, e_us = statistics.median(per_run) * 1e6, statistics.median(earshot_runs)
    result = {"runtime": "onnxruntime", "version": ort.__version__, "model": str(args.onnx.name), "threads": 1,
              "window": window, "hop": hop, "steps": steps, "repeats": args.repeat,
              "us_per_step_median": round(us, 1), "earshot_us_per_step_median": round(e_us, 1),
              "ratio_onnxruntime_over_earshot": round(us / e_us, 2)}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.onnx.name}, window {window}, hop {hop}, {steps} steps, one thread, median of {args.repeat} alternating rounds: "
              f"onnxruntime {ort.__version__} {us:.1f} us per step, earshot {e_us:.1f} us per step "
              f"(earshot is {us / e_us:.2f}x as fast)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
