#!/usr/bin/env python3
"""Tiny float .tflite graphs, one operator each (a few with the shape arithmetic or the second
op that makes their output one float tensor), and TFLite's own outputs on them: the corpus that
Tests/EarshotTests/ConformanceTFLiteTests.swift imports and runs through Earshot.

Each graph is written with the `tflite` package's FlatBuffers builders (TensorFlow is not
needed); its outputs come from ai-edge-litert's Interpreter (the default resolver: XNNPACK where it
takes the op, TFLite's builtin kernels otherwise; one thread) on a seeded random input.
Writes Tests/EarshotTests/Goldens/conformance/tflite-ops/<case>.tflite and ops.json (inputs,
outputs, and how they were made). Run from the repository root:
  tools/.venv/bin/python tools/make_tflite_op_corpus.py
"""
import importlib
import json
from pathlib import Path

import flatbuffers
import numpy as np
import tflite
from ai_edge_litert import interpreter as litert
from tflite.BuiltinOperator import BuiltinOperator as OP
from tflite.BuiltinOptions import BuiltinOptions as OPT
from tflite.TensorType import TensorType as T

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "Tests/EarshotTests/Goldens/conformance/tflite-ops"
SEED = 47
ACTIVATIONS = {"none": 0, "relu": 1, "relu_n1_to_1": 2, "relu6": 3, "tanh": 4}
NP = {T.FLOAT32: np.float32, T.INT32: np.int32, T.FLOAT16: np.float16, T.INT8: np.int8, T.BOOL: np.bool_}


class Graph:
    """Tensors and operators of one subgraph; `const` and `tensor` give tensor indices."""

    def __init__(self):
        self.tensors, self.ops, self.inputs = [], [], []

    def tensor(self, shape, type_=T.FLOAT32, data=None, quant=None):
        self.tensors.append((list(shape), type_, data, quant))
        return len(self.tensors) - 1

    def const(self, values, type_=T.FLOAT32, quant=None):
        a = np.asarray(values, dtype=NP[type_])
        return self.tensor(a.shape, type_, a.tobytes(), quant)

    def input(self, shape):
        i = self.tensor(shape)
        self.inputs.append(i)
        return i

    def op(self, code, inputs, out_shapes, options=None, out_type=T.FLOAT32):
        outs = [self.tensor(s, out_type) for s in out_shapes]
        self.ops.append((code, inputs, outs, options))
        return outs[0] if len(outs) == 1 else outs


