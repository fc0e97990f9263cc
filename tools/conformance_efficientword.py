#!/usr/bin/env python3
"""Goldens for EfficientWord-Net's models in the conformance set (PyPI EfficientWord-Net 1.0.5,
Apache-2.0; Tests/.models/efficientword-net, fetched by scripts/fetch-test-models.sh), run by
their own runtimes on real audio, for Tests/EarshotTests/ConformanceEfficientWordTests.swift:

* logmelcalc.tflite (TFLite: ai-edge-litert's Interpreter, default resolver with XNNPACK, one
  thread): [1, 16000] samples to a [98, 64] log-mel, on the 1 s windows of
  AudioSamples/speech-noise-16k.wav (mono, 16 kHz) from each offset in OFFSETS and from each
  offset + 1 s.
* baseModel.tflite (TFLite): the first window's log-mel as [1, 98, 64, 1] to a 128-value embedding
  (it ends in L2_NORMALIZATION).
* the ResNet-50 ONNX (onnxruntime, one thread): 1.5 s of log-mel, the first window's 98 frames then
  the second's first 51, as [1, 1, 149, 64], to a 2048-value embedding (it pools with
  GlobalAveragePool).

Writes Tests/EarshotTests/Goldens/conformance/efficientword-net/: logmel.f32 (both windows of
each offset, TFLite's log-mel), base.f32, resnet.f32 (float32 little-endian) and meta.json.

    tools/.venv/bin/python tools/conformance_efficientword.py
"""
import hashlib
import importlib.metadata
import json
from pathlib import Path

import ai_edge_litert.interpreter as litert
import numpy as np
import onnxruntime as ort
import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "Tests/.models/efficientword-net"
OUT = ROOT / "Tests/EarshotTests/Goldens/conformance/efficientword-net"
AUDIO = "AudioSamples/speech-noise-16k.wav"
OFFSETS = [16000, 40000, 56000]
RESNET = "slim_93%_accuracy_72.7390%.onnx"


def interpreter(name):
    i = litert.Interpreter(model_path=str(MODELS / name), num_threads=1)
    i.allocate_tensors()
    return i


def invoke(i, x):
    i.set_tensor(i.get_input_details()[0]["index"], x)
    i.invoke()
    return i.get_tensor(i.get_output_details()[0]["index"]).astype(np.float32)


def main():
    audio, rate = sf.read(ROOT / AUDIO, dtype="float32")
    assert rate == 16000 and audio.ndim == 1
    logmel, base = interpreter("logmelcalc.tflite"), interpreter("baseModel.tflite")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    resnet = ort.InferenceSession(str(MODELS / RESNET), options, providers=["CPUExecutionProvider"])
    mels, embeddings, resnets = [], [], []
    for offset in OFFSETS:
        pair = [invoke(logmel, audio[o:o + 16000].reshape(1, 16000)).reshape(98, 64) for o in (offset, offset + 16000)]
        mels += pair
        embeddings.append(invoke(base, pair[0].reshape(1, 98, 64, 1)).reshape(128))
        features = np.concatenate([pair[0], pair[1][:51]]).reshape(1, 1, 149, 64)
        resnets.append(resnet.run(None, {"input": features})[0].reshape(2048))
    OUT.mkdir(parents=True, exist_ok=True)
    for name, values in [("logmel", mels), ("base", embeddings), ("resnet", resnets)]:
        np.concatenate(values).astype("<f4").tofile(OUT / f"{name}.f32")
    meta = {"generator": "tools/conformance_efficientword.py", "wheel": "efficientword_net-1.0.5-py3-none-any.whl",
            "wheel_sha256": "9094b1ac4f4d4ccb54069b15e87639e38f3c06443be383acccedc5c26055aa58",
            "models_sha256": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(MODELS.glob("*")) if p.suffix in (".tflite", ".onnx")},
            "audio": AUDIO, "offsets": OFFSETS, "ai_edge_litert": importlib.metadata.version("ai-edge-litert"), "onnxruntime": ort.__version__}
    (OUT / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{len(OFFSETS)} offsets written to {OUT}")


if __name__ == "__main__":
    main()
