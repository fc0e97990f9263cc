#!/usr/bin/env python3
"""How well a wake word trained from its text alone finds real people saying it.

    swift build -c release && tools/.venv/bin/python tools/measure_train_wake.py [WORD] [--embedding-models DIR] [--log-mel]
        [--microwakeword] [--no-embedding]

WORD (default "left") is a word of Speech Commands (../shared/data/speech-commands, or
$EARSHOT_DATA/speech-commands) that many real speakers say. Speakers whose id starts with 0-7 may
be trained on, those of 8-f never are:

- text model: `earshot train-wake WORD --embedding openwakeword --negatives N` where N holds the
  words of speakers 0-7 except WORD, and _silence_ (real speech without the phrase);
  no recording of WORD at all.
- with --microwakeword: `earshot train-wake WORD --architecture microwakeword --negatives N`
  (microWakeWord's int8 network, quantization-aware), the same data; with --log-mel, the log-mel
  classifier from scratch. --no-embedding leaves out the two openWakeWord models.
- real model: `earshot train --embedding openwakeword` on the real takes of WORD by speakers 0-7
  against the same negatives (what a person recording the phrase would train).
- the test stream: every take of WORD by speakers 8-f, one after every 8 negatives, spliced into
  the words of speakers 8-f (all but WORD) and all of FSDD, 0.25-1 s of quiet pink noise between
  them (numpy, seed 1); truth in test.truth.csv.

Each model runs over the stream as `listen` runs it (`earshot evaluate --stream`) at several
thresholds: recall (takes of WORD found), false accepts per hour of the stream. Also the text
model's own held-out synthesized voices. Writes tools/.cache/train-wake-WORD/results.json and prints
a table; the training times with the machine's load (uptime) before and after.
"""
import argparse, json, os, pathlib, re, subprocess, sys, time

import numpy as np
import scipy.signal
import soundfile as sf
import librosa

root = pathlib.Path(__file__).resolve().parent.parent
parser = argparse.ArgumentParser()
parser.add_argument("word", nargs="?", default="left")
parser.add_argument("--embedding-models", default=str(root / "Tests/.models/openwakeword"))
parser.add_argument("--earshot", default=str(root / ".build/release/earshot"))
parser.add_argument("--log-mel", action="store_true", help="also the log-mel model from text (no embedding)")
parser.add_argument("--microwakeword", action="store_true", help="also microWakeWord's int8 network from text")
parser.add_argument("--no-embedding", action="store_true", help="leave out the openWakeWord models (text and real)")
parser.add_argument("--thresholds", default="0.5,0.8,0.9,0.95,0.99")
parser.add_argument("--every", type=int, default=8, help="negatives between two takes of the word")
parser.add_argument("--retrain", action="store_true", help="train again even when a model is there")
parser.add_argument("--extra", default="", help="more train-wake options, space-separated")
args = parser.parse_args()
word = args.word
data = pathlib.Path(os.environ.get("EARSHOT_DATA", root.parent / "shared/data"))
sc = data / "speech-commands"
work = root / "tools/.cache" / f"train-wake-{word}"
work.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(1)
hexid = re.compile(r"([0-9a-f]{8})_nohash")


def speaker(path):
    m = hexid.search(path.name)
    return m.group(1) if m else None


def said(path):  # the word of a Speech Commands file
    return path.name.split("_")[0] if path.parent.name == "_unknown_" else path.parent.name


files = sorted(sc.glob("*/*.flac"))
seen = lambda p: speaker(p) is not None and speaker(p)[0] in "01234567"
unseen = lambda p: speaker(p) is not None and speaker(p)[0] in "89abcdef"
positives_train = [p for p in files if said(p) == word and seen(p)]
positives_test = [p for p in files if said(p) == word and unseen(p)]
if not positives_test:
    sys.exit(f"no takes of {word!r} in {sc}")

# Training negatives: speakers 0-7 without the word, and _silence_.
negatives = work / "negatives"
if not negatives.exists():
    negatives.mkdir()
    for p in files:
        if (seen(p) and said(p) != word) or p.parent.name == "_silence_":
            (negatives / f"{p.parent.name}-{p.name}").symlink_to(p)
# The real model's data: the same negatives, and the real takes of speakers 0-7.
real = work / "real"
if not real.exists():
    (real / word).mkdir(parents=True)
    (real / "other").symlink_to(negatives)
    for p in positives_train:
        (real / word / p.name).symlink_to(p)