def build(g, output):
    b = flatbuffers.Builder(1024)
    codes = sorted({op[0] for op in g.ops})

    def vector(width, values, prepend, alignment=None):
        b.StartVector(width, len(values), alignment or width)
        for v in reversed(values):
            prepend(v)
        return b.EndVector()

    def int_vector(values):
        return vector(4, values, b.PrependInt32)

    def table_vector(items):
        return vector(4, items, b.PrependUOffsetTRelative)

    # Buffers: 0 empty, then one per constant.
    buffers, tensor_buffers = [], []
    for shape, type_, data, quant in g.tensors:
        if data is None:
            tensor_buffers.append(0)
            continue
        vec = vector(1, list(data), b.PrependByte, 16)
        tflite.BufferStart(b)
        tflite.BufferAddData(b, vec)
        buffers.append(tflite.BufferEnd(b))
        tensor_buffers.append(len(buffers))
    tflite.BufferStart(b)
    empty = tflite.BufferEnd(b)
    buffers = [empty] + buffers

    tensors = []
    for k, (shape, type_, data, quant) in enumerate(g.tensors):
        name = b.CreateString(f"t{k}")
        shp = int_vector(shape)
        q = None
        if quant is not None:
            # (scales, zero points) or (scales, zero points, the quantized dimension of per-channel scales).
            scales, zeros = quant[0], quant[1]
            sv, zv = vector(4, scales, b.PrependFloat32), vector(8, zeros, b.PrependInt64)
            tflite.QuantizationParametersStart(b)
            tflite.QuantizationParametersAddScale(b, sv)
            tflite.QuantizationParametersAddZeroPoint(b, zv)
            if len(quant) > 2:
                tflite.QuantizationParametersAddQuantizedDimension(b, quant[2])
            q = tflite.QuantizationParametersEnd(b)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shp)
        tflite.TensorAddType(b, type_)
        tflite.TensorAddBuffer(b, tensor_buffers[k])
        tflite.TensorAddName(b, name)
        if q is not None:
            tflite.TensorAddQuantization(b, q)
        tensors.append(tflite.TensorEnd(b))
    ops = []
    for code, inputs, outs, options in g.ops:
        opts = None
        if options is not None:
            kind, fields = options
            module = importlib.import_module(f"tflite.{kind}")
            vectors = {k: int_vector(v) for k, v in fields.items() if isinstance(v, list)}
            getattr(module, f"{kind}Start")(b)
            for key, value in fields.items():
                getattr(module, f"{kind}Add{key}")(b, vectors.get(key, value))
            opts = getattr(module, f"{kind}End")(b)
        iv, ov = int_vector(inputs), int_vector(outs)
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, codes.index(code))
        tflite.OperatorAddInputs(b, iv)
        tflite.OperatorAddOutputs(b, ov)
        if opts is not None:
            tflite.OperatorAddBuiltinOptionsType(b, getattr(OPT, options[0]))
            tflite.OperatorAddBuiltinOptions(b, opts)
        ops.append(tflite.OperatorEnd(b))
    tv, ov_, iv_, opv = table_vector(tensors), int_vector([output]), int_vector(g.inputs), table_vector(ops)
    sname = b.CreateString("main")
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tv)
    tflite.SubGraphAddInputs(b, iv_)
    tflite.SubGraphAddOutputs(b, ov_)
    tflite.SubGraphAddOperators(b, opv)
    tflite.SubGraphAddName(b, sname)
    graph = tflite.SubGraphEnd(b)
    opcodes = []
    for code in codes:
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
        tflite.OperatorCodeAddBuiltinCode(b, code)
        tflite.OperatorCodeAddVersion(b, 1)
        opcodes.append(tflite.OperatorCodeEnd(b))
    cv, gv, bv = table_vector(opcodes), table_vector([graph]), table_vector(buffers)
    desc = b.CreateString("tools/make_tflite_op_corpus.py")
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, cv)
    tflite.ModelAddSubgraphs(b, gv)
    tflite.ModelAddDescription(b, desc)
    tflite.ModelAddBuffers(b, bv)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


CASES = {}


def case(name, positive=False):
    def register(fn):
        CASES[name] = (fn, positive)
        return fn
    return register


rng = np.random.default_rng(SEED)


def rand(*shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, size=shape).astype(np.float32)


def binary(code, kind, act, operand):
    def fn():
        g = Graph()
        x = g.input([1, 4, 6])
        y = g.op(code, [x, g.const(operand)], [[1, 4, 6]], (kind, {"FusedActivationFunction": ACTIVATIONS[act]}))
        return g, y
    return fn


for act in ACTIVATIONS:
    case(f"add-{act}")(binary(OP.ADD, "AddOptions", act, rand(6)))
    case(f"sub-{act}")(binary(OP.SUB, "SubOptions", act, rand(6)))
    case(f"mul-{act}")(binary(OP.MUL, "MulOptions", act, rand(6)))
    case(f"div-{act}")(binary(OP.DIV, "DivOptions", act, rand(6, low=0.5, high=2.0)))


def simple(code, shape=(1, 4, 6), operand=None, options=None, out_type=T.FLOAT32):
    def fn():
        g = Graph()
        x = g.input(list(shape))
        inputs = [x] + ([g.const(operand)] if operand is not None else [])
        return g, g.op(code, inputs, [list(shape)], options, out_type)
    return fn


