#!/usr/bin/env python3
"""Reference speech probabilities for the Silero VAD packages, from onnxruntime.

Runs the original silero_vad.onnx (Models/sources/silero_vad.onnx, from the
silero-vad 6.2.3 wheel; its sha256 is checked) on one thread and streams it the way silero-vad's own
OnnxWrapper / get_speech_timestamps do:

  * the audio is cut into chunks of 512 samples (16 kHz) or 256 (8 kHz); a
    last partial chunk is zero-padded at its end to a full chunk;
  * each model input is [context | chunk], where context is the last 64 (16 kHz)
    or 32 (8 kHz) samples of the previous model input, zeros for the first chunk;
  * the LSTM state, input `state` of shape [2, 1, 128] = [h, c], starts at zero
    and is replaced by the output `stateN` after every chunk;
  * input `sr` is an int64 scalar, 16000 or 8000; output `output` has shape
    [1, 1]: the speech probability of the chunk.

Writes Tests/EarshotModelTests/Goldens/silero-vad-16k.json and
silero-vad-8k.json (one probability per chunk, 7 significant digits).

Usage: tools/.venv/bin/python tools/silero_reference.py [--only 16k|8k]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "Models" / "sources" / "silero_vad.onnx"
VERSION = "6.2.3"
ONNX_MEMBER = "silero_vad/data/silero_vad.onnx"
ONNX_SHA256 = "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"

GOLDENS = ROOT / "Tests" / "EarshotModelTests" / "Goldens"

CASES = {
    "16k": {"model": "silero-vad", "audio": "AudioSamples/speech-noise-16k.wav",
            "rate": 16000, "golden": "silero-vad-16k.json"},
    "8k": {"model": "silero-vad-8k", "audio": "AudioSamples/speech-8k.wav",
           "rate": 8000, "golden": "silero-vad-8k.json"},
}

STREAMING = {16000: (512, 64), 8000: (256, 32)}  # rate -> (chunk, context)

PARTIAL_NOTE = ("The audio is cut into chunks of chunkSamples; a last partial chunk is "
                "zero-padded at its end to a full chunk (as silero-vad's get_speech_timestamps "
                "does), so there are ceil(samples / chunkSamples) probabilities. Each model "
                "input is the previous input's last contextSamples samples (zeros for the "
                "first chunk) followed by the chunk; the LSTM state starts at zero and carries "
                "from chunk to chunk.")


def onnx_model_bytes() -> bytes:
    import hashlib
    model = SOURCE.read_bytes()
    digest = hashlib.sha256(model).hexdigest()
    if digest != ONNX_SHA256:
        raise SystemExit(f"{SOURCE}: sha256 {digest}, expected {ONNX_SHA256} (silero-vad {VERSION})")
    return model


def session(model: bytes | str):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])


def read_audio(path: Path, rate: int) -> np.ndarray:
    import soundfile as sf
    audio, sr = sf.read(str(path), dtype="float32", always_2d=True)
    if sr != rate:
        raise SystemExit(f"{path}: sample rate {sr}, expected {rate}")
    return audio.mean(axis=1, dtype=np.float32) if audio.shape[1] > 1 else audio[:, 0].copy()


def chunks(audio: np.ndarray, chunk: int):
    """Full chunks of the audio; the last partial one zero-padded."""
    for start in range(0, len(audio), chunk):
        piece = audio[start:start + chunk]
        if len(piece) < chunk:
            piece = np.concatenate([piece, np.zeros(chunk - len(piece), dtype=audio.dtype)])
        yield piece


def stream(sess, audio: np.ndarray, rate: int, with_state: bool = False, dtype=np.float32):
    """Speech probability per chunk (and the state after each chunk if asked).

    `sess` is anything with onnxruntime's run(None, feeds) interface."""
    chunk, context = STREAMING[rate]
    audio = audio.astype(dtype)
    state = np.zeros((2, 1, 128), dtype=dtype)
    ctx = np.zeros((1, context), dtype=dtype)
    sr = np.array(rate, dtype=np.int64)
    probs, states = [], []
    for piece in chunks(audio, chunk):
        x = np.concatenate([ctx, piece[None, :]], axis=1)
        out, state = sess.run(None, {"input": x, "state": state, "sr": sr})
        ctx = x[:, -context:]
        probs.append(float(out[0, 0]))
        if with_state:
            states.append(state[:, 0, :].copy())
    return (np.array(probs), np.array(states)) if with_state else np.array(probs)


def write_golden(case: dict, probs: np.ndarray, n_samples: int) -> Path:
    import onnxruntime as ort
    chunk, context = STREAMING[case["rate"]]
    doc = {
        "generator": "tools/silero_reference.py",
        "onnxruntime": ort.__version__,
        "model": case["model"],
        "source": f"PyPI silero-vad {VERSION}, {ONNX_MEMBER} (sha256 {ONNX_SHA256})",
        "audio": case["audio"],
        "sampleRate": case["rate"],
        "samples": int(n_samples),
        "chunkSamples": chunk,
        "contextSamples": context,
        "note": PARTIAL_NOTE,
        "probabilities": [float(f"{p:.7g}") for p in probs],
    }
    GOLDENS.mkdir(parents=True, exist_ok=True)
    path = GOLDENS / case["golden"]
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=sorted(CASES))
    args = ap.parse_args()
    sess = session(onnx_model_bytes())
    for key, case in CASES.items():
        if args.only and key != args.only:
            continue
        audio = read_audio(ROOT / case["audio"], case["rate"])
        probs = stream(sess, audio, case["rate"])
        path = write_golden(case, probs, len(audio))
        print(f"{path.relative_to(ROOT)}: {len(probs)} chunks, "
              f"{(probs >= 0.5).mean() * 100:.1f}% >= 0.5, {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
