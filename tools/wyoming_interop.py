"""`earshot serve` against the real Wyoming client (PyPI `wyoming`, its AsyncTcpClient), as Home
Assistant uses it: describe → info, then detect / audio-start / audio-chunk (20 ms, with
timestamps) / audio-stop. Checks that the info is one Home Assistant accepts (wake programs
with installed models, names and phrases) and that the answers equal `earshot label` on the same
audio, for the wake-word corpus and the bundled samples (16 kHz, and 44.1 kHz resampled by the
server). Prints a transcript; exits 1 on any difference.

    python tools/wyoming_interop.py --earshot .build/debug/earshot
"""
import argparse
import asyncio
import json
import pathlib
import re
import subprocess
import sys
import wave

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info
from wyoming.ping import Ping
from wyoming.wake import Detect, Detection, NotDetected

root = pathlib.Path(__file__).resolve().parent.parent
MODELS = "okay-nabu,hey-jarvis,alexa,hey-mycroft,silero-vad"
WAKE = ["okay-nabu", "hey-jarvis", "alexa", "hey-mycroft"]
failures = []


def check(ok, what):
    print(("  ok    " if ok else "  FAIL  ") + what)
    if not ok:
        failures.append(what)


def label(earshot, model, path):
    """earshot label's events for one model, as the answers a client should get (ms)."""
    out = subprocess.run([earshot, "label", "--model", model, "--format", "jsonl", str(path)],
                         check=True, capture_output=True, text=True, cwd=root).stdout
    answers = []
    for line in out.splitlines():
        e = json.loads(line)
        if "start" in e and "end" in e:
            answers.append(("voice-started", round(e["start"] * 1000)))
            answers.append(("voice-stopped", round(e["end"] * 1000)))
        elif "time" in e:
            answers.append(("detection", e.get("label"), e["time"]))
    return answers


async def stream(port, path, names):
    """Streams a WAV file as Home Assistant does; the answers, until a ping after audio-stop."""
    with wave.open(str(path)) as w:
        rate, width, channels = w.getframerate(), w.getsampwidth(), w.getnchannels()
        frames = w.readframes(w.getnframes())
    chunk = rate // 50 * width * channels
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Detect(names=names).event())
        await client.write_event(AudioStart(rate=rate, width=width, channels=channels, timestamp=0).event())
        for i, at in enumerate(range(0, len(frames), chunk)):
            await client.write_event(AudioChunk(rate=rate, width=width, channels=channels, audio=frames[at:at + chunk],
                                                timestamp=i * 20).event())
        await client.write_event(AudioStop().event())
        await client.write_event(Ping(text="end").event())
        answers = []
        while True:
            event = await asyncio.wait_for(client.read_event(), 60)
            if event is None or event.type == "pong":
                return answers, rate
            if Detection.is_type(event.type):
                d = Detection.from_event(event)
                answers.append(("detection", d.name, d.timestamp))
            elif NotDetected.is_type(event.type):
                answers.append(("not-detected",))
            elif event.type in ("voice-started", "voice-stopped"):
                answers.append((event.type, event.data["timestamp"]))
            elif event.type == "error":
                answers.append(("error", event.data.get("text")))


async def main(earshot, serve_args):
    server = subprocess.Popen([earshot, "serve", "--uri", "tcp://127.0.0.1:0", "--model", MODELS] + serve_args,
                              stderr=subprocess.PIPE, text=True, cwd=root)
    line = server.stderr.readline()
    match = re.search(r"on tcp://127\.0\.0\.1:(\d+)", line)
    if not match:
        print(line + server.stderr.read())
        sys.exit(1)
    port = int(match.group(1))
    print(f"earshot serve on port {port}: {line.strip()}")
    try:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Describe().event())
            info = Info.from_event(await asyncio.wait_for(client.read_event(), 10))
        print("describe → info:")
        wake = [m for p in info.wake if p.installed for m in p.models if m.installed]
        for m in wake:
            print(f"    wake model {m.name!r}: phrase {m.phrase!r}, languages {m.languages}, by {m.attribution.name}")
        check([m.name for m in wake] == WAKE, f"info lists the wake models {WAKE}")
        check(all(m.phrase for m in wake), "every wake model has a phrase")

        corpus = root / "Tests/EarshotTests/Goldens/microwakeword/wake-words.wav"
        for names in (None, ["okay-nabu"], ["hey-jarvis"]):
            served, rate = await stream(port, corpus, names)
            wanted = names or WAKE
            expected = []
            for model in wanted:
                for a in label(earshot, model, corpus):
                    # A detection is answered with the timestamp of the 20 ms chunk holding its time.
                    expected.append(("detection", model, int((round(a[2] * rate) - 1) // (rate // 50) * 20)))
            got = [a for a in served if a[0] == "detection"]
            print(f"  detect {names}: {got or served}")
            check(sorted(got) == sorted(expected), f"wake-word corpus, detect {names}: detections equal earshot label's")
            check(("not-detected",) in served if not expected else ("not-detected",) not in served,
                  f"detect {names}: not-detected exactly when nothing was detected")

        for sample in ("AudioSamples/speech-noise-16k.wav", "AudioSamples/speech-44k.wav"):
            served, rate = await stream(port, root / sample, ["okay-nabu"])
            voice = [a for a in served if a[0].startswith("voice-")]
            expected = label(earshot, "silero-vad", root / sample)
            print(f"  {sample} ({rate} Hz): {len(voice) // 2} voice segments, first {voice[:2]}")
            check(voice == expected, f"{sample}: voice-started/voice-stopped equal earshot label's segments")
    finally:
        server.terminate()
        code = server.wait(30)
        check(code == 0, f"SIGTERM: earshot serve exits 0 (exit {code})")
    if failures:
        print(f"{len(failures)} checks failed")
        sys.exit(1)
    print("all interoperability checks passed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--earshot", default=str(root / ".build/debug/earshot"))
    parser.add_argument("--read-batch-clients", help="passed to earshot serve (1: every client read in batches)")
    args = parser.parse_args()
    asyncio.run(main(args.earshot, ["--read-batch-clients", args.read_batch_clients] if args.read_batch_clients else []))