case("maximum")(simple(OP.MAXIMUM, operand=rand(6)))
case("minimum")(simple(OP.MINIMUM, operand=rand(6)))
case("pow", positive=True)(simple(OP.POW, operand=np.float32(1.5)))
case("squared-difference")(simple(OP.SQUARED_DIFFERENCE, operand=rand(6)))
case("sqrt", positive=True)(simple(OP.SQRT))
case("rsqrt", positive=True)(simple(OP.RSQRT))
case("log", positive=True)(simple(OP.LOG))
case("exp")(simple(OP.EXP))
case("sin")(simple(OP.SIN))
case("abs")(simple(OP.ABS))
case("neg")(simple(OP.NEG))
case("square")(simple(OP.SQUARE))
case("logistic")(simple(OP.LOGISTIC))
case("tanh")(simple(OP.TANH))
case("relu")(simple(OP.RELU))
case("relu6")(simple(OP.RELU6, operand=None))
case("relu-n1-to-1")(simple(OP.RELU_N1_TO_1))
case("leaky-relu")(simple(OP.LEAKY_RELU, options=("LeakyReluOptions", {"Alpha": 0.2})))


def reduce(code, axes, keep, out):
    def fn():
        g = Graph()
        x = g.input([1, 4, 6])
        return g, g.op(code, [x, g.const(axes, T.INT32)], [out], ("ReducerOptions", {"KeepDims": keep}))
    return fn


case("mean-keep")(reduce(OP.MEAN, [1], True, [1, 1, 6]))
case("mean")(reduce(OP.MEAN, [1, 2], False, [1]))
case("sum")(reduce(OP.SUM, [2], False, [1, 4]))
case("reduce-max")(reduce(OP.REDUCE_MAX, [2], True, [1, 4, 1]))
case("reduce-min")(reduce(OP.REDUCE_MIN, [-1], False, [1, 4]))


@case("pad")
def _():
    g = Graph()
    x = g.input([1, 4, 6])
    return g, g.op(OP.PAD, [x, g.const([[0, 0], [1, 2], [3, 0]], T.INT32)], [[1, 7, 9]])


@case("padv2")
def _():
    g = Graph()
    x = g.input([1, 4, 6])
    return g, g.op(OP.PADV2, [x, g.const([[0, 0], [1, 0], [0, 2]], T.INT32), g.const([0.5])], [[1, 5, 8]])


@case("reshape")
def _():
    g = Graph()
    x = g.input([1, 4, 6])
    return g, g.op(OP.RESHAPE, [x, g.const([3, -1], T.INT32)], [[3, 8]])


@case("squeeze")
def _():
    g = Graph()
    x = g.input([1, 4, 1, 6])
    return g, g.op(OP.SQUEEZE, [x], [[4, 6]], ("SqueezeOptions", {"SqueezeDims": [0, 2]}))


@case("expand-dims")
def _():
    g = Graph()
    x = g.input([1, 4, 6])
    return g, g.op(OP.EXPAND_DIMS, [x, g.const(-1, T.INT32)], [[1, 4, 6, 1]])


@case("transpose")
def _():
    g = Graph()
    x = g.input([2, 3, 4])
    return g, g.op(OP.TRANSPOSE, [x, g.const([2, 0, 1], T.INT32)], [[4, 2, 3]])


for act in ["none", "relu6"]:
    @case(f"concatenation-{act}")
    def _(act=act):
        g = Graph()
        x = g.input([1, 4, 6])
        return g, g.op(OP.CONCATENATION, [g.const(rand(1, 2, 6) * 5), x], [[1, 6, 6]],
                       ("ConcatenationOptions", {"Axis": -2, "FusedActivationFunction": ACTIVATIONS[act]}))


@case("split")
def _():
    g = Graph()
    x = g.input([1, 4, 6])
    a, b = g.op(OP.SPLIT, [g.const(2, T.INT32), x], [[1, 4, 3], [1, 4, 3]], ("SplitOptions", {"NumSplits": 2}))
    return g, g.op(OP.SUB, [a, b], [[1, 4, 3]])


