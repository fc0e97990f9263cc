#!/usr/bin/env python3
"""Hostile .tflite files for Earshot's reader and importer (Tests/Fuzz/tflite), made from
Models/sources/microwakeword/okay_nabu.tflite by patching single fields of its FlatBuffer.
Every file must be refused with a typed error (TFLiteError, an import error or a ModelError).

Needs only the Python standard library. Run from the repository root:
  python3 tools/make_tflite_corpus.py
"""
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "Models/sources/microwakeword/okay_nabu.tflite"
OUT = ROOT / "Tests/Fuzz/tflite"


def u32(b, at):
    return struct.unpack_from("<I", b, at)[0]


def table(b, pos):
    """(position, vtable position, field count)"""
    vt = pos - struct.unpack_from("<i", b, pos)[0]
    size = struct.unpack_from("<H", b, vt)[0]
    return pos, vt, (size - 4) // 2


def field(b, t, index):
    pos, vt, count = t
    if index >= count:
        return None
    off = struct.unpack_from("<H", b, vt + 4 + 2 * index)[0]
    return pos + off if off else None


def follow(b, at):
    return at + u32(b, at)


def vector(b, t, index):
    at = field(b, t, index)
    v = follow(b, at)
    return v + 4, u32(b, v), v


def tables(b, t, index):
    start, count, _ = vector(b, t, index)
    return [table(b, follow(b, start + 4 * i)) for i in range(count)]


def main():
    src = bytearray(SOURCE.read_bytes())
    OUT.mkdir(parents=True, exist_ok=True)
    model = table(src, u32(src, 0))
    graphs = tables(src, model, 2)
    main_graph = graphs[0]
    tensors = tables(src, main_graph, 0)
    operators = tables(src, main_graph, 3)
    codes = tables(src, model, 1)
    cases = {}

    cases["empty.tflite"] = b""
    cases["not-a-flatbuffer.tflite"] = b"this is not a model\n"
    cases["root-past-end.tflite"] = struct.pack("<I", 0x7FFFFFF0) + b"TFL3" + bytes(8)
    # A root table whose vtable offset points before the file's start.
    cases["vtable-before-start.tflite"] = struct.pack("<I", 8) + b"TFL3" + struct.pack("<i", 0x40000000) + bytes(8)
    cases["truncated-half.tflite"] = bytes(src[: len(src) // 2])

    b = bytearray(src)
    _, _, v = vector(b, model, 2)
    struct.pack_into("<I", b, v, 0xFFFFFFFF)
    cases["subgraph-count-huge.tflite"] = bytes(b)

    b = bytearray(src)
    start, count, _ = vector(b, tensors[0], 0)
    struct.pack_into("<i", b, start, -1)
    cases["negative-dimension.tflite"] = bytes(b)

    # The first CONV_2D's filter typed FLOAT32 (its 8-bit data no longer fits the type).
    def code_of(op):
        at = field(src, op, 0)
        c = codes[u32(src, at) if at else 0]
        deprecated = field(src, c, 0)
        builtin = field(src, c, 3)
        return max(struct.unpack_from("<b", src, deprecated)[0] if deprecated else 0, u32(src, builtin) if builtin else 0)

    conv = next(op for op in operators if code_of(op) == 3)
    inputs_start, _, _ = vector(src, conv, 1)
    filter_index = struct.unpack_from("<i", src, inputs_start + 4)[0]
    b = bytearray(src)
    type_at = field(b, tensors[filter_index], 1)
    b[type_at] = 0
    cases["filter-typed-float.tflite"] = bytes(b)

    # An operator reading a tensor that does not exist.
    b = bytearray(src)
    struct.pack_into("<i", b, inputs_start, 100000)
    cases["input-index-out-of-range.tflite"] = bytes(b)

    # CALL_ONCE calling the main subgraph (a cycle).
    call_once = operators[0]
    opts = table(src, follow(src, field(src, call_once, 4)))
    b = bytearray(src)
    struct.pack_into("<i", b, field(b, opts, 0), 0)
    cases["call-once-cycle.tflite"] = bytes(b)

    # An operator code no importer knows.
    b = bytearray(src)
    at = field(b, codes[-1], 3)
    struct.pack_into("<i", b, at, 250)
    at0 = field(b, codes[-1], 0)
    if at0:
        b[at0] = 127
    cases["unknown-operator.tflite"] = bytes(b)

    # A shape whose empty axis hides a huge product (zeros count as ones against the limit).
    b = bytearray(src)
    start, count, _ = vector(b, tensors[0], 0)
    for i in range(count):
        struct.pack_into("<i", b, start + 4 * i, 0 if i == count - 1 else 0x7FFFFFFF)
    cases["empty-axis-hides-huge.tflite"] = bytes(b)

    # The dense layer's weights with a zero point no 8-bit tensor has (-2^63: negating it overflows).
    dense = next(op for op in operators if code_of(op) == 9)
    dense_inputs, _, _ = vector(src, dense, 1)
    weights = tensors[struct.unpack_from("<i", src, dense_inputs + 4)[0]]
    quant = table(src, follow(src, field(src, weights, 4)))
    zeros_start, zeros_count, _ = vector(src, quant, 3)
    assert zeros_count >= 1
    b = bytearray(src)
    struct.pack_into("<q", b, zeros_start, -(1 << 63))
    cases["weights-zero-point-huge.tflite"] = bytes(b)

    # The first CONV_2D made RELU6 with its filter, bias and output scales made 1e-22 times as
    # small: the products and multiplier are as before, but the activation's bound, 6 over the
    # output scale, is beyond any integer (it is held at the 8-bit range, not converted).
    b = bytearray(src)
    opts = table(b, follow(b, field(b, conv, 4)))
    act_at = field(b, opts, 3)
    assert act_at and b[act_at] == 1
    b[act_at] = 3
    conv_tensors = [struct.unpack_from("<i", src, inputs_start + 4 * k)[0] for k in (1, 2)]
    conv_tensors.append(struct.unpack_from("<i", src, vector(src, conv, 2)[0])[0])
    for index in conv_tensors:
        quant = table(b, follow(b, field(b, tensors[index], 4)))
        start, count, _ = vector(b, quant, 2)
        for i in range(count):
            at = start + 4 * i
            struct.pack_into("<f", b, at, struct.unpack_from("<f", b, at)[0] * 1e-22)
    cases["relu6-bound-beyond-int.tflite"] = bytes(b)

    for name, data in cases.items():
        (OUT / name).write_bytes(data)
    (OUT / "README.md").write_text(
        "Hostile .tflite files made by `tools/make_tflite_corpus.py` from okay_nabu.tflite; each must be\n"
        "refused with a typed error naming the file and the reason (`TFLiteHostileTests`).\n")
    print(f"{len(cases)} files in {OUT}")


if __name__ == "__main__":
    main()
