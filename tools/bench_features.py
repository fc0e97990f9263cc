#!/usr/bin/env python3
"""Log-mel throughput, side by side: librosa vs `earshot bench features`, same audio, same run.

Both run on one thread: the BLAS/OpenMP thread counts are pinned to 1 before numpy loads, and
earshot's extractor is single-threaded. The audio is AudioSamples/speech-noise-16k.wav repeated
to --seconds (the construction `earshot bench features` uses). Configuration on both sides:
16 kHz, n_fft 512, hop 160, Hann, centred, 64 Slaney mels, power 2, dB with top_db 80.

    tools/.venv/bin/python tools/bench_features.py [--seconds 180] [--repeat 5] [--json]
"""
import os

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[var] = "1"

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from earshot_bench import snake_keys  # noqa: E402

import librosa
import numpy as np
import soundfile

ROOT = Path(__file__).resolve().parent.parent


def librosa_logmel(y):
    mel = librosa.feature.melspectrogram(y=y, sr=16000, n_fft=512, hop_length=160, n_mels=64)
    return librosa.power_to_db(mel, ref=1.0, top_db=80.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--audio", default=str(ROOT / "AudioSamples/speech-noise-16k.wav"))
    parser.add_argument("--earshot", default=str(ROOT / ".build/release/earshot"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    source, rate = soundfile.read(args.audio, dtype="float32")
    if source.ndim > 1:
        source = source.mean(axis=1)
    assert rate == 16000, f"{args.audio}: {rate} Hz, expected 16000"
    total = int(args.seconds * 16000)
    y = np.resize(source, total).astype(np.float32)  # repeats the file, as earshot does

    if not Path(args.earshot).exists():
        sys.exit(f"{args.earshot} not found: build it first with `swift build -c release`")

    # Alternate the two, round by round, so that both meet the same machine load (it is shared
    # and noisy); report the median of each.
    librosa_logmel(y[:16000])  # warm-up: imports, caches
    times, earshot_times = [], []
    frames = 0
    for _ in range(args.repeat):
        start = time.perf_counter()
        out = librosa_logmel(y)
        times.append(time.perf_counter() - start)
        frames = out.shape[1]
        result = subprocess.run(
            [args.earshot, "bench", "features", "--seconds", str(args.seconds), "--repeat", "3",
             "--audio", args.audio, "--json"],
            check=True, capture_output=True, text=True)
        earshot = snake_keys(json.loads(result.stdout))
        earshot_times.append(earshot["seconds_median"])
    librosa_median = statistics.median(times)
    earshot["seconds_median"] = statistics.median(earshot_times)
    earshot["x_realtime"] = args.seconds / earshot["seconds_median"]

    report = {
        "audio_seconds": args.seconds,
        "librosa": {"version": librosa.__version__, "numpy": np.__version__, "frames": frames,
                    "seconds_median": librosa_median, "x_realtime": args.seconds / librosa_median},
        "earshot": {"frames": earshot["frames"], "seconds_median": earshot["seconds_median"],
                    "x_realtime": earshot["x_realtime"]},
        "ratio_earshot_over_librosa": librosa_median / earshot["seconds_median"],
    }
    if args.json:
        print(json.dumps(report))
        return
    print(f"log-mel, {args.seconds:.0f} s of 16 kHz audio, one thread, median of {args.repeat} alternating rounds:")
    print(f"  librosa {librosa.__version__}: {librosa_median:.4f} s  ({report['librosa']['x_realtime']:.0f}x real time, {frames} frames)")
    print(f"  earshot:        {earshot['seconds_median']:.4f} s  ({earshot['x_realtime']:.0f}x real time, {earshot['frames']} frames)")
    print(f"  earshot is {report['ratio_earshot_over_librosa']:.1f}x librosa")


if __name__ == "__main__":
    main()