# The test stream.
stream, truth = work / "test.wav", work / "test.truth.csv"
if not stream.exists():
    negs = [p for p in files if unseen(p) and said(p) != word] + sorted((data / "fsdd").glob("*.flac"))
    order = list(rng.permutation(len(negs)))
    pos = list(rng.permutation(len(positives_test)))
    pieces, lines, t = [], [], 0.0
    rate = 16000

    def add(x):
        global t
        pieces.append(x)
        t += len(x) / rate

    def gap():
        add(np.zeros(int(rng.uniform(0.25, 1.0) * rate), dtype="float32"))  # the noise is added below

    k = 0
    for i, n in enumerate(order):
        x, r = sf.read(negs[n], dtype="float32")
        add((librosa.resample(x, orig_sr=r, target_sr=rate) if r != rate else x).astype(np.float32))
        gap()
        if (i + 1) % args.every == 0 and k < len(pos):
            x, r = sf.read(positives_test[pos[k]], dtype="float32")
            # The word's span: where it is within 40 dB of its own peak.
            frames = librosa.util.frame(np.pad(x, (0, 160)), frame_length=160, hop_length=160)
            loud = np.nonzero(np.abs(frames).max(axis=0) > np.abs(x).max() * 0.01)[0]
            start, end = (loud[0] * 160, (loud[-1] + 1) * 160) if len(loud) else (0, len(x))
            lines.append(f"{t + start / rate:.3f},{t + min(end, len(x)) / rate:.3f},{word}")
            add(x.astype(np.float32))
            gap()
            k += 1
    audio = np.concatenate(pieces)
    # Quiet pink noise under everything (-50 dBFS RMS).
    # (Paul Kellet's economy pink filter on white noise, float32, so that hours fit in memory.)
    pink = scipy.signal.lfilter([0.049922035, -0.095993537, 0.050612699, -0.004408786], [1, -2.494956002, 2.017265875, -0.522189400],
                                rng.standard_normal(len(audio), dtype=np.float32)).astype(np.float32)
    audio = audio + pink / np.sqrt(np.mean(pink.astype(np.float64) ** 2)) * np.float32(10 ** (-50 / 20))
    sf.write(stream, np.clip(audio, -1, 1), rate, subtype="PCM_16")
    truth.write_text("\n".join(lines) + "\n")
hours = sf.info(stream).duration / 3600
takes = len(truth.read_text().split())


def run(cmd, **kw):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, text=True, **kw)


def uptime():
    return open("/proc/loadavg").read().split()[:3]


results = {"word": word, "stream_hours": hours, "takes": takes, "real_training_takes": len(positives_train), "models": {}}
earshot = args.earshot
emb = ["--embedding", "openwakeword", "--embedding-models", args.embedding_models]
models = {
    "text (openwakeword head)": [earshot, "train-wake", word, *emb, "--negatives", str(negatives), "--force", "-o", str(work / "text-head")]
    + args.extra.split(),
    "real clips (openwakeword head)": [earshot, "train", "--data", str(real), "--background", "other", *emb, "--group-by", "([0-9a-f]{8})_nohash",
                                       "--validation-split", "0.15", "--force", "--output", str(work / "real-head")],
}
# The models from text share one data set (the first one's, made once).
data_set = ["--data", str(work / "text.data")]
models["text (openwakeword head)"] += data_set
if args.no_embedding:
    models = {}
if args.log_mel:
    models["text (log-mel, from scratch)"] = [earshot, "train-wake", word, "--architecture", "log-mel", "--negatives", str(negatives), "--force",
                                              "-o", str(work / "text-logmel"), *data_set]
if args.microwakeword:
    models["text (microwakeword, int8)"] = [earshot, "train-wake", word, "--architecture", "microwakeword", "--negatives", str(negatives), "--force",
                                            "-o", str(work / "text-microwakeword"), *data_set] + args.extra.split()
for name, cmd in models.items():
    out = pathlib.Path(cmd[cmd.index("-o") + 1] if "-o" in cmd else cmd[cmd.index("--output") + 1])
    entry = {"command": " ".join(cmd)}
    if args.retrain or not (out / "model.json").exists():
        load = uptime()
        started = time.time()
        done = run(cmd, stdout=subprocess.PIPE)
        entry.update(train_seconds=time.time() - started, load_before=load, load_after=uptime(), train_output=done.stdout.strip())
        print(done.stdout.strip(), file=sys.stderr)
    for threshold in args.thresholds.split(","):
        r = run([earshot, "evaluate", "--model", str(out), "--stream", str(stream), "--truth", str(truth), "--threshold", threshold,
                 "--format", "json"], stdout=subprocess.PIPE)
        e = json.loads(r.stdout)
        entry[threshold] = {"found": e["hits"], "takes": e["keywords"], "recall": e["hitRate"], "false_accepts": e["falseAlarms"],
                            "per_hour": e["falseAlarmsPerHour"]}
    results["models"][name] = entry
(work / "results.json").write_text(json.dumps(results, indent=1) + "\n")
print(f"{word}: {takes} takes of {word!r} by unseen speakers in {hours:.2f} h of their and FSDD's other words")
print("| model | training | threshold | found | false accepts (per hour) |")
print("|---|---|---|---|---|")
for name, entry in results["models"].items():
    trained = f"{entry['train_seconds'] / 60:.1f} min (load {'/'.join(entry['load_before'])})" if "train_seconds" in entry else "(kept)"
    for threshold in args.thresholds.split(","):
        f = entry[threshold]
        print(f"| {name} | {trained} | {threshold} | {f['found']} of {f['takes']} ({100 * (f['recall'] or 0):.1f}%) | "
              f"{f['false_accepts']} ({f['per_hour']:.2f}) |")
