#!/usr/bin/env python3
"""Reference frames of TensorFlow Lite Micro's audio front end (PyPI pymicro-features, what
pymicro-wakeword feeds microWakeWord's models), for Earshot's MicroFrontend tests.

Writes Tests/EarshotFeaturesTests/Goldens/microfrontend/NAME.s16 (16 kHz mono int16 samples,
little-endian) and NAME.u16 (the front end's frames, 40 uint16 values each, little-endian) for
signals that reach the front end's edges: silence, full-scale square and sine, white noise,
a tiny noise, noise whose level jumps, and a chirp. Run from the repository root:
  tools/.venv/bin/python tools/microfrontend_reference.py
"""
from pathlib import Path

import numpy as np
from pymicro_features import MicroFrontend

OUT = Path(__file__).resolve().parent.parent / "Tests/EarshotFeaturesTests/Goldens/microfrontend"
SCALE = 0.0390625  # pymicro-features' float = uint16 value * this


def frames(samples: np.ndarray) -> np.ndarray:
    fe = MicroFrontend()
    out = []
    data = samples.astype("<i2").tobytes()
    for at in range(0, len(data) - 319, 320):
        result = fe.process_samples(data[at:at + 320])
        if result.features:
            values = np.array(result.features) / SCALE
            assert np.array_equal(values, np.round(values)), "features are multiples of the scale"
            out.append(values.astype(np.uint16))
    return np.array(out, dtype="<u2")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    n = 16000
    t = np.arange(n) / 16000
    signals = {
        "silence": np.zeros(n),
        "square": np.where((np.arange(n) // 40) % 2 == 0, 32767, -32768),
        "sine": np.round(32767 * np.sin(2 * np.pi * 1000 * t)),
        "noise": rng.integers(-32768, 32768, n),
        "tiny": rng.integers(-2, 3, n),
        "jump": np.concatenate([rng.normal(0, 30, n // 2), rng.normal(0, 8000, n // 2)]).clip(-32768, 32767).round(),
        "chirp": np.round(12000 * np.sin(2 * np.pi * (100 + 3900 * t) * t)),
    }
    for name, s in signals.items():
        s = np.asarray(s).astype(np.int16)
        s.astype("<i2").tofile(OUT / f"{name}.s16")
        f = frames(s)
        f.tofile(OUT / f"{name}.u16")
        print(f"{name}: {len(f)} frames, max {f.max()}")


if __name__ == "__main__":
    main()
