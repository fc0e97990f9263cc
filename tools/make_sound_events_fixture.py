#!/usr/bin/env python3
"""A small many-label window classifier, test audio for it, and the events and output files
it must give: the fixture of Earshot's sound-event tests.

Usage (from the repository root; needs numpy and soundfile):
    tools/.venv/bin/python tools/make_sound_events_fixture.py

The model (Tests/Fixtures/tone-events: model.json and weights.safetensors) is a graph package
whose scores are a crafted function of the audio: 12 labels, each a pure tone (200 ... 2600
Hz). A step takes 1000 new samples at 8 kHz (0.125 s) with the 1000 before them as context:
each window is 2000 samples (0.25 s), windows overlap by half. A label's score is

    sigmoid(alpha * (ln(c^2 + s^2 + eps) - beta))

where c and s are the window's Hann-weighted projections on the label's cosine and sine,
scaled so that c^2 + s^2 is the square of the tone's amplitude (MatMul with a [2000, 24]
basis, Mul, Reshape, ReduceSum, Add, Log, Sub, Mul, Sigmoid). alpha = 2, beta = ln(0.01):
a tone of amplitude 0.1 scores 0.5. The labels have BirdNET's form "Scientific_Common"
("Sinus 200_Tone 200 Hz"), which the manifest says (outputs.labelForm); its decision is a
many-label events rule: threshold 0.5, the 3 best labels of a window, windows merged when the
next starts at most 0 s after the event's end, no minimum duration.

The audio (Tests/EarshotTests/Goldens/sound-events/tones.wav, 16-bit WAV read back here as
libsndfile reads it, v / 32768, so that numpy and Earshot see the same samples) is a scripted sequence of tones: one alone, two at once, a short
gap, a tone too short for a minimum duration, four at once (one more than the top 3), a tone
whose amplitude ramps, a quiet tone under the threshold, one that runs to the end of the file
(whose last block is partial). tones-stereo.wav has it on channel 1 and another sequence on
channel 2.

The expected events are computed here independently of Earshot: the scores in float64 from
the float32 basis (numpy), each window [max(0, (k+1)*1000 - 2000), min((k+1)*1000, N)) in
samples, the last block zero-padded as Earshot pads it; then the documented rule: a label is on
in a window when it is among the window's k best (score descending, then label order) and its
score is at least its threshold; a label's on-windows form one event while each starts at most
the merge gap after the event's end so far (the event ends at its last window's end) and the
event closes once the next window could not join; an event shorter than the minimum duration is
dropped; each event has its best and mean score and its window count. The output files are then
written from those events with BirdNET-Analyzer's own writer logic (birdnet_analyzer/analyze/
utils.py, generate_raven_table, generate_csv and generate_audacity: the same columns, the same
f-strings; the timestamps are the events' bounds in seconds as Python prints round(t, 3), the
confidence the event's best window) and Earshot's JSON lines. A score among a window's k best within 1e-4 of its threshold is
refused (move the audio), so that float32 arithmetic cannot turn an event on or off; the tests
hold the printed confidences to these within 1e-4 (Earshot computes in float32, this in
float64) and every other field exactly. The parameters are recorded in meta.json.
"""

import json
import math
import struct
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "Tests" / "Fixtures" / "tone-events"
GOLDENS = ROOT / "Tests" / "EarshotTests" / "Goldens" / "sound-events"

RATE = 8000
CHUNK = 1000
CONTEXT = 1000
WINDOW = CHUNK + CONTEXT
FREQUENCIES = [200, 300, 400, 500, 600, 800, 1000, 1200, 1500, 1800, 2200, 2600]
LABELS = [f"Sinus {f}_Tone {f} Hz" for f in FREQUENCIES]
ALPHA = 2.0
BETA = math.log(0.01)
EPS = 1e-8
NAME = "tone-events"


def basis():
    """[WINDOW, 24]: Hann-weighted cosines then sines, scaled so that a tone of amplitude A at a
    label's frequency gives c^2 + s^2 = A^2."""
    t = np.arange(WINDOW)
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * t / WINDOW)
    scale = 2.0 / hann.sum()
    cos = np.stack([hann * np.cos(2 * np.pi * f * t / RATE) for f in FREQUENCIES], axis=1)
    sin = np.stack([hann * np.sin(2 * np.pi * f * t / RATE) for f in FREQUENCIES], axis=1)
    return (np.concatenate([cos, sin], axis=1) * scale).astype(np.float32)


