#!/usr/bin/env python3
"""Peer benchmark: Silero VAD on onnxruntime, one thread, chunk by chunk.

Streams the audio exactly as Earshot does for the package in --model-dir
(chunkSamples new samples, contextSamples of context, LSTM state carried) and
times every onnxruntime call. Reports the median over repeats of the mean time
per chunk (and the best repeat), and the resulting multiple of real time. The model run is the
original silero_vad.onnx from the silero-vad wheel named in the package.

Side by side: unless --no-earshot, each round also runs `earshot bench model` (one stream, one
thread, the same blocks) right after the onnxruntime pass, so both meet the same machine load;
the medians of both and their ratio are printed.

Usage: tools/.venv/bin/python tools/bench_silero_ort.py --audio FILE
           --model-dir Models/silero-vad [--repeat N] [--json] [--no-earshot]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from earshot_bench import snake_keys  # noqa: E402

import silero_reference as ref  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--audio", required=True)
    ap.add_argument("--model-dir", type=Path, default=ref.ROOT / "Models" / "silero-vad")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--no-earshot", action="store_true", help="run onnxruntime only")
    ap.add_argument("--earshot", default=str(ref.ROOT / ".build" / "release" / "earshot"))
    args = ap.parse_args()

    import onnxruntime as ort

    manifest = json.loads((args.model_dir / "model.json").read_text())
    a = manifest["audio"]
    rate, chunk, context = a["sampleRate"], a["chunkSamples"], a["contextSamples"]
    if ref.STREAMING.get(rate) != (chunk, context):
        raise SystemExit(f"{args.model_dir}: not a Silero VAD package")
    audio = ref.read_audio(Path(args.audio), rate)
    sess = ref.session(ref.onnx_model_bytes())

    pieces = list(ref.chunks(audio, chunk))
    sr = np.array(rate, dtype=np.int64)
    per_run, earshot_runs = [], []
    for r in range(args.repeat + 1):                     # run 0 warms up
        state = np.zeros((2, 1, 128), dtype=np.float32)
        ctx = np.zeros((1, context), dtype=np.float32)
        total = 0.0
        for piece in pieces:
            x = np.concatenate([ctx, piece[None, :]], axis=1)
            t0 = time.perf_counter()
            _, state = sess.run(None, {"input": x, "state": state, "sr": sr})
            total += time.perf_counter() - t0
            ctx = x[:, -context:]
        if r:
            per_run.append(total / len(pieces))
            if not args.no_earshot:
                out = subprocess.run([args.earshot, "bench", "model", "--model", str(args.model_dir),
                                      "--audio", args.audio, "--repeat", "1", "--json"],
                                     check=True, capture_output=True, text=True).stdout
                earshot_runs.append(snake_keys(json.loads(out))["us_per_chunk_median"])
    us = statistics.median(per_run) * 1e6
    x_rt = (chunk / rate * 1e6) / us
    result = {"runtime": "onnxruntime", "version": ort.__version__,
              "model": manifest["name"], "threads": 1,
              "us_per_chunk_median": round(us, 2), "x_realtime": round(x_rt, 1),
              "us_per_chunk_best": round(min(per_run) * 1e6, 2),
              "chunks": len(pieces), "repeats": args.repeat}
    if earshot_runs:
        e_us = statistics.median(earshot_runs)
        result["earshot_us_per_chunk_median"] = round(e_us, 2)
        result["earshot_x_realtime"] = round((chunk / rate * 1e6) / e_us, 1)
        result["ratio_onnxruntime_over_earshot"] = round(us / e_us, 2)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"onnxruntime {ort.__version__}, {manifest['name']}, 1 thread: "
              f"{us:.1f} us per {chunk}-sample chunk (median of {args.repeat}; best "
              f"{min(per_run) * 1e6:.1f}), "
              f"{x_rt:.0f}x real time, {len(pieces)} chunks")
        if earshot_runs:
            print(f"earshot, same blocks, alternating rounds: {result['earshot_us_per_chunk_median']:.1f} us per chunk, "
                  f"{result['earshot_x_realtime']:.0f}x real time")
            print(f"earshot is {result['ratio_onnxruntime_over_earshot']:.2f}x faster per chunk than onnxruntime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
