#!/usr/bin/env python3
"""Reference speech segments from silero-vad's own get_speech_timestamps and VADIterator.

The segments are computed on GIVEN per-chunk speech probabilities (not on
audio), so that Earshot's segment/label logic can be checked for parity on the
same probabilities:

  * silero-vad 6.2.3 is imported straight from its PyPI wheel
    (tools/.cache/silero_vad-6.2.3-py3-none-any.whl, a zip on sys.path; it is
    not installed). Its utils_vad.py imports torch at module level but the
    segment logic only uses a few tensor helpers, so a minimal torch stand-in
    (numpy based, see _install_torch_shim) is put in sys.modules first. Any
    other torch attribute raises, so nothing is silently faked.
  * get_speech_timestamps is called with an all-zero "audio" of the wanted
    length and a model object whose __call__(chunk, sr) returns the next given
    probability. It calls the model once per window_size_samples chunk
    (512 at 16 kHz, 256 at 8 kHz), the last partial chunk zero-padded to a full
    chunk, so ceil(audioSamples / chunkSamples) must equal the number of
    probabilities; this is checked, as are the chunk lengths and the sample
    rate passed to the model. The result is also checked against the
    package's get_speech_timestamps_from_probs on the same probabilities.
  * VADIterator is fed one full chunk per probability.

Writes Tests/EarshotTests/Goldens/vad_segments.json.

Usage: tools/.venv/bin/python tools/vad_segments_reference.py [--wheel PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import types
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WHEEL = ROOT / "tools" / ".cache" / "silero_vad-6.2.3-py3-none-any.whl"
OUT = ROOT / "Tests" / "EarshotTests" / "Goldens" / "vad_segments.json"
MODEL_GOLDENS = "Tests/EarshotModelTests/Goldens"

WINDOW = {16000: 512, 8000: 256}

# ---------------------------------------------------------------------------
# torch stand-in


class _Tensor(np.ndarray):
    """numpy array with the two torch.Tensor methods utils_vad uses."""

    def dim(self):
        return self.ndim

    def item(self):  # noqa: D401 - same as numpy's
        return np.ndarray.item(self)


def _as_tensor(x):
    return np.asarray(x, dtype=np.float32).view(_Tensor)


class _NoGrad:
    def __call__(self, fn):
        return fn

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _pad(x, pad, *args, **kwargs):
    if len(pad) != 2 or args or kwargs:
        raise NotImplementedError("torch shim: only right/left zero padding of 1-D tensors")
    return np.pad(np.asarray(x), (int(pad[0]), int(pad[1]))).view(_Tensor)


def _install_torch_shim():
    torch = types.ModuleType("torch")
    torch.__version__ = "0.0-shim"
    torch.Tensor = _as_tensor
    torch.is_tensor = lambda x: isinstance(x, _Tensor)
    torch.no_grad = _NoGrad
    torch.set_num_threads = lambda n: None
    torch.device = lambda name: name
    nn = types.ModuleType("torch.nn")
    functional = types.ModuleType("torch.nn.functional")
    functional.pad = _pad
    nn.functional = functional
    torch.nn = nn

    def _missing(name):
        raise AttributeError(f"torch shim has no {name!r}; the reference must not depend on it")

    torch.__getattr__ = _missing
    sys.modules["torch"] = torch
    sys.modules["torch.nn"] = nn
    sys.modules["torch.nn.functional"] = functional


def load_silero(wheel: Path):
    _install_torch_shim()
    sys.path.insert(0, str(wheel))
    import silero_vad  # noqa: E402
    from silero_vad import utils_vad  # noqa: E402

    if not str(Path(utils_vad.__file__)).startswith(str(wheel)):
        raise SystemExit(f"silero_vad was imported from {utils_vad.__file__}, not from {wheel}")
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        version = next(line.split(":", 1)[1].strip()
                       for line in zf.read(meta).decode().splitlines()
                       if line.startswith("Version:"))
    return silero_vad, utils_vad, version


# ---------------------------------------------------------------------------
# probability feeding


class ProbabilityModel:
    """Stands in for the Silero model: returns the given probabilities in order."""

    def __init__(self, probabilities, sample_rate, window):
        self.probabilities = list(probabilities)
        self.sample_rate = sample_rate
        self.window = window
        self.index = 0

    def reset_states(self, batch_size=1):
        self.index = 0

    def __call__(self, chunk, sr):
        if sr != self.sample_rate:
            raise AssertionError(f"model called with sr={sr}, expected {self.sample_rate}")
        if len(chunk) != self.window:
            raise AssertionError(f"model called with a chunk of {len(chunk)} samples")
        if self.index >= len(self.probabilities):
            raise AssertionError("model called more often than there are probabilities")
        p = self.probabilities[self.index]
        self.index += 1
        return np.float64(p)


def round7(x: float) -> float:
    return float(f"{x:.7g}")


# ---------------------------------------------------------------------------
# sequences

# Every threshold / neg_threshold used below. Synthetic probabilities are kept
# at least MARGIN away from them so the goldens do not depend on whether the
# Swift side parses the probabilities as Float or Double.
THRESHOLDS = (0.5, 0.5 - 0.15, 0.6, 0.6 - 0.15, 0.3, 0.2, 0.45, 0.45 - 0.15)
MARGIN = 2e-6


def synthetic(seed: int, n: int, long_start: int, long_len: int):
    """Smoothed random speech probabilities with regimes of varied length.

    Regimes of speech (logit mean +2.5) and silence (-3) of random length
    alternate; a long speech regime of long_len chunks (> 20 s) starts at
    long_start and holds short dips (1-8 chunks, mean -3) and grey stretches
    (mean -0.3, probability between neg_threshold and threshold). The mean is
    smoothed with a 3-tap box, AR(1) noise is added, and a sigmoid maps the
    logit to a probability.
    """
    rng = np.random.default_rng(seed)
    mean = np.zeros(n)
    pos = 0
    speech = bool(rng.integers(0, 2))
    while pos < n:
        if long_start <= pos < long_start + long_len:
            end = min(n, long_start + long_len)
            mean[pos:end] = 2.5
            k = pos + int(rng.integers(8, 40))
            while k < end - 10:
                kind = rng.random()
                if kind < 0.55:
                    d = int(rng.integers(1, 9))
                    mean[k:k + d] = -3.0
                elif kind < 0.8:
                    d = int(rng.integers(3, 15))
                    mean[k:k + d] = -0.3
                else:
                    d = int(rng.integers(1, 4))
                    mean[k:k + d] = -3.0
                    g = int(rng.integers(2, 10))
                    mean[k + d:k + d + g] = -0.3
                    d += g
                k += d + int(rng.integers(10, 70))
            pos = end
            speech = False
            continue
        if speech:
            length = int(rng.choice([rng.integers(2, 10), rng.integers(10, 40), rng.integers(40, 200)]))
        else:
            length = int(rng.choice([rng.integers(1, 6), rng.integers(6, 20), rng.integers(20, 90)]))
        end = min(n, pos + length)
        if pos < long_start < end:
            end = long_start
        mean[pos:end] = 2.5 if speech else -3.0
        pos = end
        speech = not speech
    smooth = np.convolve(np.pad(mean, 1, mode="edge"), np.ones(3) / 3, mode="valid")
    noise = np.zeros(n)
    e = 0.0
    for i in range(n):
        e = 0.75 * e + 0.7 * rng.standard_normal()
        noise[i] = e
    probs = 1.0 / (1.0 + np.exp(-(smooth + noise)))
    out = []
    for p in probs:
        p = round7(float(p))
        for t in THRESHOLDS:
            if abs(p - t) < MARGIN:
                p = round7(t + (MARGIN if p >= t else -MARGIN) * 1.5)
        out.append(p)
    return out


def load_model_golden(name: str):
    path = ROOT / MODEL_GOLDENS / name
    raw = path.read_bytes()
    d = json.loads(raw)
    return d, hashlib.sha256(raw).hexdigest()


# ---------------------------------------------------------------------------
# settings

DEFAULTS = dict(threshold=0.5, neg_threshold=None, min_speech_duration_ms=250,
                max_speech_duration_s=math.inf, min_silence_duration_ms=100,
                speech_pad_ms=30, min_silence_at_max_speech=98,
                use_max_poss_sil_at_max_speech=True)

SETTINGS = [
    ("defaults", {}),
    ("t0.6-minspeech100-minsil300-pad0",
     dict(threshold=0.6, min_speech_duration_ms=100, min_silence_duration_ms=300, speech_pad_ms=0)),
    ("t0.3-neg0.2-minspeech500-minsil50-pad100",
     dict(threshold=0.3, neg_threshold=0.2, min_speech_duration_ms=500,
          min_silence_duration_ms=50, speech_pad_ms=100)),
    ("maxspeech5-maxposs", dict(max_speech_duration_s=5, use_max_poss_sil_at_max_speech=True)),
    ("maxspeech5-legacy", dict(max_speech_duration_s=5, use_max_poss_sil_at_max_speech=False)),
    ("maxspeech5-minsil500-maxposs",
     dict(max_speech_duration_s=5, min_silence_duration_ms=500, use_max_poss_sil_at_max_speech=True)),
    ("maxspeech5-minsil500-legacy",
     dict(max_speech_duration_s=5, min_silence_duration_ms=500, use_max_poss_sil_at_max_speech=False)),
    ("t0.45-maxspeech2.5-minsil400-silatmax200-pad50-legacy",
     dict(threshold=0.45, max_speech_duration_s=2.5, min_silence_duration_ms=400,
          min_silence_at_max_speech=200, speech_pad_ms=50, use_max_poss_sil_at_max_speech=False)),
    ("t0.45-maxspeech2.5-minsil400-silatmax200-pad50-maxposs",
     dict(threshold=0.45, max_speech_duration_s=2.5, min_silence_duration_ms=400,
          min_silence_at_max_speech=200, speech_pad_ms=50, use_max_poss_sil_at_max_speech=True)),
]

ITERATOR_SETTINGS = [
    ("defaults", {}),
    ("t0.6-minsil300-pad0", dict(threshold=0.6, min_silence_duration_ms=300, speech_pad_ms=0)),
    ("t0.3-minsil50-pad100", dict(threshold=0.3, min_silence_duration_ms=50, speech_pad_ms=100)),
]
ITERATOR_DEFAULTS = dict(threshold=0.5, min_silence_duration_ms=100, speech_pad_ms=30)


def resolved(kwargs):
    r = dict(DEFAULTS)
    r.update(kwargs)
    if r["neg_threshold"] is None:
        r["neg_threshold"] = max(r["threshold"] - 0.15, 0.01)  # as get_speech_timestamps does
    if math.isinf(r["max_speech_duration_s"]):
        r["max_speech_duration_s"] = None  # null = infinity
    return r


# ---------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", type=Path, default=DEFAULT_WHEEL)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()

    silero_vad, utils_vad, version = load_silero(args.wheel.resolve())
    get_speech_timestamps = silero_vad.get_speech_timestamps
    from_probs = silero_vad.get_speech_timestamps_from_probs
    VADIterator = silero_vad.VADIterator

    sequences = {}
    for key, fname in (("file-16k", "silero-vad-16k.json"), ("file-8k", "silero-vad-8k.json")):
        d, sha = load_model_golden(fname)
        sequences[key] = dict(
            source={"file": f"{MODEL_GOLDENS}/{fname}", "key": "probabilities", "sha256": sha},
            sampleRate=d["sampleRate"], chunkSamples=d["chunkSamples"], audioSamples=d["samples"],
            count=len(d["probabilities"]), probabilities=[float(p) for p in d["probabilities"]])
        sequences[key]["_probs"] = sequences[key]["probabilities"]
    synth = [
        ("synthetic-a", 20240601, 400, 700, 2000 * 512),        # long speech inside, exact length
        ("synthetic-b", 77, 1300, 700, 2000 * 512 - 323),        # ends in long speech, partial chunk
    ]
    for key, seed, long_start, long_len, audio in synth:
        probs = synthetic(seed, 2000, long_start, long_len)
        sequences[key] = dict(
            source={"generator": "synthetic() in tools/vad_segments_reference.py",
                    "seed": seed, "longSpeechStartChunk": long_start, "longSpeechChunks": long_len},
            sampleRate=16000, chunkSamples=512, audioSamples=audio, count=len(probs),
            probabilities=probs, _probs=probs)

    for key, s in sequences.items():
        w = WINDOW[s["sampleRate"]]
        assert s["chunkSamples"] == w, key
        assert math.ceil(s["audioSamples"] / w) == s["count"], key
        dmin = min(abs(p - t) for p in s["_probs"] for t in THRESHOLDS)
        s["minDistanceToThresholds"] = float(f"{dmin:.3g}")

    cases = []
    for skey, s in sequences.items():
        sr, w, n = s["sampleRate"], s["chunkSamples"], s["audioSamples"]
        probs = s["_probs"]
        for sname, kw in SETTINGS:
            kwargs = dict(kw)
            kwargs["sampling_rate"] = sr
            model = ProbabilityModel(probs, sr, w)
            audio = np.zeros(n, dtype=np.float32)
            segs = get_speech_timestamps(audio, model, **kwargs)
            assert model.index == len(probs), (skey, sname, model.index, len(probs))
            again = from_probs(probs, audio_length_samples=n, **kwargs)
            assert again == segs, (skey, sname)
            for seg in segs:
                assert isinstance(seg["start"], int) and isinstance(seg["end"], int), seg
            cases.append(dict(
                name=f"{skey}/{sname}", sequence=skey, sampleRate=sr, chunkSamples=w,
                audioSamples=n, settings=kwargs, resolvedSettings=resolved(kw),
                segments=[{"start": seg["start"], "end": seg["end"]} for seg in segs]))

    iterator_cases = []
    for skey, s in sequences.items():
        sr, w = s["sampleRate"], s["chunkSamples"]
        probs = s["_probs"]
        for iname, kw in ITERATOR_SETTINGS:
            kwargs = dict(kw)
            kwargs["sampling_rate"] = sr
            model = ProbabilityModel(probs, sr, w)
            it = VADIterator(model, **kwargs)
            events = []
            chunk = np.zeros(w, dtype=np.float32)
            for i in range(len(probs)):
                ev = it(chunk)
                if ev:
                    assert len(ev) == 1, ev
                    (k, v), = ev.items()
                    assert isinstance(v, int), ev
                    events.append({"chunkIndex": i, k: v})
            assert model.index == len(probs)
            r = dict(ITERATOR_DEFAULTS)
            r.update(kw)
            r["neg_threshold"] = r["threshold"] - 0.15
            iterator_cases.append(dict(
                name=f"{skey}/iterator-{iname}", sequence=skey, sampleRate=sr, chunkSamples=w,
                settings=kwargs, resolvedSettings=r, endsTriggered=bool(it.triggered),
                events=events))

    for s in sequences.values():
        del s["_probs"]

    golden = {
        "generator": "tools/vad_segments_reference.py",
        "silero_vad_version": version,
        "silero_vad_source": f"PyPI wheel {args.wheel.name} (sha256 "
                             f"{hashlib.sha256(args.wheel.read_bytes()).hexdigest()}), imported with a "
                             "numpy stand-in for the few torch helpers its utils_vad uses",
        "note": (
            "Segments are silero_vad.get_speech_timestamps(audio, model, **settings) with audio = "
            "audioSamples zeros (float32) and model a stand-in whose __call__(chunk, sr) returns the "
            "sequence's next probability (reset_states rewinds it). get_speech_timestamps calls the "
            "model once per chunkSamples chunk starting at sample 0 (512 at 16 kHz, 256 at 8 kHz, "
            "window_size_samples is ignored), the last partial chunk zero-padded to a full chunk, so "
            "the model is called ceil(audioSamples / chunkSamples) == count times (checked). "
            "audio_length_samples = audioSamples bounds the padded end of the last segment and is the "
            "end of a segment still open after the last chunk. The same segments come out of "
            "get_speech_timestamps_from_probs(probabilities, audio_length_samples=audioSamples, "
            "**settings) (checked). Chunk i starts at sample i * chunkSamples. 'settings' are the "
            "exact keyword arguments passed (besides audio and model); 'resolvedSettings' has every "
            "parameter with the defaults filled in, neg_threshold as computed by silero "
            "(max(threshold - 0.15, 0.01), in double precision; e.g. 0.6 - 0.15 = "
            "0.44999999999999996), max_speech_duration_s null = infinity. Sequences from files are "
            "copies of the model goldens named in their source (file, key, sha256 of the file), "
            "parsed as double; synthetic ones are rounded to 7 significant digits and kept >= 2e-6 away from every "
            "threshold used. Every sequence's probabilities are stored here and were fed exactly as "
            "stored. iteratorCases: VADIterator(model, **settings) "
            "called once per probability with a full chunk of chunkSamples zeros; events are its "
            "non-None returns with the 0-based chunk index of the call; VADIterator uses threshold - "
            "0.15 as its exit threshold and current_sample = (chunkIndex + 1) * chunkSamples; a "
            "segment still open at the end gives no end event (endsTriggered)."),
        "sequences": sequences,
        "cases": cases,
        "iteratorCases": iterator_cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(golden, indent=1, allow_nan=False)
    args.out.write_text(text + "\n")
    print(f"wrote {args.out.relative_to(ROOT)} ({len(text) / 1024:.0f} KB), "
          f"{len(cases)} cases, {len(iterator_cases)} iterator cases")
    for c in cases:
        print(f"  {c['name']:70s} {len(c['segments']):3d} segments")
    for c in iterator_cases:
        print(f"  {c['name']:70s} {len(c['events']):3d} events")


if __name__ == "__main__":
    main()
