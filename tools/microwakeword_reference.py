#!/usr/bin/env python3
"""Reference outputs of microWakeWord's models, for Earshot's tests.

Makes a short test recording (the four wake phrases and other words spoken by espeak-ng, with
silence and noise between them), computes its features with pymicro-features (TensorFlow Lite
Micro's audio front end, as pymicro-wakeword feeds its models), and runs each model shipped by
pymicro-wakeword over the features, three frames per step as pymicro-wakeword does:

- with TFLite's reference kernels (ai-edge-litert, OpResolverType.BUILTIN_REF): the spec
  Earshot's int8 kernels follow bit for bit;
- with the library pymicro-wakeword ships (TFLite's optimized kernels), for the report.

Writes into Tests/EarshotTests/Goldens/microwakeword/:
  wake-words.wav            the recording (16 kHz mono PCM16)
  features.f32              its feature frames, float32 little-endian, 40 per frame
  <model>.json              per step: the uint8 output of the reference kernels and of the
                            shipped library; the model's sha256

Needs tools/setup_venv.sh, espeak-ng and sox. Run from the repository root:
  tools/.venv/bin/python tools/microwakeword_reference.py
"""
import ctypes
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures, Model

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "Tests/EarshotTests/Goldens/microwakeword"
MODELS = {"okay_nabu": Model.OKAY_NABU, "hey_jarvis": Model.HEY_JARVIS, "alexa": Model.ALEXA, "hey_mycroft": Model.HEY_MYCROFT}

# (text, voice, speed, pitch): espeak-ng's "okay nabu" is detected by okay_nabu.
PHRASES = [
    ("okay nabu", "en-us", 150, 50),
    ("the weather is nice today", "en", 160, 50),
    ("hey jarvis", "en-us", 140, 40),
    ("alexa", "en-us", 150, 50),
    ("seven apples and a pear", "en-gb", 170, 60),
    ("hey mycroft", "en-us", 140, 50),
    ("okay nabu", "en-gb", 130, 60),
]


def sh(*args):
    subprocess.run(args, check=True)


def make_recording(path: Path):
    with tempfile.TemporaryDirectory() as d:
        parts = []
        for i, (text, voice, speed, pitch) in enumerate(PHRASES):
            raw = Path(d) / f"p{i}.wav"
            sh("espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", str(raw), text)
            part = Path(d) / f"s{i}.wav"
            sh("sox", "-R", "-D", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(part), "norm", "-3")
            parts.append(str(part))
            gap = Path(d) / f"g{i}.wav"
            # a second of quiet noise between phrases
            sh("sox", "-R", "-D", "-n", "-r", "16000", "-c", "1", "-b", "16", str(gap), "synth", "1.0", "whitenoise", "vol", "0.01")
            parts.append(str(gap))
        lead = Path(d) / "lead.wav"
        sh("sox", "-R", "-D", "-n", "-r", "16000", "-c", "1", "-b", "16", str(lead), "trim", "0", "0.5")
        sh("sox", "-R", "-D", str(lead), *parts, str(path))


def features_of(audio: np.ndarray) -> np.ndarray:
    frontend = MicroWakeWordFeatures()
    frames = [f.reshape(40) for f in frontend.process_streaming(audio.astype("<i2").tobytes())]
    return np.array(frames, dtype=np.float64)


