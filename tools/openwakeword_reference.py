#!/usr/bin/env python3
"""onnxruntime's outputs of openWakeWord's ONNX models on real audio, for Earshot's import tests.

The models come from scripts/fetch-test-models.sh (Tests/.models/openwakeword; not committed:
their licence does not allow it). The inputs are built as openWakeWord builds them from
AudioSamples/speech-noise-16k.wav: the melspectrogram model takes 1760 samples (1280 new and
480 before) as int16-scaled floats; its output, as x / 10 + 2, gives 76-frame windows for the
embedding model; 16 consecutive embeddings feed a wake-word head. Inputs and outputs are written
to Tests/EarshotTests/Goldens/openwakeword.json.

    tools/.venv/bin/python tools/openwakeword_reference.py
"""
import json
import os

import numpy as np
import onnxruntime as ort
import soundfile as sf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "Tests/.models/openwakeword")
AUDIO = "AudioSamples/speech-noise-16k.wav"


def session(name):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(os.path.join(MODELS, name + ".onnx"), options, providers=["CPUExecutionProvider"])


def rounded(a):
    return [float(v) for v in np.asarray(a, dtype=np.float32).reshape(-1)]


def main():
    audio, rate = sf.read(os.path.join(ROOT, AUDIO), dtype="float32")
    assert rate == 16000 and audio.ndim == 1
    samples = audio * 32767.0

    mel = session("melspectrogram")
    mel_cases = []
    for offset in [16000, 48000, 160000]:
        x = samples[offset:offset + 1760].astype(np.float32)[None, :]
        mel_cases.append({"input": rounded(x), "output": rounded(mel.run(None, {"input": x})[0])})

    # The features of a long stretch, as openWakeWord post-processes them.
    stretch = samples[32000:32000 + 160 * 240].astype(np.float32)[None, :]
    features = np.squeeze(mel.run(None, {"input": stretch})[0]) / 10 + 2  # [frames][32]
    embedding = session("embedding_model")
    embedding_cases = []
    windows = []
    for start in range(0, features.shape[0] - 76 + 1, 8):
        window = features[start:start + 76].astype(np.float32)[None, :, :, None]
        windows.append(np.squeeze(embedding.run(None, {"input_1": window})[0]))
        if len(embedding_cases) < 3 and start % 40 == 0:
            embedding_cases.append({"input": rounded(window), "output": rounded(windows[-1])})
    embeddings = np.stack(windows)  # [windows][96]
    assert embeddings.shape[0] >= 20, embeddings.shape

    heads = {}
    for name in ["alexa_v0.1", "hey_mycroft_v0.1"]:
        head = session(name)
        input_name = head.get_inputs()[0].name
        cases = []
        for start in [0, 4]:
            x = embeddings[start:start + 16].astype(np.float32)[None, :, :]
            cases.append({"input": rounded(x), "output": rounded(head.run(None, {input_name: x})[0])})
        heads[name] = cases

    out = {
        "audio": AUDIO,
        "onnxruntime": ort.__version__,
        "melspectrogram": {"inputShape": [1, 1760], "cases": mel_cases},
        "embedding_model": {"inputShape": [1, 76, 32, 1], "cases": embedding_cases},
        "heads": {name: {"inputShape": [1, 16, 96], "cases": cases} for name, cases in heads.items()},
    }
    path = os.path.join(ROOT, "Tests/EarshotTests/Goldens/openwakeword.json")
    with open(path, "w") as f:
        json.dump(out, f)
    print("wrote", path)


if __name__ == "__main__":
    main()
