#!/usr/bin/env python3
"""False activations of the wake-word models on long negative audio, Earshot beside the references.

The negative audio is every recording of ../shared/data spliced (Speech Commands' 3950 one-second
words and FSDD's 2500 spoken digits, resampled to 16 kHz), with a short gap of quiet noise after
each: about 1.6 hours of real voices, none saying a wake phrase. On it:
- Earshot: `earshot label --model okay-nabu,hey-jarvis,alexa,hey-mycroft` (the shipped packages),
  and again with `--gate silero-vad` (a detection counts only if speech was heard in the second
  before it);
- pymicro-wakeword's rule (the mean of the latest sliding_window_size outputs above the cutoff,
  then 2 s of rest) on TFLite's reference kernels (BUILTIN_REF, which Earshot equals step for
  step) and on pymicro-wakeword's own library (TFLite's optimized kernels).
Prints one row per model: detections and detections per hour of each.

    tools/.venv/bin/python tools/wakeword_false_activations.py [--earshot .build/release/earshot] [--data ../shared/data]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from microwakeword_reference import MODELS, features_of, reference_detections  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def negative_audio(data: Path, out: Path) -> float:
    rng = np.random.default_rng(3)
    parts = []
    files = sorted((data / "speech-commands").rglob("*.flac")) + sorted((data / "fsdd").glob("*.flac"))
    for f in files:
        x, rate = sf.read(f, dtype="float64")
        if x.ndim > 1:
            x = x.mean(axis=1)
        if rate != 16000:
            n = int(round(len(x) * 16000 / rate))
            x = np.interp(np.arange(n) * rate / 16000, np.arange(len(x)), x)
        parts.append(x)
        parts.append(rng.normal(0, 0.002, int(16000 * rng.uniform(0.1, 0.4))))
    audio = np.concatenate(parts)
    sf.write(out, np.clip(audio, -1, 1), 16000, subtype="PCM_16")
    return len(audio) / 16000


def earshot_counts(binary, wav, gate=False):
    names = [m.replace("_", "-") for m in MODELS]
    cmd = [binary, "label", "--model", ",".join(names), "--format", "jsonl", str(wav)] + (["--gate", "silero-vad"] if gate else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    counts = {}
    for line in out.splitlines():
        event = json.loads(line)
        if "time" in event:
            counts[event["label"]] = counts.get(event["label"], 0) + 1
    return counts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--earshot", default=str(ROOT / ".build/release/earshot"))
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "negative.wav"
        hours = negative_audio(Path(args.data), wav) / 3600
        plain = earshot_counts(args.earshot, wav)
        gated = earshot_counts(args.earshot, wav, gate=True)
        audio, _ = sf.read(wav, dtype="int16")
        frames = features_of(audio)
        print(f"negative audio: {hours:.2f} h of speech (Speech Commands and FSDD, spliced), {len(frames)} feature frames")
        print("| model | earshot | per hour | TFLite reference kernels | per hour | pymicro-wakeword library | per hour | earshot, VAD gate | per hour |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name in MODELS:
            label, ref_steps, lib_steps, _ = reference_detections(name, frames)
            ref, lib = len(ref_steps), len(lib_steps)
            e, g = plain.get(label, 0), gated.get(label, 0)
            print(f"| {name} | {e} | {e / hours:.2f} | {ref} | {ref / hours:.2f} | {lib} | {lib / hours:.2f} | {g} | {g / hours:.2f} |")


if __name__ == "__main__":
    main()
