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
model's own held-out synthesized voices. Writes tools/.cache/train-wake-WORD/results.json (or
--work DIR) and prints a table; the training times with the machine's load (uptime) before and after.

- --held-out-speakers 67: speakers 0-7 whose id starts with those digits are not trained on; their
  other words make validation.wav, a real negative stream.
- --windows 1,3,5: decision rules over time for the text head, from every step's scores (`earshot
  label --scores`) of the test stream, validation.wav and the held-out voices' two streams: the mean
  of the latest N scores above a cutoff (microWakeWord's sliding window, the runtime's `--window`;
  checked against `earshot evaluate --window N`), or all N above it (openWakeWord's patience), then 2 s
  of rest. The rule chosen finds the most held-out voices' takes with at most --goal false accepts an
  hour on the held-out negatives (validation.wav and the held-out voices' distractors); the test
  stream is only reported, never used to choose.
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
parser.add_argument("--work", help="the folder of data, models and results (default tools/.cache/train-wake-WORD)")
parser.add_argument("--no-real", action="store_true", help="leave out the model trained on the real takes")
parser.add_argument("--held-out-speakers", default="",
                    help="first hex digits of speakers 0-7 kept out of training (e.g. 7): their words make a negative stream "
                         "(validation.wav) that chooses the decision rule, never the test stream")
parser.add_argument("--windows", default="", help="also decision rules: the mean of the latest N scores (N from this list, e.g. 1,3,5) "
                    "above a cutoff, 2 s refractory, from every step's scores (earshot label --scores)")
parser.add_argument("--goal", type=float, default=0.5, help="false accepts an hour the chosen rule may give on validation.wav")
args = parser.parse_args()
word = args.word
data = pathlib.Path(os.environ.get("EARSHOT_DATA", root.parent / "shared/data"))
sc = data / "speech-commands"
work = pathlib.Path(args.work) if args.work else root / "tools/.cache" / f"train-wake-{word}"
work.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(1)
hexid = re.compile(r"([0-9a-f]{8})_nohash")


def speaker(path):
    m = hexid.search(path.name)
    return m.group(1) if m else None


def said(path):  # the word of a Speech Commands file
    return path.name.split("_")[0] if path.parent.name == "_unknown_" else path.parent.name


files = sorted(sc.glob("*/*.flac"))
held = set(args.held_out_speakers)
if not held <= set("01234567"):
    sys.exit(f"--held-out-speakers {args.held_out_speakers}: expected first digits of speakers 0-7")
seen = lambda p: speaker(p) is not None and speaker(p)[0] in set("01234567") - held
validating = lambda p: speaker(p) is not None and speaker(p)[0] in held
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

def make_stream(path, truth_path, negs, takes):
    """negs' clips one after another with takes of the word after every --every of them, 0.25-1 s of quiet pink noise between."""
    order = list(rng.permutation(len(negs)))
    pos = list(rng.permutation(len(takes)))
    pieces, lines, t = [], [], 0.0
    rate = 16000

    def add(x):
        nonlocal t
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
            x, r = sf.read(takes[pos[k]], dtype="float32")
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
    sf.write(path, np.clip(audio, -1, 1), rate, subtype="PCM_16")
    truth_path.write_text("".join(line + "\n" for line in lines))


# The test stream.
stream, truth = work / "test.wav", work / "test.truth.csv"
if not stream.exists():
    make_stream(stream, truth, [p for p in files if unseen(p) and said(p) != word] + sorted((data / "fsdd").glob("*.flac")), positives_test)
# The validation stream: the held-out speakers' other words, no take of the word (false accepts only).
validation, validation_truth = work / "validation.wav", work / "validation.truth.csv"
if held and not validation.exists():
    make_stream(validation, validation_truth, [p for p in files if validating(p) and said(p) != word], [])
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
if args.no_real:
    models.pop("real clips (openwakeword head)", None)
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

# Decision rules over time: every step's scores once (earshot label --scores), then microWakeWord's
# rule (and the runtime's, DetectionTracker): the mean of the latest N scores above a cutoff detects,
# then the label rests 2 s; matched to the words as `earshot evaluate --stream` matches them (the
# first unused detection announced from a word's start to 1 s after its end).
if args.windows and "text (openwakeword head)" in results["models"]:
    model = work / "text-head"
    text_data = work / "text.data"
    streams = {"test": (stream, truth), "held-out voices": (text_data / "stream.wav", text_data / "stream.truth.csv"),
               "held-out distractors": (text_data / "distractors.wav", text_data / "none.truth.csv")}
    if held:
        streams["validation (real, held out)"] = (validation, validation_truth)

    def step_scores(audio):
        out = work / (audio.stem + "-" + model.name + ".scores.csv")
        if not out.exists() or args.retrain:
            run([earshot, "label", "-m", str(model), "--scores", "-f", "csv", "-q", "-o", str(out), str(audio)])
        rows = [line.split(",") for line in out.read_text().split("\n")[1:] if line]
        return np.array([float(r[3]) for r in rows]), np.array([float(r[-1]) for r in rows])

    def detect(ends, scores, window, cutoff, patience=False, refractory_steps=25):  # 2 s of 80 ms steps, rounded up, as DetectionTracker
        found, quiet = [], 0
        if patience:  # openWakeWord's patience: the latest N scores all above the cutoff
            means = np.lib.stride_tricks.sliding_window_view(scores, window).min(axis=1)
        else:
            means = np.convolve(scores, np.ones(window) / window)[window - 1:len(scores)]
        for i in np.nonzero(means > cutoff)[0] + window - 1:
            if i >= quiet:
                found.append(ends[i])
                quiet = i + 1 + refractory_steps
        return found

    def score(words, found, seconds):
        used, hits = set(), 0
        for start, end in words:
            i = next((i for i, t in enumerate(found) if i not in used and start <= t <= end + 1.0), None)
            if i is not None:
                used.add(i)
                hits += 1
        return hits, len(words), len(found) - hits, (len(found) - hits) / (seconds / 3600)

    traces = {}
    for name, (audio, words_csv) in streams.items():
        ends, scores = step_scores(audio)
        words = [tuple(map(float, line.split(",")[:2])) for line in words_csv.read_text().split("\n") if line and line.split(",")[2] == word]
        traces[name] = (ends, scores, words, sf.info(audio).duration)
    # The rule as simulated here is the runtime's: checked against `earshot evaluate --window N` on the held-out voices' stream.
    for window in map(int, args.windows.split(",")):
        for cutoff in (0.5, 0.9):
            audio, words_csv = streams["held-out voices"]
            r = run([earshot, "evaluate", "--model", str(model), "--stream", str(audio), "--truth", str(words_csv), "--threshold", str(cutoff),
                     "--window", str(window), "--refractory", "2000", "--format", "json"], stdout=subprocess.PIPE)
            e, (ends, scores, words, seconds) = json.loads(r.stdout), traces["held-out voices"]
            simulated = score(words, detect(ends, scores, window, cutoff), seconds)
            if (e["hits"], e["falseAlarms"]) != simulated[::2]:
                sys.exit(f"the simulated rule (mean {window} @ {cutoff}: {simulated[0]} found, {simulated[2]} false accepts) is not the "
                         f"runtime's ({e['hits']}, {e['falseAlarms']})")
    cutoffs = [round(c, 4) for c in [*np.arange(0.2, 0.9, 0.02), *np.arange(0.9, 0.999, 0.002), 0.999, 0.9995]]
    shown = {0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.996, 0.998, 0.999, 0.9995}
    rules = {}
    for window in map(int, args.windows.split(",")):
        for patience in ([False, True] if window > 1 else [False]):
            for cutoff in cutoffs:
                rules[f"{'all' if patience else 'mean'} {window} @ {cutoff}"] = {
                    name: score(w, detect(e, s, window, cutoff, patience), sec) for name, (e, s, w, sec) in traces.items()}
    results["rules"] = rules
    # The rule chosen without the test stream: the most held-out voices' takes found with no more
    # false accepts an hour than --goal on the held-out negatives (real held-out speakers and the held-out voices' distractors).
    negatives_of = [n for n in traces if n not in ("test", "held-out voices")]
    hours_of = sum(traces[n][3] for n in negatives_of) / 3600
    def held_out_fa(r): return sum(rules[r][n][2] for n in negatives_of) / hours_of
    allowed = [r for r in rules if held_out_fa(r) <= args.goal] or [min(rules, key=held_out_fa)]
    chosen = max(allowed, key=lambda r: (rules[r]["held-out voices"][0], -held_out_fa(r)))
    results["chosen_rule"] = chosen
    (work / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"\nDecision rules of the text head (the mean of the latest N scores, or all N, above the cutoff; held-out negatives: {', '.join(negatives_of)}, {hours_of:.2f} h); "
          f"chosen on them: {chosen}")
    print("| rule | held-out voices found | held-out negatives' false accepts (per hour) | test: found | test: false accepts (per hour) |")
    print("|---|---|---|---|---|")
    for r, v in rules.items():
        if float(r.split("@")[1]) not in shown:
            continue
        t, h = v["test"], v["held-out voices"]
        print(f"| {r}{' (chosen)' if r == chosen else ''} | {h[0]} of {h[1]} | {sum(v[n][2] for n in negatives_of)} ({held_out_fa(r):.1f}) | "
              f"{t[0]} of {t[1]} ({100 * t[0] / max(1, t[1]):.1f}%) | {t[2]} ({t[3]:.2f}) |")
    # The trade-off curve of each rule on the test stream: the most takes found within a rate of false accepts.
    budgets = [0.6, 1.2, 1.8, 3.0, 6.0, 12.0]
    families = list(dict.fromkeys(r.split(" @ ")[0] for r in rules))
    print("\nTest stream: the most takes found with at most this many false accepts an hour (cutoff, false accepts an hour)")
    print("| at most | " + " | ".join(families) + " |")
    print("|---" * (len(families) + 1) + "|")
    for budget in budgets:
        cells = []
        for family in families:
            best = max(((v["test"][0], -float(r.split("@")[1]), v["test"][3]) for r, v in rules.items()
                        if r.startswith(family + " @") and v["test"][3] <= budget), default=None)
            cells.append(f"{100 * best[0] / takes:.1f}% ({-best[1]:.4g}, {best[2]:.2f})" if best else "-")
        print(f"| {budget} | " + " | ".join(cells) + " |")
