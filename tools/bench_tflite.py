#!/usr/bin/env python3
"""Peer benchmark: float .tflite models of the conformance set, TFLite (ai-edge-litert's
Interpreter, default resolver with XNNPACK, one thread) against Earshot's imports of the same
files (`earshot bench model`: one stream, one thread), side by side in one run.

TFLite times invoke() on the input each model takes per step (openWakeWord's melspectrogram on
1760 samples, its embedding model on a 76x32 window, a head on 16 embeddings, BirdNET on a 3 s
window of 144,000 samples at 48 kHz, the hybrid audio classifier of
tools/make_tflite_hybrid_corpus.py on 1 s at 16 kHz, EfficientWord-Net's log-mel on 1 s at 16 kHz
and its embedding on that log-mel's 98 x 64), and openWakeWord's whole step (melspectrogram, embedding, head: what its Model runs every 80 ms).
Earshot runs the packages `earshot import` makes of the same files, and the composed openWakeWord
package of the .tflite files and of the .onnx ones (the same network). Rounds alternate; medians
and their ratio are printed.

Needs scripts/fetch-test-models.sh (the models) and `swift build -c release`.

    tools/.venv/bin/python tools/bench_tflite.py [--earshot .build/release/earshot] [--rounds 5] [--json] [--precision fp32,bf16]

--precision P,P: Earshot runs each precision (`earshot bench model --precision P`) in every round.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
from ai_edge_litert import interpreter as litert

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_openwakeword_ort import alternate  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OWW = os.path.join(ROOT, "Tests/.models/openwakeword-tflite")
OWW_ONNX = os.path.join(ROOT, "Tests/.models/openwakeword")
BIRDNET = os.path.join(ROOT, "Tests/.models/birdnet")
HYBRID = os.path.join(ROOT, "Tests/EarshotTests/Goldens/conformance/tflite-hybrid")
EFFICIENTWORD = os.path.join(ROOT, "Tests/.models/efficientword-net")

# name, model file, TFLite input shape, earshot import flags
CASES = [
    ("melspectrogram", os.path.join(OWW, "melspectrogram.tflite"), [1, 1760], ["--chunk", "1760"]),
    ("embedding_model", os.path.join(OWW, "embedding_model.tflite"), [1, 76, 32, 1], []),
    ("alexa_v0.1 (head)", os.path.join(OWW, "alexa_v0.1.tflite"), [1, 16, 96], []),
    ("hey_jarvis_v0.1 (head)", os.path.join(OWW, "hey_jarvis_v0.1.tflite"), [1, 16, 96], []),
    ("BirdNET FP32 (3 s)", os.path.join(BIRDNET, "BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite"), [1, 144000], ["--rate", "48000"]),
    ("hybrid audio classifier (1 s)", os.path.join(HYBRID, "audio-classifier.tflite"), [1, 16000], []),
    ("EfficientWord-Net logmelcalc (1 s)", os.path.join(EFFICIENTWORD, "logmelcalc.tflite"), [1, 16000], []),
    ("EfficientWord-Net baseModel", os.path.join(EFFICIENTWORD, "baseModel.tflite"), [1, 98, 64, 1], []),
]


def interpreter(path, shape):
    i = litert.Interpreter(model_path=path, num_threads=1)
    detail = i.get_input_details()[0]
    if list(detail["shape"]) != shape:
        i.resize_tensor_input(detail["index"], shape)
    i.allocate_tensors()
    x = (np.random.default_rng(0).standard_normal(shape) * (1000 if "melspectrogram" in path else 1)).astype(np.float32)
    return i, detail["index"], x


def tflite_us(calls):
    """Microseconds per call of `calls`, a list of (interpreter, input index, input)."""
    for _ in range(5):
        for i, at, x in calls:
            i.set_tensor(at, x)
            i.invoke()
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < 1.0:
        for i, at, x in calls:
            i.set_tensor(at, x)
            i.invoke()
        n += 1
    return (time.perf_counter() - start) / n * 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--earshot", default=os.path.join(ROOT, ".build/release/earshot"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--pipelines", action="store_true", help="only openWakeWord's whole step")
    parser.add_argument("--precision", default="fp32", help="Earshot's precisions, comma-separated (fp32, bf16)")
    parser.add_argument("--only", help="only the cases whose name contains this")
    args = parser.parse_args()
    precisions = args.precision.split(",")
    work = tempfile.mkdtemp()
    results = {"reference": "ai-edge-litert Interpreter, XNNPACK, one thread", "rounds": args.rounds}
    if not args.json:
        print(f"TFLite (ai-edge-litert, XNNPACK) one thread; earshot one stream, one thread; {args.rounds} alternating rounds")

    def compare(name, calls, package):
        p, medians = alternate(lambda: tflite_us(calls), args.earshot, package, precisions, args.rounds)
        for q, e in medians.items():
            key = name if q == "fp32" else f"{name} {q}"
            results[key] = {"tflite_us_median": p, "earshot_us_median": e, "ratio_tflite_over_earshot": p / e}
            if not args.json:
                print(f"{name:28s} TFLite {p:9.1f} us   earshot {q} {e:9.1f} us   earshot {p / e:.2f}x faster")

    def imported(name, source, flags):
        package = os.path.join(work, re.sub(r"[^a-z0-9]+", "-", name.lower()))
        subprocess.run([args.earshot, "import", source, "--output", package] + flags, check=True, capture_output=True)
        return package

    for name, path, shape, flags in [] if args.pipelines else CASES:
        if args.only and args.only not in name:
            continue
        compare(name, [interpreter(path, shape)], imported(name, path, flags))
    if args.only:
        if args.json:
            print(json.dumps(results))
        return
    # openWakeWord's step: 1760 samples to 8 frames, the embedding of 76 frames, the head.
    step = [interpreter(os.path.join(OWW, "melspectrogram.tflite"), [1, 1760]), interpreter(os.path.join(OWW, "embedding_model.tflite"), [1, 76, 32, 1]),
            interpreter(os.path.join(OWW, "alexa_v0.1.tflite"), [1, 16, 96])]
    compare("alexa pipeline (.tflite)", step, imported("alexa pipeline tflite", os.path.join(OWW, "alexa_v0.1.tflite"), ["--front-end", "openwakeword"]))
    onnx = imported("alexa pipeline onnx", os.path.join(OWW_ONNX, "alexa_v0.1.onnx"), ["--front-end", "openwakeword"])
    compare("alexa pipeline (.onnx)", step, onnx)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