def run_reference(model_path: Path, frames: np.ndarray):
    it = Interpreter(model_path=str(model_path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    inp = it.get_input_details()[0]
    out = it.get_output_details()[0]
    scale, zero = inp["quantization"]
    stride = int(inp["shape"][1])
    outputs = []
    for s in range(len(frames) // stride):
        block = frames[s * stride:(s + 1) * stride].reshape(1, stride, 40)
        q = np.round(block / scale + zero).astype(np.int8)  # as pymicro-wakeword quantizes
        it.set_tensor(inp["index"], q)
        it.invoke()
        outputs.append(int(it.get_tensor(out["index"]).reshape(-1)[0]))
    return outputs, stride, float(scale), int(zero)


def run_library(name: str, frames: np.ndarray, stride: int):
    """pymicro-wakeword's own library (TFLite's optimized kernels), step by step."""
    mww = MicroWakeWord.from_builtin(MODELS[name])
    outputs = []
    for s in range(len(frames) // stride):
        q = np.round(frames[s * stride:(s + 1) * stride].reshape(1, stride, 40) / mww.input_scale + mww.input_zero_point).astype(mww.input_dtype)
        mww.lib.TfLiteTensorCopyFromBuffer(mww.input_tensor, q.ctypes.data_as(ctypes.c_void_p), q.nbytes)
        mww.lib.TfLiteInterpreterInvoke(mww.interpreter)
        o = np.empty(1, dtype=mww.output_dtype)
        mww.lib.TfLiteTensorCopyToBuffer(mww.output_tensor, o.ctypes.data_as(ctypes.c_void_p), o.nbytes)
        outputs.append(int(o[0]))
    return outputs


REFRACTORY_SECONDS = 2.0  # Earshot's default: a wake word is not detected twice within 2 s


def detections(outputs, cutoff, window, stride):
    """Steps where pymicro-wakeword's rule fires: the mean of the latest `window` probabilities
    (once there are that many) above the cutoff, then quiet for the refractory time."""
    steps_per_second = 16000 / (160 * stride)
    rest = int(np.ceil(REFRACTORY_SECONDS * steps_per_second))
    found, quiet_until = [], 0
    for s in range(len(outputs)):
        if s + 1 < window or s < quiet_until:
            continue
        mean = statistics.mean(o / 256 for o in outputs[s + 1 - window:s + 1])
        if mean > cutoff:
            found.append(s)
            quiet_until = s + 1 + rest
    return found


def reference_detections(name: str, frames: np.ndarray):
    """pymicro-wakeword's rule on TFLite's reference kernels and on its own library over `frames`:
    (the model's wake word, the steps each detects at, the feature frames a step takes)."""
    models_dir = Path(sys.modules["pymicro_wakeword"].__file__).parent / "models"
    config = json.loads((models_dir / f"{name}.json").read_text())
    cutoff, window = config["micro"]["probability_cutoff"], config["micro"]["sliding_window_size"]
    reference, stride, _, _ = run_reference(models_dir / f"{name}.tflite", frames)
    library = run_library(name, frames, stride)
    return config["wake_word"], detections(reference, cutoff, window, stride), detections(library, cutoff, window, stride), stride


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    wav = OUT / "wake-words.wav"
    make_recording(wav)
    audio, rate = sf.read(wav, dtype="int16")
    assert rate == 16000
    frames = features_of(audio)
    frames.astype("<f4").tofile(OUT / "features.f32")
    assert np.array_equal(frames.astype(np.float32).astype(np.float64), frames), "features are float32 values"
    models_dir = Path(sys.modules["pymicro_wakeword"].__file__).parent / "models"
    for name in MODELS:
        path = models_dir / f"{name}.tflite"
        reference, stride, scale, zero = run_reference(path, frames)
        library = run_library(name, frames, stride)
        config = json.loads((models_dir / f"{name}.json").read_text())
        differing = sum(1 for a, b in zip(reference, library) if a != b)
        record = {
            "model": f"{name}.tflite",
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "stride": stride,
            "input_scale": scale,
            "input_zero_point": zero,
            "probability_cutoff": config["micro"]["probability_cutoff"],
            "sliding_window_size": config["micro"]["sliding_window_size"],
            "reference": reference,
            "library": library,
            "refractory_seconds": REFRACTORY_SECONDS,
            "detections": detections(reference, config["micro"]["probability_cutoff"], config["micro"]["sliding_window_size"], stride),
            "library_detections": detections(library, config["micro"]["probability_cutoff"], config["micro"]["sliding_window_size"], stride),
        }
        (OUT / f"{name}.json").write_text(json.dumps(record) + "\n")
        print(f"{name}: {len(reference)} steps, max {max(reference)}, library differs in {differing} steps "
              f"(max |diff| {max(abs(a - b) for a, b in zip(reference, library))}); detections at steps {record['detections']} "
              f"(library: {record['library_detections']})")
    print(f"{len(frames)} frames, {len(audio) / 16000:.2f} s")


if __name__ == "__main__":
    main()
