#!/usr/bin/env python3
"""Writes Tests/Fuzz/: the hostile inputs that once crashed Earshot or were taken silently,
replayed by Tests/EarshotTests/FuzzTests.swift (each must now be refused with a typed error).

Standard library only. Run from the repository root: python3 tools/make_fuzz_corpus.py
"""
import json
import math
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FUZZ = os.path.join(ROOT, "Tests", "Fuzz")


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return format(h, "016x")


def safetensors(tensors, offsets=None) -> bytes:
    """tensors: [(name, shape, [floats])]; offsets: {name: (begin, end)} to forge overlaps."""
    header, body = {}, b""
    for name, shape, values in tensors:
        begin = len(body)
        body += struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": (offsets or {}).get(name, [begin, len(body)])}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + body


def tiny_manifest(**decision):
    """A package small enough to commit: 16-sample blocks, a 16-point STFT, one linear layer."""
    return {
        "format": "earshot-model", "formatVersion": 1, "name": "tiny",
        "audio": {"sampleRate": 16000, "chunkSamples": 16, "contextSamples": 0},
        "frontEnd": {"type": "stft", "nFFT": 16, "hopLength": 16},
        "network": [{"type": "linear", "inFeatures": 9, "outFeatures": 1, "weight": "w", "bias": "b"}],
        "outputs": {"activation": "sigmoid", "reduceTime": "mean", "labels": ["x"]},
        "decision": decision or {"threshold": 0.5},
    }


def write_package(name, manifest, weights, reason):
    """`reason`: words the loader's error must contain (Tests/EarshotTests/FuzzTests.swift checks)."""
    folder = os.path.join(FUZZ, "package", name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "refused-because.txt"), "w") as f:
        f.write(reason + "\n")
    with open(os.path.join(folder, "model.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    with open(os.path.join(folder, "weights.safetensors"), "wb") as f:
        f.write(weights)


def state_bytes(model_hash, steps, context, carry, resign=True):
    body = b"ESTATE" + struct.pack("<I", 2) + model_hash.encode() + struct.pack("<QII", steps, len(context), len(carry))
    body += struct.pack("<%df" % (len(context) + len(carry)), *(context + carry))
    return body + struct.pack("<I", crc32c(body) if resign else 0)


def main():
    good = [("w", [1, 9], [0.1] * 9), ("b", [1], [0.0])]
    # The manifest's padMs of 1e18 trapped in the label logic (Int of a huge Double).
    write_package("decision-pad-1e18", tiny_manifest(padMs=1e18), safetensors(good), "decision.padMs 1e+18")
    write_package("decision-max-segment-inf", tiny_manifest(maxSegmentSeconds=1e308), safetensors(good),
                  "decision.maxSegmentSeconds 1e+308")
    # Two tensors over the same bytes loaded and ran.
    write_package("overlapping-tensors", tiny_manifest(), safetensors(good, offsets={"b": [0, 4]}), "overlap")
    # All-NaN weights loaded and said "x" with score 1 everywhere.
    write_package("nan-weights", tiny_manifest(), safetensors([("w", [1, 9], [math.nan] * 9), ("b", [1], [math.nan])]),
                  "is nan; weights must be finite")
    write_package("inf-bias", tiny_manifest(), safetensors([("w", [1, 9], [0.1] * 9), ("b", [1], [math.inf])]),
                  "tensor 'b': value 0 is inf")
    bad_rate = tiny_manifest()
    bad_rate["audio"]["sampleRate"] = 1 << 40
    write_package("sample-rate-2e40", bad_rate, safetensors(good), "sampleRate must be in 1...384000 Hz")
    # The control: the same package, sound, loads (so each above is refused for its own reason).
    write_package("control-loads", tiny_manifest(), safetensors(good), "")

    # States of Models/silero-vad (64 context values, 2 x 128 x 2 carry values).
    with open(os.path.join(ROOT, "Models", "silero-vad", "weights.safetensors"), "rb") as f:
        silero = fnv1a64(f.read())
    os.makedirs(os.path.join(FUZZ, "state"), exist_ok=True)
    context, carry = [0.0] * 64, [0.0] * 512
    states = {
        # Int64.max steps: the next step trapped on steps += 1.
        "steps-int64-max": state_bytes(silero, 2**63 - 1, context, carry),
        "nan-carry": state_bytes(silero, 10, context, [math.nan] + carry[1:]),
        "inf-context": state_bytes(silero, 10, [math.inf] + context[1:], carry),
        # A flipped bit in a float went unnoticed (10,303 of 10,576 flips were accepted).
        "bit-flip": bytearray(state_bytes(silero, 10, context, carry)),
        "no-checksum": state_bytes(silero, 10, context, carry, resign=False),
    }
    states["bit-flip"][6 + 4 + 16 + 8 + 4 + 4 + 100] ^= 0x10
    for name, data in states.items():
        with open(os.path.join(FUZZ, "state", name + ".bin"), "wb") as f:
            f.write(bytes(data))

    # Command lines (first line the command, then one word per line) that must be usage errors.
    os.makedirs(os.path.join(FUZZ, "args"), exist_ok=True)
    for name, words in {
        "bench-streams-counts-zero": ["bench", "streams", "--counts", "0", "--ticks", "10"],
        "bench-streams-counts-negative": ["bench", "streams", "--counts", "-5", "--ticks", "10"],
        "bench-streams-counts-text": ["bench", "streams", "--counts", "abc", "--ticks", "10"],
        "label-pad-nan": ["label", "--pad", "nan", "AudioSamples/speech-noise-16k.wav"],
        "label-threshold-inf": ["label", "--threshold", "inf", "AudioSamples/speech-noise-16k.wav"],
    }.items():
        with open(os.path.join(FUZZ, "args", name), "w") as f:
            f.write("\n".join(words) + "\n")

    # An audio file whose header announces 1024 channels of 30 frames (63 KB): it took 1 GB
    # when reads were sized in frames.
    os.makedirs(os.path.join(FUZZ, "audio"), exist_ok=True)
    channels, frames = 1024, 30
    data = struct.pack("<%dh" % (channels * frames), *[(i * 37) % 2000 - 1000 for i in range(channels * frames)])
    fmt = struct.pack("<HHIIHH", 1, channels, 16000, 16000 * channels * 2, channels * 2, 16)
    wav = b"RIFF" + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(data)) + b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    wav += b"data" + struct.pack("<I", len(data)) + data
    with open(os.path.join(FUZZ, "audio", "channels-1024.wav"), "wb") as f:
        f.write(wav)
    # A header that announces ten times the data the file holds.
    short = wav[:40] + struct.pack("<I", len(data) * 10) + data[:1000]
    with open(os.path.join(FUZZ, "audio", "truncated.wav"), "wb") as f:
        f.write(short)


if __name__ == "__main__":
    main()
