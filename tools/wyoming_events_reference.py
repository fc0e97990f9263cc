"""Writes events as the PyPI `wyoming` package writes them (its own write_event), for the
Swift reader's tests: Tests/EarshotWyomingTests/Goldens/events.bin, and the same events as
JSON lines (type, data with each value tagged by its kind, payload as a list of bytes) in
events.json.

    tools/.venv/bin/python tools/wyoming_events_reference.py
"""
import io
import json
import pathlib

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event, write_event
from wyoming.info import Describe
from wyoming.wake import Detect, Detection

out = pathlib.Path(__file__).resolve().parent.parent / "Tests/EarshotWyomingTests/Goldens"
events = [
    Describe().event(),
    Detect(names=["okay-nabu", "hey \"jarvis\" \u00e9\u00e8 \U0001F600"]).event(),
    AudioStart(rate=16000, width=2, channels=1, timestamp=0).event(),
    AudioChunk(rate=16000, width=2, channels=1, audio=bytes(range(256)) * 5, timestamp=20).event(),
    AudioChunk(rate=44100, width=3, channels=2, audio=b"\x01\x02\x03\x04\x05\x06", timestamp=None).event(),
    AudioStop(timestamp=40).event(),
    Detection(name="okay-nabu", timestamp=1234).event(),
    Event(type="custom-thing", data={"nested": {"a": [1, 2.5, -3e-7, True, False, None]}, "tab\tkey": "line\nbreak"}),
    Event(type="no-data"),
]
buffer = io.BytesIO()
for e in events:
    write_event(e, buffer)
(out / "events.bin").write_bytes(buffer.getvalue())


def tagged(v):
    """Each JSON value with its kind, so that a reader need not guess which numbers are booleans."""
    if v is None:
        return ["null"]
    if isinstance(v, bool):
        return ["bool", v]
    if isinstance(v, (int, float)):
        return ["number", v]
    if isinstance(v, str):
        return ["string", v]
    if isinstance(v, list):
        return ["array", [tagged(x) for x in v]]
    return ["object", {k: tagged(x) for k, x in v.items()}]


with open(out / "events.json", "w") as f:
    for e in events:
        f.write(json.dumps({"type": e.type, "data": tagged(e.data), "payload": list(e.payload or b"")}) + "\n")
print(f"{len(events)} events, {len(buffer.getvalue())} bytes")