@case("split-v")
def _():
    g = Graph()
    x = g.input([1, 4, 6])
    a, b = g.op(OP.SPLIT_V, [x, g.const([1, -1], T.INT32), g.const(1, T.INT32)], [[1, 1, 6], [1, 3, 6]], ("SplitVOptions", {"NumSplits": 2}))
    return g, g.op(OP.MUL, [b, a], [[1, 3, 6]])


@case("slice")
def _():
    g = Graph()
    x = g.input([1, 4, 6])
    return g, g.op(OP.SLICE, [x, g.const([0, 1, 2], T.INT32), g.const([-1, 2, 3], T.INT32)], [[1, 2, 3]])


@case("strided-slice")
def _():
    g = Graph()
    x = g.input([1, 4, 6])
    return g, g.op(OP.STRIDED_SLICE, [x, g.const([0, 1, 1], T.INT32), g.const([1, 0, 6], T.INT32), g.const([1, 1, 2], T.INT32)], [[3, 3]],
                   ("StridedSliceOptions", {"BeginMask": 0, "EndMask": 2, "ShrinkAxisMask": 1}))


@case("strided-slice-reversed")
def _():
    g = Graph()
    x = g.input([1, 4, 6])
    return g, g.op(OP.STRIDED_SLICE, [x, g.const([0, 3, -1], T.INT32), g.const([1, 0, 0], T.INT32), g.const([1, -1, -2], T.INT32)], [[1, 4, 3]],
                   ("StridedSliceOptions", {"BeginMask": 0, "EndMask": 6}))


@case("reverse-v2")
def _():
    g = Graph()
    x = g.input([1, 4, 6])
    return g, g.op(OP.REVERSE_V2, [x, g.const([2], T.INT32)], [[1, 4, 6]])


@case("gather-range")
def _():
    # GATHER of the rows RANGE(1, 4, 2) names.
    g = Graph()
    x = g.input([1, 4, 6])
    rows = g.op(OP.RANGE, [g.const(1, T.INT32), g.const(4, T.INT32), g.const(2, T.INT32)], [[2]], out_type=T.INT32)
    return g, g.op(OP.GATHER, [x, rows], [[1, 2, 6]], ("GatherOptions", {"Axis": 1}))


@case("shape-arithmetic")
def _():
    # RESHAPE to [rows * cols // 2, 2] computed from SHAPE by GATHER, REDUCE_PROD, FLOOR_DIV and PACK.
    g = Graph()
    x = g.input([1, 4, 6])
    s = g.op(OP.SHAPE, [x], [[3]], ("ShapeOptions", {"OutType": T.INT32}), out_type=T.INT32)
    dims = g.op(OP.GATHER, [s, g.const([1, 2], T.INT32)], [[2]], ("GatherOptions", {"Axis": 0}), out_type=T.INT32)
    n = g.op(OP.REDUCE_PROD, [dims, g.const([0], T.INT32)], [[]], ("ReducerOptions", {"KeepDims": False}), out_type=T.INT32)
    half = g.op(OP.FLOOR_DIV, [n, g.const(2, T.INT32)], [[]], out_type=T.INT32)
    shape = g.op(OP.PACK, [half, g.const(2, T.INT32)], [[2]], ("PackOptions", {"ValuesCount": 2, "Axis": 0}), out_type=T.INT32)
    return g, g.op(OP.RESHAPE, [x, shape], [[12, 2]])


@case("pack")
def _():
    g = Graph()
    x = g.input([4, 6])
    return g, g.op(OP.PACK, [x, g.const(rand(4, 6))], [[4, 2, 6]], ("PackOptions", {"ValuesCount": 2, "Axis": 1}))


@case("cast")
def _():
    # float to int32 (toward zero) and back.
    g = Graph()
    x = g.input([1, 4, 6])
    i = g.op(OP.CAST, [g.op(OP.MUL, [x, g.const(np.float32(3))], [[1, 4, 6]])], [[1, 4, 6]], out_type=T.INT32)
    return g, g.op(OP.CAST, [i], [[1, 4, 6]])


