#!/usr/bin/env python3
"""Peer benchmark: microWakeWord's models, pymicro-wakeword (TFLite's C library with its
optimized kernels, one thread, and pymicro-features' front end) against Earshot's packages of
the same .tflite files, side by side in one run, in microseconds per 10 ms of audio.

- "model": one model step (3 frames, 30 ms) alone: TFLite's Invoke through the C API, against
  `earshot bench model` on the model imported with `--front-end features`.
- "front end + model": what a stream costs: pymicro-features on 10 ms plus a third of a step,
  against `earshot bench model` on the shipped package (front end inside).

Rounds alternate; medians and their ratios are printed (JSON with --json).

    tools/.venv/bin/python tools/bench_microwakeword.py [--earshot .build/release/earshot] [--rounds 5]
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import subprocess
import tempfile
import time

import numpy as np
from pymicro_features import MicroFrontend
from pymicro_wakeword import MicroWakeWord, Model

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from earshot_bench import earshot_us  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {"okay_nabu": Model.OKAY_NABU, "hey_jarvis": Model.HEY_JARVIS, "alexa": Model.ALEXA, "hey_mycroft": Model.HEY_MYCROFT}
AUDIO = os.path.join(ROOT, "AudioSamples/speech-noise-16k.wav")


def tflite_step_us(model, calls=3000):
    mww = MicroWakeWord.from_builtin(model)
    q = np.zeros((1, 3, 40), dtype=np.int8)
    ptr = q.ctypes.data_as(ctypes.c_void_p)
    for _ in range(200):
        mww.lib.TfLiteInterpreterInvoke(mww.interpreter)
    t = time.perf_counter()
    for _ in range(calls):
        mww.lib.TfLiteTensorCopyFromBuffer(mww.input_tensor, ptr, q.nbytes)
        mww.lib.TfLiteInterpreterInvoke(mww.interpreter)
    return (time.perf_counter() - t) / calls * 1e6


def features_us(seconds=10):
    audio = (np.random.default_rng(1).normal(0, 3000, 16000 * seconds)).clip(-32768, 32767).astype("<i2").tobytes()
    fe = MicroFrontend()
    t = time.perf_counter()
    n = 0
    for at in range(0, len(audio) - 319, 320):
        fe.process_samples(audio[at:at + 320])
        n += 1
    return (time.perf_counter() - t) / n * 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--earshot", default=os.path.join(ROOT, ".build/release/earshot"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in MODELS.items():
            features_only = os.path.join(tmp, name)
            subprocess.run([args.earshot, "import", os.path.join(ROOT, f"Models/sources/microwakeword/{name}.tflite"),
                            "--front-end", "features", "--output", features_only], check=True, capture_output=True)
            package = os.path.join(ROOT, "Models", name.replace("_", "-"))
            t_model, e_model, t_stream, e_stream = [], [], [], []
            for _ in range(args.rounds):
                step = tflite_step_us(model)
                t_model.append(step / 3)
                e_model.append(earshot_us(args.earshot, features_only, AUDIO) / 3)
                t_stream.append(features_us() + step / 3)
                e_stream.append(earshot_us(args.earshot, package, AUDIO) / 3)
            m = {k: statistics.median(v) for k, v in
                 [("tflite_model", t_model), ("earshot_model", e_model), ("pymicro_stream", t_stream), ("earshot_stream", e_stream)]}
            m["model_ratio"] = m["tflite_model"] / m["earshot_model"]
            m["stream_ratio"] = m["pymicro_stream"] / m["earshot_stream"]
            m["model"] = name
            rows.append(m)
    if args.json:
        print(json.dumps(rows))
        return
    print("| model | TFLite model step | earshot model step | ratio | pymicro front end + model | earshot package | ratio |")
    print("|---|---|---|---|---|---|---|")
    for m in rows:
        print(f"| {m['model']} | {m['tflite_model']:.2f} us | {m['earshot_model']:.2f} us | **{m['model_ratio']:.2f}x** | "
              f"{m['pymicro_stream']:.2f} us | {m['earshot_stream']:.2f} us | **{m['stream_ratio']:.2f}x** |")


if __name__ == "__main__":
    main()
