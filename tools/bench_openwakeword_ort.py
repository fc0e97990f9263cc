#!/usr/bin/env python3
"""Peer benchmark: openWakeWord's melspectrogram and embedding models, onnxruntime (one thread)
against Earshot's imports of the same .onnx files, side by side in one run.

onnxruntime times session.run on the inputs openWakeWord gives them (1760 samples; a 76x32 mel
window). Earshot runs `earshot bench model` on packages imported from the same files with
`earshot import` (one stream, one thread). Rounds alternate; medians and their ratio are printed.

Needs scripts/fetch-test-models.sh (the models) and `swift build -c release`.

    tools/.venv/bin/python tools/bench_openwakeword_ort.py [--earshot .build/release/earshot] [--rounds 5] [--precision fp32,bf16]

--precision P,P: Earshot runs each precision (`earshot bench model --precision P`) in every round.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "Tests/.models/openwakeword")

CASES = [
    # name, input name, input shape, earshot import flags
    ("melspectrogram", "input", [1, 1760], ["--chunk", "1760"]),
    ("embedding_model", "input_1", [1, 76, 32, 1], ["--front-end", "features"]),
]


def ort_us(name, input_name, shape, calls=2000):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(os.path.join(MODELS, name + ".onnx"), options, providers=["CPUExecutionProvider"])
    x = (np.random.default_rng(0).standard_normal(shape) * (1000 if name == "melspectrogram" else 1)).astype(np.float32)
    for _ in range(50):
        session.run(None, {input_name: x})
    start = time.perf_counter()
    for _ in range(calls):
        session.run(None, {input_name: x})
    return (time.perf_counter() - start) / calls * 1e6


def earshot_us(binary, package, precision="fp32"):
    out = subprocess.run([binary, "bench", "model", "--model", package, "--precision", precision], capture_output=True, text=True,
                         check=True).stdout
    return float(re.search(r"([0-9.]+) us per", out).group(1))


def alternate(peer, binary, package, precisions, rounds):
    """`rounds` rounds of the peer's time (`peer()`), then Earshot's at each precision; the medians."""
    times, ours = [], {q: [] for q in precisions}
    for _ in range(rounds):
        times.append(peer())
        for q in precisions:
            ours[q].append(earshot_us(binary, package, q))
    return statistics.median(times), {q: statistics.median(v) for q, v in ours.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--earshot", default=os.path.join(ROOT, ".build/release/earshot"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--precision", default="fp32", help="Earshot's precisions, comma-separated (fp32, bf16)")
    args = parser.parse_args()
    precisions = args.precision.split(",")
    work = tempfile.mkdtemp()
    results = {"version": ort.__version__, "rounds": args.rounds}
    if not args.json:
        print(f"onnxruntime {ort.__version__}, one thread; earshot one stream, one thread; {args.rounds} alternating rounds")
    for name, input_name, shape, flags in CASES:
        package = os.path.join(work, name)
        subprocess.run([args.earshot, "import", os.path.join(MODELS, name + ".onnx"), "--output", package] + flags,
                       check=True, capture_output=True)
        p, medians = alternate(lambda: ort_us(name, input_name, shape), args.earshot, package, precisions, args.rounds)
        for q, e in medians.items():
            key = name if q == "fp32" else f"{name} {q}"
            results[key] = {"onnxruntime_us_median": p, "earshot_us_median": e, "ratio_onnxruntime_over_earshot": p / e}
            if not args.json:
                print(f"{name:16s} onnxruntime {p:8.1f} us   earshot {q} {e:8.1f} us   earshot {p / e:.2f}x faster")
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