for name, code in [("greater", OP.GREATER), ("greater-equal", OP.GREATER_EQUAL), ("less", OP.LESS), ("less-equal", OP.LESS_EQUAL)]:
    @case(f"select-v2-{name}")
    def _(code=code):
        g = Graph()
        x = g.input([1, 4, 6])
        c = g.op(code, [x, g.const(np.float32(0.25))], [[1, 4, 6]], out_type=T.BOOL)
        return g, g.op(OP.SELECT_V2, [c, x, g.const(np.float32(-7))], [[1, 4, 6]])


@case("rfft2d-complex-abs")
def _():
    g = Graph()
    x = g.input([1, 3, 1, 16])
    f = g.op(OP.RFFT2D, [x, g.const([1, 16], T.INT32)], [[1, 3, 1, 9]], out_type=T.COMPLEX64)
    return g, g.op(OP.COMPLEX_ABS, [f], [[1, 3, 1, 9]])


@case("rfft2d-cast")
def _():
    # RFFT2D then CAST to float (the real part), as BirdNET's spectrogram does, with a crop to 8.
    g = Graph()
    x = g.input([1, 2, 1, 16])
    f = g.op(OP.RFFT2D, [x, g.const([1, 8], T.INT32)], [[1, 2, 1, 5]], out_type=T.COMPLEX64)
    return g, g.op(OP.CAST, [f], [[1, 2, 1, 5]])


def pool(code, padding, stride, act):
    def fn():
        g = Graph()
        x = g.input([1, 7, 5, 3])
        size = lambda n: (n + stride - 1) // stride if padding == 0 else (n - 3) // stride + 1
        return g, g.op(code, [x], [[1, size(7), size(5), 3]], ("Pool2DOptions", {
            "Padding": padding, "StrideW": stride, "StrideH": stride, "FilterWidth": 3, "FilterHeight": 3, "FusedActivationFunction": ACTIVATIONS[act]}))
    return fn


for act in ACTIVATIONS:
    case(f"average-pool-same-{act}")(pool(OP.AVERAGE_POOL_2D, 0, 2, act))
    case(f"max-pool-valid-{act}")(pool(OP.MAX_POOL_2D, 1, 1, act))


def conv(padding, stride, dilation, act, depthwise=False):
    def fn():
        g = Graph()
        x = g.input([1, 9, 7, 4])
        out_c = 8
        extent = 2 * dilation + 1
        size = lambda n: (n + stride - 1) // stride if padding == 0 else (n - extent) // stride + 1
        if depthwise:
            w = g.const(rand(1, 3, 3, out_c))
            kind, opts = "DepthwiseConv2DOptions", {"DepthMultiplier": 2}
        else:
            w = g.const(rand(out_c, 3, 3, 4))
            kind, opts = "Conv2DOptions", {}
        opts.update({"Padding": padding, "StrideW": stride, "StrideH": stride, "DilationWFactor": dilation, "DilationHFactor": dilation,
                     "FusedActivationFunction": ACTIVATIONS[act]})
        return g, g.op(OP.DEPTHWISE_CONV_2D if depthwise else OP.CONV_2D, [x, w, g.const(rand(out_c))], [[1, size(9), size(7), out_c]], (kind, opts))
    return fn


for act in ACTIVATIONS:
    case(f"conv-2d-same-{act}")(conv(0, 1, 1, act))
    case(f"depthwise-conv-2d-same-{act}")(conv(0, 1, 1, act, depthwise=True))
case("conv-2d-valid-stride-2")(conv(1, 2, 1, "none"))
case("conv-2d-same-stride-2-dilated")(conv(0, 2, 2, "none"))
case("depthwise-conv-2d-valid-dilated")(conv(1, 1, 2, "none", depthwise=True))


