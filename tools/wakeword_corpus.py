#!/usr/bin/env python3
"""A wake-word corpus with exact truth, and how many phrases each model finds, Earshot beside
TFLite's reference kernels (pymicro-wakeword's rule) and pymicro-wakeword's own library.

Each wake phrase ("okay nabu", "hey jarvis", "alexa", "hey mycroft") is spoken by espeak-ng in
eight voices, three speeds and two pitches (48 takes a phrase), each take placed between other
sentences, noise and silence; the truth is where each take ends. A detection is a hit when it
comes from 0.3 s before to 1.5 s after the end of a take of its own phrase (each take counted once); any other
detection is a false one.

    tools/.venv/bin/python tools/wakeword_corpus.py [--earshot .build/release/earshot]
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from microwakeword_reference import MODELS, features_of, reference_detections  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PHRASES = {"okay_nabu": "okay nabu", "hey_jarvis": "hey jarvis", "alexa": "alexa", "hey_mycroft": "hey mycroft"}
VOICES = ["en-us", "en-gb", "en-gb-scotland", "en-029", "en-gb-x-rp", "en-us-nyc", "en-gb-x-gbclan", "en-gb-x-gbcwmd"]
SPEEDS = [130, 160, 190]
PITCHES = [40, 65]
FILLERS = ["the meeting moved to thursday afternoon", "please pass the salt and pepper", "seven boats sailed past the harbour",
           "turn left at the second light", "my brother bought a new bicycle", "it might rain later this evening"]


def speak(text, voice, speed, pitch, path):
    raw = path.with_suffix(".raw.wav")
    subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", str(raw), text], check=True)
    # Trimmed of espeak-ng's silence before and after, so that the truth is where the speech ends.
    subprocess.run(["sox", "-R", "-D", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(path), "norm", "-3",
                    "silence", "1", "0.02", "-50d", "reverse", "silence", "1", "0.02", "-50d", "reverse"], check=True)
    x, _ = sf.read(path, dtype="float64")
    return x


def build(tmp: Path):
    rng = np.random.default_rng(11)
    parts, truth, at = [], [], 0
    k = 0
    takes = [(m, v, s, p) for m in PHRASES for v in VOICES for s in SPEEDS for p in PITCHES]
    rng.shuffle(takes)
    for model, voice, speed, pitch in takes:
        filler = speak(FILLERS[k % len(FILLERS)], VOICES[(k + 3) % len(VOICES)], 160, 50, tmp / f"f{k}.wav")
        take = speak(PHRASES[model], voice, speed, pitch, tmp / f"t{k}.wav")
        for piece in (filler, rng.normal(0, 0.003, int(16000 * rng.uniform(0.6, 1.2))), take,
                      rng.normal(0, 0.003, int(16000 * rng.uniform(1.6, 2.4)))):
            parts.append(piece)
            at += len(piece)
            if piece is take:
                truth.append((model, at / 16000))
        k += 1
    audio = np.concatenate(parts)
    path = tmp / "corpus.wav"
    sf.write(path, np.clip(audio, -1, 1), 16000, subtype="PCM_16")
    return path, truth, len(audio) / 16000


def score(times, truth, model):
    ends = sorted(t for m, t in truth if m == model)
    used, hits, false = set(), 0, 0
    for t in times:
        match = next((i for i, e in enumerate(ends) if i not in used and -0.3 <= t - e <= 1.5), None)
        if match is None:
            false += 1
        else:
            used.add(match)
            hits += 1
    return hits, len(ends), false


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--earshot", default=str(ROOT / ".build/release/earshot"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        wav, truth, seconds = build(Path(d))
        out = subprocess.run([args.earshot, "label", "--model", ",".join(m.replace("_", "-") for m in MODELS), "--format", "jsonl", str(wav)],
                             check=True, capture_output=True, text=True).stdout
        events = [json.loads(line) for line in out.splitlines()]
        audio, _ = sf.read(wav, dtype="int16")
        frames = features_of(audio)
        print(f"corpus: {len(truth)} takes ({len(truth) // 4} per phrase: {len(VOICES)} voices, {len(SPEEDS)} speeds, {len(PITCHES)} pitches), "
              f"{seconds / 60:.1f} min")
        print("| model | takes | earshot found | false | TFLite reference kernels found | false | pymicro-wakeword library found | false |")
        print("|---|---|---|---|---|---|---|---|")
        for name in MODELS:
            wake_word, ref_steps, lib_steps, stride = reference_detections(name, frames)
            step = 160 * stride / 16000
            # The reference's output of step s is ready when its last frame is: (s + 1) * step + 20 ms.
            ref_times = [(s + 1) * step + 0.02 for s in ref_steps]
            lib_times = [(s + 1) * step + 0.02 for s in lib_steps]
            mine = [e["time"] for e in events if e.get("label") == wake_word]
            h, n, f = score(mine, truth, name)
            rh, _, rf = score(ref_times, truth, name)
            lh, _, lf = score(lib_times, truth, name)
            print(f"| {name} | {n} | {h} | {f} | {rh} | {rf} | {lh} | {lf} |")


if __name__ == "__main__":
    main()