def write_package():
    PACKAGE.mkdir(parents=True, exist_ok=True)
    weights = {"basis": basis(), "eps": np.array([EPS], np.float32), "beta": np.array([BETA], np.float32),
               "alpha": np.array([ALPHA], np.float32)}
    header, offset, blobs = {}, 0, []
    for name, value in weights.items():
        raw = value.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(value.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    (PACKAGE / "weights.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))

    def node(op, name, inputs, outputs, attributes=None):
        n = {"op": op, "name": name, "inputs": inputs, "outputs": outputs}
        if attributes:
            n["attributes"] = attributes
        return n

    graph = {
        "opset": 17,
        "audioInput": "audio",
        "audioShape": [1, WINDOW],
        "scoreOutput": "scores",
        "states": [],
        "constants": {"pairs": {"shape": [3], "values": [1, 2, len(LABELS)], "dtype": "int64"},
                      "axis": {"shape": [1], "values": [1], "dtype": "int64"}},
        "nodes": [
            node("MatMul", "project", ["audio", "basis"], ["projections"]),
            node("Mul", "square", ["projections", "projections"], ["squares"]),
            node("Reshape", "pair", ["squares", "pairs"], ["paired"]),
            node("ReduceSum", "energy", ["paired", "axis"], ["energy"], {"keepdims": 0}),
            node("Add", "floor", ["energy", "eps"], ["floored"]),
            node("Log", "log", ["floored"], ["level"]),
            node("Sub", "centre", ["level", "beta"], ["centred"]),
            node("Mul", "slope", ["centred", "alpha"], ["logits"]),
            node("Sigmoid", "score", ["logits"], ["scores"]),
        ],
    }
    manifest = {
        "format": "earshot-model",
        "formatVersion": 1,
        "name": NAME,
        "version": "1",
        "description": "A test model of sound events: each of 12 labels scores the energy of its pure tone in a 0.25 s window "
                       "(a step every 0.125 s at 8 kHz).",
        "author": "Earshot's tests",
        "license": "MIT",
        "source": "tools/make_sound_events_fixture.py",
        "audio": {"sampleRate": RATE, "chunkSamples": CHUNK, "contextSamples": CONTEXT},
        "frontEnd": {"type": "samples", "nFFT": 0, "hopLength": 0},
        "network": [],
        "graph": graph,
        "outputs": {"activation": "none", "labels": LABELS, "labelForm": "scientific_common"},
        "decision": {"threshold": 0.5, "events": {"topK": 3, "mergeGapSeconds": 0, "minDurationSeconds": 0}},
    }
    (PACKAGE / "model.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


# --- Audio ------------------------------------------------------------------------------------

def tone(signal, frequency, start, end, amplitude, ramp_to=None):
    """Adds a tone from `start` to `end` seconds (amplitude ramping linearly to `ramp_to`)."""
    a, b = int(round(start * RATE)), int(round(end * RATE))
    t = np.arange(a, b)
    gain = np.full(b - a, amplitude) if ramp_to is None else np.linspace(amplitude, ramp_to, b - a)
    signal[a:b] += (gain * np.sin(2 * np.pi * frequency * t / RATE)).astype(np.float32)


def first_channel(length):
    s = np.zeros(length, np.float32)
    tone(s, 1000, 0.0, 1.0, 0.3)                    # alone
    tone(s, 500, 1.5, 3.0, 0.22)                    # two at once
    tone(s, 1500, 1.5, 3.0, 0.13)
    tone(s, 500, 3.3, 4.2, 0.25)                    # the same tone after a short gap
    tone(s, 2200, 4.5, 6.5, 0.04, ramp_to=0.4)      # ramping up: scores of every size
    tone(s, 800, 7.0, 7.2, 0.3)                     # short
    for f, a in [(300, 0.3), (600, 0.21), (1200, 0.16), (2600, 0.13)]:  # four at once: one more than the top 3
        tone(s, f, 8.0, 9.6, a)
    tone(s, 400, 10.0, 11.0, 0.085)                 # under the threshold (0.5), over 0.3
    tone(s, 1800, 11.6, length / RATE, 0.22)       # to the end, over the partial last block
    return s


def second_channel(length):
    s = np.zeros(length, np.float32)
    tone(s, 200, 0.5, 2.5, 0.25)
    tone(s, 1800, 3.0, 3.5, 0.3)
    tone(s, 1800, 4.0, 6.0, 0.18)
    tone(s, 600, 6.0, 9.0, 0.11, ramp_to=0.33)
    tone(s, 2600, 9.5, 10.4, 0.23)
    return s


# --- Scores and the rule ----------------------------------------------------------------------

def window_scores(samples):
    """Per step k: (start, end) in samples and the 12 scores, as the graph computes them."""
    n = len(samples)
    steps = -(-n // CHUNK)
    padded = np.concatenate([np.zeros(CONTEXT), samples.astype(np.float64), np.zeros(steps * CHUNK - n)])
    b = basis().astype(np.float64)
    out = []
    for k in range(steps):
        block = padded[k * CHUNK:k * CHUNK + WINDOW]
        p = block @ b
        energy = p[:len(LABELS)] ** 2 + p[len(LABELS):] ** 2
        z = np.float64(ALPHA) * (np.log(energy + np.float64(np.float32(EPS))) - np.float64(np.float32(BETA)))
        scores = 1 / (1 + np.exp(-z))
        end = (k + 1) * CHUNK
        out.append((max(0, end - WINDOW), min(end, n), scores))
    return out


def events(windows, threshold, label_thresholds, top_k, merge_gap, min_duration):
    """The documented rule; bounds in samples, gap and duration in seconds (merge_gap None: every
    window its own event). Events come in the order Earshot gives them: by the step that closes
    them (then at the end of the stream), and within a step by start and label; each carries
    that place as "when": (step, 0 for a step and 1 for the end of the stream, order)."""
    thresholds = [label_thresholds.get(l, threshold) for l in LABELS]
    gap = None if merge_gap is None else merge_gap * RATE
    shortest = min_duration * RATE
    open_events, done = {}, []

    def close(labels, when):
        closed = [open_events.pop(i) for i in labels]
        kept = [e for e in closed if e["end"] - e["start"] >= shortest]
        for n, e in enumerate(sorted(kept, key=lambda e: (e["start"], e["label"]))):
            e["when"] = (*when, n)
            done.append(e)

    last = len(windows) - 1
    for k, (start, end, scores) in enumerate(windows):
        order = sorted(range(len(LABELS)), key=lambda i: (-scores[i], i))
        ranked = order[:top_k] if top_k is not None else order
        for i in ranked:
            check_margin(scores[i] - thresholds[i], f"window {k}: label {LABELS[i]} against its threshold")
        on = sorted(i for i in ranked if scores[i] >= thresholds[i])
        for i in on:
            if i in open_events:
                e = open_events[i]
                e["end"] = max(e["end"], end)
                e["scores"].append(scores[i])
            else:
                open_events[i] = {"label": i, "start": start, "end": end, "scores": [scores[i]]}
        next_start = max(0, (k + 2) * CHUNK - WINDOW)
        close([i for i in sorted(open_events) if gap is None or next_start - open_events[i]["end"] > gap], (k, 0))
    close(sorted(open_events), (last, 1))
    for e in done:
        e["best"] = max(e["scores"])
        e["mean"] = sum(e["scores"]) / len(e["scores"])
    return done


def check_margin(difference, what):
    """A score this close to its threshold could fall on either side in float32: refused."""
    if abs(difference) < 1e-4:
        raise SystemExit(f"{what}: within 1e-4 of it ({difference:+.2e}); move the audio's amplitudes")


# --- The writers ------------------------------------------------------------------------------

def seconds(samples):
    """A bound as Python prints round(t, 3) (BirdNET-Analyzer's timestamps are str(round(t, 1 or 2)))."""
    return str(round(samples / RATE, 3))


def raven(detections, path, file_rate, channel_of=lambda e: 1):
    """birdnet_analyzer/analyze/utils.py generate_raven_table: its header and row f-string. low_freq is
    max(SIG_FMIN, BANDPASS_FMIN) = 0; high_freq is the file's Nyquist frequency capped at the model's
    (BirdNET caps it at its model's 15 kHz band). No species-code table: the code is the label, as
    BirdNET-Analyzer writes it for a label without one. No 'nocall' row."""
    out = "Selection\tView\tChannel\tBegin Time (s)\tEnd Time (s)\tLow Freq (Hz)\tHigh Freq (Hz)\tCommon Name\tSpecies Code\tConfidence\tBegin Path\tFile Offset (s)\n"
    low_freq, high_freq = 0, min(file_rate // 2, RATE // 2)
    selection_id = 0
    for e in detections:
        selection_id += 1
        label = LABELS[e["label"]]
        code = label
        start, end = seconds(e["start"]), seconds(e["end"])
        out += f"{selection_id}\tSpectrogram 1\t{channel_of(e)}\t{start}\t{end}\t{low_freq}\t{high_freq}\t{label.split('_', 1)[-1]}\t{code}\t{e['best']:.4f}\t{path}\t{start}\n"
    return out


def birdnet_csv(detections, path):
    """generate_csv: its header and row f-string."""
    out = "Start (s),End (s),Scientific name,Common name,Confidence,File\n"
    for e in detections:
        label = LABELS[e["label"]]
        out += f"{seconds(e['start'])},{seconds(e['end'])},{label.split('_', 1)[0]},{label.split('_', 1)[-1]},{e['best']:.4f},{path}\n"
    return out


def audacity(detections):
    """generate_audacity: start, end, the label with '_' as ', ', the confidence."""
    out = ""
    for e in detections:
        label = LABELS[e["label"]]
        out += f"{seconds(e['start'])}\t{seconds(e['end'])}\t{label.replace('_', ', ')}\t{e['best']:.4f}\n"
    return out


def jsonl(detections, path, channel=0):
    """Earshot's JSON lines for an event (docs/events.schema.json)."""
    out = ""
    for e in detections:
        label = LABELS[e["label"]]
        scientific, common = label.split("_", 1)
        out += (f'{{"file":{json.dumps(path)},"channel":{e.get("channel", channel)},"label":{json.dumps(label)},'
                f'"scientific":{json.dumps(scientific)},"common":{json.dumps(common)},'
                f'"start":{e["start"] / RATE:.3f},"end":{e["end"] / RATE:.3f},"score":{e["mean"]:.4f},'
                f'"best":{e["best"]:.4f},"windows":{len(e["scores"])}}}\n')
    return out


CONFIGS = {
    # The manifest's rule.
    "defaults": dict(threshold=0.5, label_thresholds={}, top_k=3, merge_gap=0.0, min_duration=0.0),
    # --threshold tone-events=0.6,"Sinus 400_Tone 400 Hz=0.3" --top-k 2 --merge-gap 0.25 --min-duration 0.5
    "overrides": dict(threshold=0.6, label_thresholds={"Sinus 400_Tone 400 Hz": 0.3}, top_k=2, merge_gap=0.25,
                      min_duration=0.5),
    # --merge-gap none --top-k 1: every window its own event, as BirdNET-Analyzer lists them.
    "windows": dict(threshold=0.5, label_thresholds={}, top_k=1, merge_gap=None, min_duration=0.0),
}


def main():
    write_package()
    GOLDENS.mkdir(parents=True, exist_ok=True)
    length = 12 * RATE + 500  # a partial last block
    mono = first_channel(length)
    other = second_channel(length)
    sf.write(GOLDENS / "tones.wav", mono, RATE, subtype="PCM_16")
    sf.write(GOLDENS / "tones-stereo.wav", np.stack([mono, other], axis=1), RATE, subtype="PCM_16")
    mono, _ = sf.read(GOLDENS / "tones.wav", dtype="float32")
    stereo, _ = sf.read(GOLDENS / "tones-stereo.wav", dtype="float32")
    windows = window_scores(mono)
    meta = {"generator": "tools/make_sound_events_fixture.py", "numpy": np.__version__, "sampleRate": RATE,
            "chunkSamples": CHUNK, "windowSamples": WINDOW, "labels": LABELS, "alpha": ALPHA, "beta": BETA,
            "eps": EPS, "configs": {}}
    path = "Tests/EarshotTests/Goldens/sound-events/tones.wav"
    for name, config in CONFIGS.items():
        found = events(windows, **config)
        folder = GOLDENS / name
        folder.mkdir(exist_ok=True)
        (folder / "raven.txt").write_text(raven(found, path, RATE))
        (folder / "birdnet.csv").write_text(birdnet_csv(found, path))
        (folder / "audacity.txt").write_text(audacity(found))
        (folder / "events.jsonl").write_text(jsonl(found, path))
        meta["configs"][name] = {**config, "events": len(found)}
    # --channels each on the stereo file: each channel its own events (the manifest's rule).
    # The channels step together, a block each, and their events come out step by step, channel
    # 0 first; at the end each channel steps its last (partial) block and closes its events in turn.
    stereo_path = "Tests/EarshotTests/Goldens/sound-events/tones-stereo.wav"
    both = []
    for k in range(2):
        for e in events(window_scores(np.ascontiguousarray(stereo[:, k])), **CONFIGS["defaults"]):
            e["channel"] = k
            both.append(e)
    both.sort(key=lambda e: (e["when"][0], e["channel"], e["when"][1], e["when"][2]))
    folder = GOLDENS / "stereo"
    folder.mkdir(exist_ok=True)
    (folder / "raven.txt").write_text(raven(both, stereo_path, RATE, channel_of=lambda e: e["channel"] + 1))
    meta["configs"]["stereo"] = {**CONFIGS["defaults"], "channels": "each", "events": len(both)}
    (GOLDENS / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{PACKAGE}: {len(LABELS)} labels; events: " + ", ".join(f"{k} {v['events']}" for k, v in meta["configs"].items()))


if __name__ == "__main__":
    main()