def dense(act, keep):
    def fn():
        g = Graph()
        x = g.input([2, 3, 8])
        out = [2, 3, 5] if keep else [6, 5]
        return g, g.op(OP.FULLY_CONNECTED, [x, g.const(rand(5, 8)), g.const(rand(5))], [out],
                       ("FullyConnectedOptions", {"FusedActivationFunction": ACTIVATIONS[act], "KeepNumDims": keep}))
    return fn


for act in ACTIVATIONS:
    case(f"fully-connected-{act}")(dense(act, False))
case("fully-connected-keep-dims")(dense("none", True))


@case("batch-matmul")
def _():
    g = Graph()
    x = g.input([2, 4, 6])
    return g, g.op(OP.BATCH_MATMUL, [x, g.const(rand(2, 5, 6))], [[2, 4, 5]], ("BatchMatMulOptions", {"AdjX": False, "AdjY": True}))


@case("dequantize-float16")
def _():
    g = Graph()
    x = g.input([1, 4, 6])
    w = g.op(OP.DEQUANTIZE, [g.const(rand(6), T.FLOAT16)], [[6]])
    return g, g.op(OP.MUL, [x, w], [[1, 4, 6]], ("MulOptions", {"FusedActivationFunction": 0}))


@case("dequantize-int8")
def _():
    g = Graph()
    x = g.input([1, 4, 6])
    w = g.op(OP.DEQUANTIZE, [g.const(rng.integers(-128, 128, size=6), T.INT8, quant=([0.02], [3]))], [[6]])
    return g, g.op(OP.ADD, [x, w], [[1, 4, 6]], ("AddOptions", {"FusedActivationFunction": 0}))


# L2_NORMALIZATION along the last axis; the second with a row of zeros (the epsilon's floor: 0, not NaN).
case("l2-normalization")(simple(OP.L2_NORMALIZATION, shape=(1, 2, 3, 8), options=("L2NormOptions", {"FusedActivationFunction": 0})))


@case("l2-normalization-zero-row")
def _():
    g = Graph()
    x = g.input([1, 3, 8])
    rows = g.op(OP.MUL, [x, g.const(np.array([[1.0], [0.0], [1.0]], dtype=np.float32))], [[1, 3, 8]], ("MulOptions", {"FusedActivationFunction": 0}))
    return g, g.op(OP.L2_NORMALIZATION, [rows], [[1, 3, 8]], ("L2NormOptions", {"FusedActivationFunction": 0}))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    results, refused = [], []
    for name, (fn, positive) in CASES.items():
        g, output = fn()
        data = build(g, output)
        (OUT / f"{name}.tflite").write_bytes(data)
        interp = litert.Interpreter(model_content=data, num_threads=1)
        try:
            interp.allocate_tensors()
        except RuntimeError as e:
            # TFLite refuses the graph (e.g. a fused TANH on FULLY_CONNECTED): so must Earshot.
            refused.append({"name": name, "file": f"{name}.tflite", "reason": str(e).split("Node number")[0].strip()})
            continue
        detail = interp.get_input_details()[0]
        x = rand(*detail["shape"], low=0.1 if positive else -2.0, high=3.0 if positive else 2.0)
        interp.set_tensor(detail["index"], x)
        interp.invoke()
        y = interp.get_tensor(interp.get_output_details()[0]["index"]).astype(np.float32)
        results.append({"name": name, "file": f"{name}.tflite", "input_shape": list(map(int, x.shape)), "input": x.ravel().tolist(),
                        "output_shape": list(map(int, y.shape)), "output": y.ravel().tolist()})
    meta = {"generator": "tools/make_tflite_op_corpus.py", "reference": "ai-edge-litert Interpreter (default resolver, XNNPACK), one thread",
            "ai_edge_litert": importlib.metadata.version("ai-edge-litert"), "tflite": importlib.metadata.version("tflite"), "seed": SEED}
    (OUT / "ops.json").write_text(json.dumps({"meta": meta, "cases": results, "refused": refused}) + "\n")
    print(f"{len(results)} cases written to {OUT}")


if __name__ == "__main__":
    import importlib.metadata
    main()
