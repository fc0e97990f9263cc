#!/usr/bin/env python3
"""Writes reference feature data for the Earshot feature tests.

Usage (from the repository root):
    tools/.venv/bin/python tools/make_feature_goldens.py

Reads AudioSamples/ (made by tools/make_samples.sh) and writes one folder per
configuration into Tests/EarshotFeaturesTests/Goldens/<config>/ holding raw
little-endian float32 files plus meta.json. Everything is computed in float64
and only stored as float32.
"""

import csv
import hashlib
import json
import platform
import sys
from pathlib import Path

import librosa
import numpy as np
import scipy
import scipy.fft
import scipy.signal
import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "AudioSamples"
OUT = ROOT / "Tests" / "EarshotFeaturesTests" / "Goldens"
GENERATOR = "tools/make_feature_goldens.py"

EXCERPT_SECONDS = 2.0
# The excerpt starts this long after the chosen speech onset, so that it opens
# inside speech rather than on the boundary.
ONSET_OFFSET_SECONDS = 0.1


def read_pcm16(path):
    """Mono PCM16 file as float64 in [-1, 1): sample / 32768."""
    data, sr = sf.read(str(path), dtype="int16", always_2d=True)
    if data.shape[1] != 1:
        raise ValueError(f"{path} is not mono")
    return data[:, 0].astype(np.float64) / 32768.0, sr


def read_truth(stem):
    with open(SAMPLES / f"{stem}.truth.csv", newline="") as f:
        return [
            {"channel": int(r["channel"]), "start": float(r["start"]),
             "end": float(r["end"]), "label": r["label"]}
            for r in csv.DictReader(f)
        ]


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def speech_over_noise_onset(rows):
    """First speech segment that directly follows a noise segment (speech over a noise bed)."""
    for prev, row in zip(rows, rows[1:]):
        if row["label"] == "speech" and prev["label"] == "noise" and prev["end"] == row["start"]:
            return row
    raise ValueError("no speech-over-noise segment in truth file")


def first_speech(rows):
    return next(r for r in rows if r["label"] == "speech")


def excerpt_inside(segment, sr, length):
    start = round(segment["start"] * sr) + round(ONSET_OFFSET_SECONDS * sr)
    seg_end = round(segment["end"] * sr)
    if start + length > seg_end:
        raise ValueError(f"excerpt runs past the speech segment {segment}")
    return start


def stats(a):
    return {"min": float(np.min(a)), "max": float(np.max(a))}


def compute(name, y, sr, p, source_meta, log_desc):
    folder = OUT / name
    folder.mkdir(parents=True, exist_ok=True)
    # Features are computed from exactly the samples stored in input.f32 (float32
    # rounding matters only for resampled input), widened back to float64.
    y = np.asarray(y, dtype=np.float64).astype("<f4").astype(np.float64)
    n_fft, hop, win_length = p["n_fft"], p["hop_length"], p["win_length"]

    spec = librosa.stft(
        y, n_fft=n_fft, hop_length=hop, win_length=win_length, window=p["window"],
        center=p["center"], pad_mode=p["pad_mode"], dtype=np.complex128,
    )
    mag = np.abs(spec)  # [bins][frames]
    fb = librosa.filters.mel(
        sr=sr, n_fft=n_fft, n_mels=p["n_mels"], fmin=p["fmin"], fmax=p["fmax"],
        htk=p["htk"], norm=p["norm"], dtype=np.float64,
    )
    mel = fb @ (mag ** p["power"])  # [n_mels][frames]

    # Cross-check the explicit pipeline against librosa's own mel spectrogram.
    mel_ref = librosa.feature.melspectrogram(
        y=y, sr=sr, n_fft=n_fft, hop_length=hop, win_length=win_length, window=p["window"],
        center=p["center"], pad_mode=p["pad_mode"], power=p["power"], n_mels=p["n_mels"],
        fmin=p["fmin"], fmax=p["fmax"], htk=p["htk"], norm=p["norm"], dtype=np.float64,
    )
    assert np.allclose(mel, mel_ref, rtol=1e-10, atol=1e-12 * np.max(mel)), name

    log_mel = p["log"](mel)
    mfcc = scipy.fft.dct(log_mel, type=2, norm="ortho", axis=-2)[: p["n_mfcc"]]
    mfcc_ref = librosa.feature.mfcc(S=log_mel, n_mfcc=p["n_mfcc"], dct_type=2, norm="ortho", lifter=0)
    assert np.allclose(mfcc, mfcc_ref, rtol=1e-12, atol=1e-9), name

    n_frames = mag.shape[1]
    expected = 1 + len(y) // hop if p["center"] else 1 + (len(y) - n_fft) // hop
    assert n_frames == expected, (name, n_frames, expected)
    assert mag.shape[0] == n_fft // 2 + 1

    arrays = {
        "input.f32": (y, "samples"),
        "stft_magnitude.f32": (mag.T, "[frames][bins], |STFT|, bins = n_fft/2 + 1"),
        "mel_filterbank.f32": (fb, "[n_mels][bins]"),
        "log_mel.f32": (log_mel.T, "[frames][n_mels]"),
        "mfcc.f32": (mfcc.T, "[frames][n_mfcc]"),
    }
    files = {}
    for fname, (a, layout) in arrays.items():
        a = np.ascontiguousarray(a)
        a.astype("<f4").tofile(folder / fname)
        files[fname] = {"shape": list(a.shape), "layout": layout, **stats(a)}

    window = p["window"]
    meta = {
        "config": name,
        "generator": GENERATOR,
        "command": f"tools/.venv/bin/python {GENERATOR}",
        "versions": {
            "python": platform.python_version(),
            "librosa": librosa.__version__,
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "soundfile": sf.__version__,
        },
        "storage": "raw little-endian float32, row-major, no header; computed in float64 "
                   "from the float32 samples in input.f32",
        "source": source_meta,
        "sample_rate": sr,
        "stft": {
            "n_fft": n_fft,
            "hop_length": hop,
            "win_length": win_length,
            "window": p["window_desc"] if not isinstance(window, str) else window,
            "window_periodic": p["window_periodic"],
            "window_placement": (
                f"window of win_length zero-padded equally on both sides to n_fft "
                f"({(n_fft - win_length) // 2} zeros before, "
                f"{n_fft - win_length - (n_fft - win_length) // 2} after)"
                if win_length < n_fft else "window fills the whole frame"
            ),
            "center": p["center"],
            "pad_mode": p["pad_mode"] if p["center"] else None,
            "padding": (
                f"{n_fft // 2} samples each side, mode {p['pad_mode']}; frame t starts at "
                f"sample t*hop - {n_fft // 2} of the input" if p["center"]
                else "none; frame t covers input samples [t*hop, t*hop + n_fft)"
            ),
            "frames": n_frames,
            "frames_formula": "1 + len // hop" if p["center"] else "1 + (len - n_fft) // hop",
            "dft": "unnormalised, X[k] = sum_n w[n] x[n] exp(-2 pi i k n / n_fft)",
        },
        "power": p["power"],
        "mel": {
            "n_mels": p["n_mels"],
            "fmin": p["fmin"],
            "fmax": p["fmax"],
            "htk": p["htk"],
            "scale": "HTK (2595 log10(1 + f/700))" if p["htk"] else "Slaney (linear below 1 kHz, log above)",
            "norm": p["norm"],
            "mel_spectrogram": "mel_filterbank @ |STFT|^power",
        },
        "log": log_desc,
        "mfcc": {
            "n_mfcc": p["n_mfcc"],
            "formula": "scipy.fft.dct(log_mel, type=2, norm='ortho', along the mel axis)[:n_mfcc]; no liftering",
            "checked_against": "librosa.feature.mfcc(S=log_mel, dct_type=2, norm='ortho', lifter=0)",
        },
        "files": files,
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main():
    OUT.mkdir(parents=True, exist_ok=True)

    # Configs 1 and 3: 2.0 s of speech over white noise from speech-noise-16k.wav.
    src16 = SAMPLES / "speech-noise-16k.wav"
    y16, sr16 = read_pcm16(src16)
    assert sr16 == 16000
    seg = speech_over_noise_onset(read_truth("speech-noise-16k"))
    length16 = round(EXCERPT_SECONDS * sr16)
    start16 = excerpt_inside(seg, sr16, length16)
    x16 = y16[start16:start16 + length16]
    source16 = {
        "file": "AudioSamples/speech-noise-16k.wav",
        "sha256": sha256(src16),
        "decode": "PCM16 sample / 32768",
        "excerpt": {
            "start_sample": start16,
            "length": length16,
            "start_seconds": start16 / sr16,
            "selection": (
                f"{ONSET_OFFSET_SECONDS} s after the onset of the speech-over-noise segment "
                f"({seg['start']:.3f}-{seg['end']:.3f} s in speech-noise-16k.truth.csv)"
            ),
        },
    }

    compute(
        "16k-n512-h160-m64", x16, sr16,
        dict(n_fft=512, hop_length=160, win_length=512, window="hann", window_periodic=True,
             center=True, pad_mode="reflect", power=2.0, n_mels=64, fmin=0.0, fmax=8000.0,
             htk=False, norm="slaney", n_mfcc=20,
             log=lambda m: librosa.power_to_db(m, ref=1.0, amin=1e-10, top_db=None)),
        source16,
        {"formula": "10 * log10(max(mel, amin)) - 10 * log10(max(ref, amin))",
         "call": "librosa.power_to_db(mel, ref=1.0, amin=1e-10, top_db=None)",
         "ref": 1.0, "amin": 1e-10, "top_db": None},
    )

    hamming = scipy.signal.get_window("hamming", 400, fftbins=False)
    compute(
        "16k-n512-w400-h160-m40-hamming", x16, sr16,
        dict(n_fft=512, hop_length=160, win_length=400, window=hamming,
             window_desc="scipy.signal.get_window('hamming', 400, fftbins=False): symmetric, "
                         "w[n] = 0.54 - 0.46 cos(2 pi n / 399)",
             window_periodic=False, center=False, pad_mode="constant", power=1.0,
             n_mels=40, fmin=20.0, fmax=7600.0, htk=True, norm=None, n_mfcc=13,
             log=lambda m: np.log10(m + 1e-6)),
        source16,
        {"formula": "log10(mel + 1e-6)", "call": "np.log10(mel + 1e-6)", "epsilon": 1e-6},
    )

    # Config 2: speech-44k.wav resampled to 22050 Hz, then a 2.0 s excerpt.
    src44 = SAMPLES / "speech-44k.wav"
    y44, sr44 = read_pcm16(src44)
    assert sr44 == 44100
    sr22 = 22050
    y22 = librosa.resample(y44, orig_sr=sr44, target_sr=sr22, res_type="soxr_hq")
    seg = first_speech(read_truth("speech-44k"))
    length22 = round(EXCERPT_SECONDS * sr22)
    start22 = excerpt_inside(seg, sr22, length22)
    x22 = y22[start22:start22 + length22]
    source22 = {
        "file": "AudioSamples/speech-44k.wav",
        "sha256": sha256(src44),
        "decode": "PCM16 sample / 32768",
        "resample": {
            "call": "librosa.resample(y, orig_sr=44100, target_sr=22050, res_type='soxr_hq')",
            "applied_to": f"the whole file ({len(y44)} samples at 44100 Hz -> {len(y22)} at 22050 Hz), "
                          "before cutting the excerpt",
            "soxr": __import__("soxr").__version__,
        },
        "excerpt": {
            "start_sample": start22,
            "length": length22,
            "sample_rate": sr22,
            "start_seconds": start22 / sr22,
            "start_sample_44100": start22 * 2,
            "selection": (
                f"{ONSET_OFFSET_SECONDS} s after the onset of the first speech segment "
                f"({seg['start']:.3f}-{seg['end']:.3f} s in speech-44k.truth.csv); indices are "
                "into the resampled 22050 Hz signal"
            ),
        },
    }
    compute(
        "22k-n2048-h512-m128", x22, sr22,
        dict(n_fft=2048, hop_length=512, win_length=2048, window="hann", window_periodic=True,
             center=True, pad_mode="constant", power=2.0, n_mels=128, fmin=20.0, fmax=8000.0,
             htk=True, norm="slaney", n_mfcc=13,
             log=lambda m: librosa.power_to_db(m, ref=1.0, amin=1e-10, top_db=80.0)),
        source22,
        {"formula": "max(10 * log10(max(mel, amin)) - 10 * log10(max(ref, amin)), "
                    "max_over_excerpt - top_db)",
         "call": "librosa.power_to_db(mel, ref=1.0, amin=1e-10, top_db=80.0)",
         "ref": 1.0, "amin": 1e-10, "top_db": 80.0,
         "top_db_reference": "the maximum of the dB values over the whole excerpt (all frames and "
                             "mel bands), so frame values depend on the whole 2.0 s"},
    )

    for d in sorted(p for p in OUT.iterdir() if p.is_dir()):
        m = json.loads((d / "meta.json").read_text())
        shapes = ", ".join(f"{k} {v['shape']}" for k, v in m["files"].items())
        print(f"{d.name}: {shapes}")


if __name__ == "__main__":
    sys.exit(main())
