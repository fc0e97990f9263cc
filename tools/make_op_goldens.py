#!/usr/bin/env python3
"""Writes reference data for the EarshotGraph op tests.

Usage (from the repository root; needs `pip install onnx onnxruntime numpy`):
    python tools/make_op_goldens.py

For every case below it builds a one-node ONNX model with onnx.helper, runs it
in onnxruntime (CPUExecutionProvider, one thread, graph optimizations off) and
writes the op, opset, attributes, inputs and outputs to
Tests/EarshotGraphTests/Goldens/ops.json.

Inputs are drawn from a fixed numpy seed. Every tensor is stored as
{"dtype", "shape", "data"}, where "data" is one string of space-separated
values: float32 values in their shortest round-trip form (nan, inf and -inf
as such), int64 values in decimal (int32 inputs too), bools as 0 and 1; so the test parses each
value directly into a Float or an Int64, exactly. An omitted optional input is
null. Attributes are {"int": "3"}, {"float": "0.5"}, {"ints": "1 2"},
{"floats": "0.5 1"}, {"string": "..."}, {"strings": [...]} or
{"tensor": {...}}.
"""

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "Tests" / "EarshotGraphTests" / "Goldens" / "ops.json"
GENERATOR = "tools/make_op_goldens.py"
SEED = 20250611

rng = np.random.default_rng(SEED)
cases = []

ELEMENT_TYPES = {
    np.dtype(np.float32): ("float32", TensorProto.FLOAT),
    np.dtype(np.int64): ("int64", TensorProto.INT64),
    np.dtype(np.bool_): ("bool", TensorProto.BOOL),
    # int32 inputs (sequence_lens) go to onnxruntime as int32 and are stored as int64, the
    # integer type the kernels hold.
    np.dtype(np.int32): ("int64", TensorProto.INT32),
}
INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------

def f32(*shape, scale=1.0, low=None, high=None):
    """Random float32 values: normal with the given scale, or uniform in [low, high)."""
    if low is not None:
        return rng.uniform(low, high, size=shape).astype(np.float32)
    return (rng.standard_normal(size=shape) * scale).astype(np.float32)


def i64(values):
    return np.array(values, dtype=np.int64)


def ints(*shape, low=-5, high=6):
    return rng.integers(low, high, size=shape, dtype=np.int64)


def bools(*shape):
    return rng.integers(0, 2, size=shape).astype(np.bool_)


def scalar(value, dtype=np.float32):
    return np.array(value, dtype=dtype)


def value_text(a):
    a = np.asarray(a)
    if a.dtype == np.float32:
        out = []
        for v in a.ravel():
            text = str(np.float32(v))
            parsed = np.float32(text)
            assert parsed == v or (np.isnan(parsed) and np.isnan(v)), (text, v)
            out.append(text)
        return " ".join(out)
    if a.dtype == np.bool_:
        return " ".join("1" if v else "0" for v in a.ravel())
    return " ".join(str(int(v)) for v in a.ravel())


def tensor_json(a):
    a = np.asarray(a)
    name, _ = ELEMENT_TYPES[a.dtype]
    return {"dtype": name, "shape": list(a.shape), "data": value_text(a)}


def attribute_json(value):
    if isinstance(value, bool):
        raise TypeError("use ints for bool attributes")
    if isinstance(value, int):
        return {"int": str(value)}
    if isinstance(value, float):
        return {"float": value_text(np.array([value], dtype=np.float32))}
    if isinstance(value, str):
        return {"string": value}
    if isinstance(value, np.ndarray):
        return {"tensor": tensor_json(value)}
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return {"strings": value}
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return {"ints": " ".join(str(v) for v in value)}
    if isinstance(value, list) and value and all(isinstance(v, float) for v in value):
        return {"floats": value_text(np.array(value, dtype=np.float32))}
    raise TypeError(f"attribute value {value!r}")


def attribute_proto_value(value):
    if isinstance(value, np.ndarray):
        return numpy_helper.from_array(value)
    return value


# ---------------------------------------------------------------------------
# Running a case in onnxruntime
# ---------------------------------------------------------------------------

def run(op, inputs, attributes, opset, outputs, full_check):
    names = [f"in{i}" if v is not None else "" for i, v in enumerate(inputs)]
    while names and names[-1] == "":
        names.pop()
    output_names = [f"out{i}" for i in range(outputs)]
    node = helper.make_node(op, names, output_names, name="node",
                            **{k: attribute_proto_value(v) for k, v in attributes.items()})
    graph_inputs = [helper.make_tensor_value_info(n, ELEMENT_TYPES[np.asarray(v).dtype][1], list(np.asarray(v).shape))
                    for n, v in zip(names, inputs) if n]
    graph_outputs = [helper.make_empty_tensor_value_info(n) for n in output_names]
    graph = helper.make_graph([node], "case", graph_inputs, graph_outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {n: np.asarray(v) for n, v in zip(names, inputs) if n}
    results = session.run(None, feeds)
    # With the outputs' types and shapes filled in, the model must pass ONNX's full check
    # (attribute names and types for the opset, and shape inference agreeing with onnxruntime).
    for output, result in zip(model.graph.output, results):
        output.CopyFrom(helper.make_tensor_value_info(output.name, ELEMENT_TYPES[result.dtype][1], list(result.shape)))
    onnx.checker.check_model(model, full_check=full_check)
    return results


def case(name, op, inputs, attributes=None, opset=17, outputs=1, tell_outputs=False, full_check=True):
    """One case. `tell_outputs`: the test passes the output count to the kernel (Split).
    `full_check=False`: ONNX's shape inference disagrees with onnxruntime here (onnxruntime is the
    reference), so the model gets the checker's basic check only."""
    attributes = attributes or {}
    record(name, op, inputs, attributes, opset, run(op, inputs, attributes, opset, outputs, full_check), tell_outputs)


def record(name, op, inputs, attributes, opset, results, tell_outputs=False):
    assert all(c["name"] != name for c in cases), name
    entry = {
        "name": name,
        "op": op,
        "opset": opset,
        "attributes": {k: attribute_json(v) for k, v in sorted(attributes.items())},
        "inputs": [None if v is None else tensor_json(v) for v in inputs],
        "outputs": [tensor_json(r) for r in results],
    }
    if tell_outputs:
        entry["outputCount"] = len(results)
    cases.append(entry)


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

def conv_cases():
    case("conv1d-pads-bias", "Conv", [f32(2, 3, 10), f32(4, 3, 3, scale=0.5), f32(4)], {"pads": [1, 1]})
    case("conv1d-stride-dilation", "Conv", [f32(1, 2, 16), f32(3, 2, 3, scale=0.5)], {"strides": [2], "dilations": [2]})
    case("conv1d-depthwise-same-upper", "Conv", [f32(1, 4, 12), f32(4, 1, 5, scale=0.5), f32(4)],
         {"group": 4, "auto_pad": "SAME_UPPER", "strides": [2]})
    case("conv1d-groups-same-lower", "Conv", [f32(2, 4, 9), f32(6, 2, 4, scale=0.5)],
         {"group": 2, "auto_pad": "SAME_LOWER", "kernel_shape": [4]})
    case("conv1d-same-upper-even-kernel", "Conv", [f32(1, 2, 9), f32(2, 2, 4, scale=0.5)], {"auto_pad": "SAME_UPPER"})
    case("conv1d-valid-stride", "Conv", [f32(1, 3, 17), f32(5, 3, 4, scale=0.5), f32(5)], {"auto_pad": "VALID", "strides": [3]})
    case("conv1d-asymmetric-pads", "Conv", [f32(1, 2, 7), f32(3, 2, 3, scale=0.5)], {"pads": [2, 0]})
    case("conv1d-stft-like", "Conv", [f32(1, 1, 64), f32(10, 1, 16, scale=0.3)], {"strides": [8]})
    case("conv1d-same-stride-beyond-kernel", "Conv", [f32(1, 2, 6), f32(3, 2, 1, scale=0.5)], {"auto_pad": "SAME_LOWER",
                                                                                             "strides": [4]})
    case("conv2d-pads-strides-bias", "Conv", [f32(1, 3, 7, 6), f32(5, 3, 3, 2, scale=0.5), f32(5)],
         {"pads": [1, 0, 2, 1], "strides": [2, 1]})
    case("conv2d-depthwise-dilations", "Conv", [f32(2, 3, 8, 8), f32(3, 1, 3, 3, scale=0.5), f32(3)],
         {"group": 3, "dilations": [2, 1], "pads": [2, 1, 2, 1]})
    case("conv2d-same-upper-stride", "Conv", [f32(1, 2, 5, 6), f32(4, 2, 3, 3, scale=0.5)],
         {"auto_pad": "SAME_UPPER", "strides": [2, 2], "kernel_shape": [3, 3]})
    case("conv2d-groups", "Conv", [f32(1, 4, 6, 5), f32(6, 2, 2, 3, scale=0.5), f32(6)], {"group": 2})


def pool_cases():
    case("maxpool1d-pads-stride", "MaxPool", [f32(2, 3, 11)], {"kernel_shape": [3], "strides": [2], "pads": [1, 1]})
    case("maxpool2d-ceil-indices", "MaxPool", [f32(1, 2, 7, 7)], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
         outputs=2)
    case("maxpool2d-dilations-pads-indices", "MaxPool", [f32(1, 2, 6, 7)],
         {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 0]}, outputs=2)
    case("maxpool1d-same-upper", "MaxPool", [f32(1, 2, 10)], {"kernel_shape": [4], "strides": [3], "auto_pad": "SAME_UPPER"})
    # onnxruntime drops a last window that would start in the end padding; ONNX's shape inference keeps it.
    case("maxpool1d-ceil-last-window-dropped", "MaxPool", [f32(1, 1, 5)],
         {"kernel_shape": [2], "strides": [3], "pads": [0, 1], "ceil_mode": 1}, outputs=2, full_check=False)
    case("maxpool2d-storage-order-1", "MaxPool", [f32(1, 1, 4, 5)], {"kernel_shape": [2, 2], "storage_order": 1}, outputs=2)
    # onnxruntime sizes SAME padding of a pooling with the undilated kernel; ONNX's shape inference
    # with the dilated one.
    case("maxpool1d-same-upper-dilation", "MaxPool", [f32(1, 2, 9)], {"kernel_shape": [2], "dilations": [2],
                                                                      "auto_pad": "SAME_UPPER"}, full_check=False)
    case("maxpool2d-same-lower", "MaxPool", [f32(1, 2, 5, 5)], {"kernel_shape": [2, 3], "auto_pad": "SAME_LOWER"})
    case("averagepool1d-exclude-pad", "AveragePool", [f32(2, 2, 9)], {"kernel_shape": [3], "pads": [1, 1]})
    case("averagepool2d-include-pad", "AveragePool", [f32(1, 3, 6, 7)],
         {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1})
    case("averagepool1d-ceil-include-pad", "AveragePool", [f32(1, 2, 6)],
         {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "ceil_mode": 1, "count_include_pad": 1})
    case("averagepool2d-ceil-exclude-pad", "AveragePool", [f32(1, 1, 7, 6)],
         {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1})
    case("averagepool1d-dilations-opset19", "AveragePool", [f32(1, 2, 8)],
         {"kernel_shape": [2], "dilations": [2], "pads": [1, 1], "count_include_pad": 1}, opset=19)
    case("averagepool2d-same-upper", "AveragePool", [f32(1, 2, 5, 5)], {"kernel_shape": [3, 3], "strides": [2, 2],
                                                                        "auto_pad": "SAME_UPPER"})


def matrix_cases():
    case("gemm-defaults-bias-row", "Gemm", [f32(3, 4), f32(4, 5), f32(5)])
    case("gemm-transposed-alpha-beta-column", "Gemm", [f32(4, 3), f32(5, 4), f32(3, 1)],
         {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0})
    case("gemm-no-c", "Gemm", [f32(2, 6), f32(6, 3)], {"alpha": 1.5})
    case("gemm-scalar-c", "Gemm", [f32(3, 2), f32(4, 2), scalar(0.25)], {"transB": 1})
    case("gemm-full-c", "Gemm", [f32(3, 5), f32(5, 2), f32(3, 2)], {"beta": 0.5})
    case("matmul-2d", "MatMul", [f32(3, 4), f32(4, 5)])
    case("matmul-batch-broadcast", "MatMul", [f32(2, 1, 3, 4), f32(3, 4, 5)])
    case("matmul-vector-matrix", "MatMul", [f32(4), f32(2, 4, 3)])
    case("matmul-matrix-vector", "MatMul", [f32(2, 3, 4), f32(4)])
    case("matmul-vector-vector", "MatMul", [f32(5), f32(5)])
    case("matmul-3d-2d", "MatMul", [f32(2, 3, 4), f32(4, 2)])


def elementwise_cases():
    for op in ["Add", "Sub", "Mul", "Div"]:
        lo = op.lower()
        if op == "Div":
            case(f"{lo}-float-broadcast", op, [f32(2, 3, 4), f32(3, 1, low=0.5, high=2.0)])
            case(f"{lo}-int64-truncates", op, [i64([7, -7, 7, -7, 0, 9]), i64([2, 2, -2, -2, 3, 4])])
        else:
            case(f"{lo}-float-broadcast", op, [f32(2, 3, 4), f32(3, 1)])
            case(f"{lo}-int64-broadcast", op, [ints(2, 3), ints(3)])
        case(f"{lo}-float-scalar", op, [f32(4, 2), scalar(1.5)])
        case(f"{lo}-float-both-broadcast", op, [f32(4, 1, 3), f32(2, 1)], opset=14)
    case("max-variadic-broadcast", "Max", [f32(2, 3), f32(3), f32(2, 1)])
    case("max-single", "Max", [f32(4)])
    case("max-int64", "Max", [ints(2, 3), ints(1, 3)])
    case("min-two-broadcast", "Min", [f32(3, 1, 2), f32(4, 2)])
    case("min-int64-variadic", "Min", [ints(3), ints(2, 3), ints(2, 1)])
    case("pow-float", "Pow", [f32(2, 3, low=0.1, high=3.0), f32(3, low=-2.0, high=2.0)])
    case("pow-float-int-exponent", "Pow", [f32(2, 3), i64([2, 3, -1])])
    case("pow-int64", "Pow", [i64([2, 3, -2, 0, 5, 1]), i64([3, 0, 3, 2, -1, -4])])
    case("pow-int64-float-exponent", "Pow", [i64([2, 3, 7, 10]), np.array([0.5, 1.5, 0.9, 2.0], dtype=np.float32)])
    case("pow-negative-base-integer-exponent", "Pow", [f32(5), np.array([2.0, 3.0, 2.0, 1.0, 0.0], dtype=np.float32)])
    for op in ["Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"]:
        lo = op.lower()
        a = np.round(f32(2, 3, 4) * 2) / 2
        b = np.round(f32(3, 1) * 2) / 2
        case(f"{lo}-float-broadcast", op, [a.astype(np.float32), b.astype(np.float32)])
        case(f"{lo}-int64", op, [ints(4, low=-2, high=3), ints(2, 4, low=-2, high=3)])
    case("equal-bool", "Equal", [bools(2, 3), bools(3)])
    case("not", "Not", [bools(2, 5)])
    case("and-broadcast", "And", [bools(2, 3), bools(3)])
    case("or-broadcast", "Or", [bools(3, 1), bools(1, 4)])
    case("and-same-shape", "And", [bools(6), bools(6)])
    case("where-float-broadcast", "Where", [bools(2, 1, 4), f32(3, 4), f32(2, 1, 1)])
    case("where-int64", "Where", [bools(5), ints(5), ints(1)])
    case("where-scalar-condition", "Where", [np.array(True), f32(2, 2), f32(2, 2)])


def unary_cases():
    positive = f32(3, 4, low=0.05, high=4.0)
    case("sqrt", "Sqrt", [positive])
    case("relu-float", "Relu", [f32(3, 5)])
    case("leakyrelu-default-alpha", "LeakyRelu", [f32(2, 6)])
    case("leakyrelu-alpha", "LeakyRelu", [f32(2, 6)], {"alpha": 0.2})
    case("sigmoid", "Sigmoid", [f32(4, 5, scale=4.0)])
    case("sigmoid-extremes", "Sigmoid", [np.array([-100, -20, -5, 0, 5, 20, 100], dtype=np.float32)])
    case("tanh", "Tanh", [f32(4, 5, scale=2.0)])
    case("tanh-extremes", "Tanh", [np.array([-30, -9, -0.001, 0, 0.001, 9, 30], dtype=np.float32)])
    case("log", "Log", [positive])
    case("exp", "Exp", [f32(3, 4, scale=2.0)])
    case("neg-float", "Neg", [f32(5)])
    case("neg-int64", "Neg", [ints(5)])
    case("abs-float", "Abs", [f32(5)])
    case("abs-int64", "Abs", [ints(5)])
    case("erf", "Erf", [f32(3, 5, scale=1.5)])
    case("softplus", "Softplus", [f32(3, 5, scale=3.0)])
    case("softplus-extremes", "Softplus", [np.array([-100, -30, -1, 0, 1, 30, 80], dtype=np.float32)])
    case("clip-min-max", "Clip", [f32(3, 4), scalar(-0.5), scalar(0.7)])
    case("clip-min-only", "Clip", [f32(3, 4), scalar(-0.2)])
    case("clip-max-only", "Clip", [f32(3, 4), None, scalar(0.1)])
    case("clip-none", "Clip", [f32(5)])
    case("clip-int64", "Clip", [ints(8), scalar(-2, np.int64), scalar(3, np.int64)])


def reduction_cases():
    case("softmax-default-axis", "Softmax", [f32(2, 3, 5)], opset=13)
    case("softmax-axis-1", "Softmax", [f32(2, 4, 3, scale=3.0)], {"axis": 1})
    case("softmax-axis-negative-2", "Softmax", [f32(3, 4, 2)], {"axis": -2})
    case("softmax-axis-0-2d", "Softmax", [f32(4, 3)], {"axis": 0})
    for op in ["ReduceMean", "ReduceMax", "ReduceMin"]:
        lo = op.lower()
        case(f"{lo}-opset13-axes-attribute", op, [f32(2, 3, 4)], {"axes": [1]}, opset=13)
        case(f"{lo}-opset17-negative-axes-no-keepdims", op, [f32(2, 3, 4)], {"axes": [-1, 0], "keepdims": 0}, opset=17)
        case(f"{lo}-opset17-all-axes", op, [f32(3, 4)], opset=17)
        case(f"{lo}-opset18-axes-input", op, [f32(2, 3, 4), i64([-2])], opset=18)
        case(f"{lo}-opset18-no-axes", op, [f32(2, 3)], {"keepdims": 0}, opset=18)
        case(f"{lo}-opset18-noop-empty-axes", op, [f32(2, 3)], {"noop_with_empty_axes": 1}, opset=18)
        case(f"{lo}-opset18-empty-axes-input", op, [f32(2, 3), np.zeros(0, dtype=np.int64)], opset=18)
    case("reducesum-opset13-axes-input", "ReduceSum", [f32(2, 3, 4), i64([0, 2])], opset=13)
    case("reducesum-no-axes-keepdims", "ReduceSum", [f32(3, 4)], opset=13)
    case("reducesum-negative-axis-no-keepdims", "ReduceSum", [f32(2, 3, 4), i64([-1])], {"keepdims": 0}, opset=13)
    case("reducesum-noop-empty-axes", "ReduceSum", [f32(2, 3)], {"noop_with_empty_axes": 1}, opset=13)
    case("reducesum-long-axis", "ReduceSum", [f32(4, 300)], {"keepdims": 0}, opset=18)
    case("reducesum-int64", "ReduceSum", [ints(3, 4), i64([1])], opset=13)
    case("reducemax-int64", "ReduceMax", [ints(3, 4)], {"axes": [0]}, opset=13)
    case("reducemin-int64", "ReduceMin", [ints(3, 4), i64([1])], {"keepdims": 0}, opset=18)
    case("reducemean-int64", "ReduceMean", [i64([[1, 2], [3, 6]])], {"axes": [1]}, opset=13)
    case("reducemax-empty-axis", "ReduceMax", [np.zeros((2, 0), dtype=np.float32), i64([1])], opset=18)
    case("layernorm-last-axis-bias", "LayerNormalization", [f32(2, 3, 8), f32(8), f32(8)], outputs=3)
    case("layernorm-axis-1-no-bias", "LayerNormalization", [f32(2, 3, 4, scale=3.0), f32(3, 4)], {"axis": 1})
    case("layernorm-epsilon-negative-axis", "LayerNormalization", [f32(4, 6), f32(6), f32(6)], {"axis": -1, "epsilon": 0.1})
    case("layernorm-scale-broadcast", "LayerNormalization", [f32(2, 3, 4), f32(1, 4), f32(4)], {"axis": -2}, opset=18)
    var = f32(3, low=0.2, high=2.0)
    case("batchnorm-4d", "BatchNormalization", [f32(2, 3, 4, 5), f32(3), f32(3), f32(3), var], opset=15)
    case("batchnorm-3d-epsilon", "BatchNormalization", [f32(2, 4, 6), f32(4), f32(4), f32(4), f32(4, low=0.1, high=1.0)],
         {"epsilon": 0.01}, opset=14)
    case("batchnorm-2d-opset13", "BatchNormalization", [f32(5, 3), f32(3), f32(3), f32(3), var], opset=13)


def shape_cases():
    case("transpose-default", "Transpose", [f32(2, 3, 4)])
    case("transpose-perm", "Transpose", [f32(2, 3, 4)], {"perm": [0, 2, 1]})
    case("transpose-4d-int64", "Transpose", [ints(2, 1, 3, 2)], {"perm": [3, 0, 2, 1]})
    case("reshape-zero-copies-minus-one", "Reshape", [f32(2, 3, 4), i64([0, -1])])
    case("reshape-int64", "Reshape", [ints(6), i64([3, 2])])
    case("reshape-allowzero", "Reshape", [np.zeros((0, 3), dtype=np.float32), i64([3, 0])], {"allowzero": 1}, opset=14)
    case("reshape-to-scalar", "Reshape", [f32(1, 1), np.zeros(0, dtype=np.int64)])
    case("reshape-minus-one-first", "Reshape", [f32(4, 6), i64([-1, 2, 3])])
    case("flatten-default", "Flatten", [f32(2, 3, 4)])
    case("flatten-axis-0", "Flatten", [f32(2, 3)], {"axis": 0})
    case("flatten-negative-axis", "Flatten", [f32(2, 3, 4, 2)], {"axis": -1})
    case("flatten-axis-rank", "Flatten", [f32(2, 3)], {"axis": 2})
    case("squeeze-axes-input", "Squeeze", [f32(1, 3, 1, 2), i64([0, -2])])
    case("squeeze-all", "Squeeze", [f32(1, 3, 1, 2)])
    case("squeeze-int64-one-axis", "Squeeze", [ints(2, 1), i64([1])])
    case("unsqueeze-front-back", "Unsqueeze", [f32(2, 3), i64([0, -1])])
    case("unsqueeze-scalar", "Unsqueeze", [scalar(2.5), i64([0])])
    case("unsqueeze-middle-unsorted", "Unsqueeze", [f32(2, 3), i64([3, 1])])
    case("concat-axis-1", "Concat", [f32(2, 1, 3), f32(2, 4, 3)], {"axis": 1})
    case("concat-negative-axis-three", "Concat", [f32(2, 2), f32(2, 3), f32(2, 1)], {"axis": -1})
    case("concat-int64-empty-part", "Concat", [ints(2, 3), np.zeros((0, 3), dtype=np.int64), ints(1, 3)], {"axis": 0})
    case("concat-bool", "Concat", [bools(3), bools(2)], {"axis": 0})
    x = f32(4, 6)
    case("slice-basic", "Slice", [x, i64([1, 2]), i64([3, 5])])
    case("slice-axes-steps", "Slice", [f32(3, 8), i64([1]), i64([7]), i64([1]), i64([2])])
    case("slice-negative-step", "Slice", [f32(3, 8), i64([-1]), i64([-9]), i64([1]), i64([-2])])
    case("slice-int64-max-sentinel", "Slice", [f32(3, 5), i64([2]), i64([INT64_MAX]), i64([-1])])
    case("slice-reverse-all-int64-min", "Slice", [ints(6), i64([-1]), i64([INT64_MIN]), i64([0]), i64([-1])])
    case("slice-clamping", "Slice", [f32(4, 5), i64([-100, 2]), i64([100, 1000]), i64([0, 1])])
    case("slice-empty-result", "Slice", [f32(4, 5), i64([3]), i64([1]), i64([0])])
    case("slice-3d-negative-axes", "Slice", [f32(2, 4, 6), i64([1, 5]), i64([3, 0]), i64([-2, -1]), i64([1, -2])])
    case("split-input", "Split", [f32(2, 7), i64([2, 5])], {"axis": 1}, outputs=2, tell_outputs=True)
    case("split-equal-outputs-opset13", "Split", [f32(6, 2)], opset=13, outputs=3, tell_outputs=True)
    case("split-num-outputs-uneven-opset18", "Split", [f32(2, 5)], {"axis": -1, "num_outputs": 3}, opset=18, outputs=3,
         tell_outputs=True)
    case("split-int64-negative-axis", "Split", [ints(3, 4), i64([1, 1, 2])], {"axis": -1}, outputs=3, tell_outputs=True)
    case("gather-axis0-negative-indices", "Gather", [f32(5, 3), i64([0, -1, 2, -5])])
    case("gather-axis1-2d-indices", "Gather", [f32(2, 4, 3), i64([[0, 3], [1, 1]])], {"axis": 1})
    case("gather-scalar-index", "Gather", [f32(4, 3), scalar(2, np.int64)])
    case("gather-int64-negative-axis", "Gather", [ints(3, 5), i64([4, 0])], {"axis": -1})
    case("pad-constant-value", "Pad", [f32(2, 3), i64([1, 0, 0, 2]), scalar(1.5)])
    case("pad-constant-default", "Pad", [f32(1, 2, 3), i64([0, 1, 1, 0, 0, 2])], opset=13)
    case("pad-reflect", "Pad", [f32(3, 4), i64([2, 1, 0, 3])], {"mode": "reflect"})
    case("pad-edge", "Pad", [f32(2, 3), i64([1, 2, 2, 1])], {"mode": "edge"})
    case("pad-axes-input-opset18", "Pad", [f32(2, 3, 4), i64([1, 2, 0, 1]), scalar(-1.0), i64([0, -1])], opset=18)
    case("pad-negative-pads", "Pad", [f32(4, 5), i64([-1, 2, 1, -2])])
    case("pad-reflect-after-crop", "Pad", [np.arange(6, dtype=np.float32), i64([-1, 3])], {"mode": "reflect"})
    case("pad-wrap-opset19", "Pad", [f32(2, 3), i64([1, 2, 1, 1])], {"mode": "wrap"}, opset=19)
    case("pad-int64-constant", "Pad", [ints(2, 2), i64([0, 1, 1, 0]), scalar(7, np.int64)])
    case("expand-bidirectional", "Expand", [f32(3, 1), i64([2, 1, 4])])
    case("expand-smaller-shape", "Expand", [f32(2, 3), i64([3])])
    case("expand-int64", "Expand", [ints(1, 2), i64([3, 2])])
    case("tile-float", "Tile", [f32(2, 3), i64([2, 2])])
    case("tile-int64-3d", "Tile", [ints(1, 2, 2), i64([3, 1, 2])])
    case("tile-zero-repeat", "Tile", [f32(2, 2), i64([0, 3])])


def generator_cases():
    special = np.array([-2.7, -0.5, 0.0, 0.5, 2.7, 1e10, -1e10, 123456.78], dtype=np.float32)
    case("cast-float-to-int64", "Cast", [special], {"to": TensorProto.INT64})
    case("cast-float-to-bool", "Cast", [np.array([0.0, -0.0, 0.1, -3.0, 1.0], dtype=np.float32)], {"to": TensorProto.BOOL})
    case("cast-int64-to-float", "Cast", [i64([-3, 0, 7, 16777217])], {"to": TensorProto.FLOAT})
    case("cast-bool-to-float", "Cast", [bools(2, 3)], {"to": TensorProto.FLOAT})
    case("cast-bool-to-int64", "Cast", [bools(4)], {"to": TensorProto.INT64})
    case("cast-int64-to-bool", "Cast", [i64([0, 5, -1, 0])], {"to": TensorProto.BOOL})
    case("cast-float-to-float", "Cast", [f32(3)], {"to": TensorProto.FLOAT})
    case("cast-nonfinite-to-int64", "Cast", [np.array([np.nan, np.inf, -np.inf, 1e20], dtype=np.float32)],
         {"to": TensorProto.INT64})
    case("identity-float", "Identity", [f32(2, 3)])
    case("identity-int64", "Identity", [ints(4)])
    case("shape-default", "Shape", [f32(2, 3, 4)])
    case("shape-start-end-opset15", "Shape", [f32(2, 3, 4, 5)], {"start": 1, "end": -1}, opset=15)
    case("shape-start-negative-opset15", "Shape", [f32(2, 3, 4)], {"start": -2}, opset=15)
    case("shape-clamped-opset15", "Shape", [f32(2, 3)], {"start": -10, "end": 10}, opset=15)
    case("size", "Size", [f32(2, 3, 4)])
    case("size-int64-scalar", "Size", [scalar(3, np.int64)])
    case("constantofshape-default", "ConstantOfShape", [i64([2, 3])])
    case("constantofshape-int64", "ConstantOfShape", [i64([4])], {"value": np.array([7], dtype=np.int64)})
    case("constantofshape-float", "ConstantOfShape", [i64([1, 2, 2])], {"value": np.array([0.25], dtype=np.float32)})
    case("constantofshape-scalar", "ConstantOfShape", [np.zeros(0, dtype=np.int64)], {"value": np.array([1.5], dtype=np.float32)})
    case("range-float-accumulates", "Range", [scalar(0.1), scalar(5.0), scalar(0.3)])
    case("range-int64", "Range", [scalar(2, np.int64), scalar(11, np.int64), scalar(3, np.int64)])
    case("range-negative-delta", "Range", [scalar(5.0), scalar(-1.0), scalar(-1.5)])
    case("range-empty", "Range", [scalar(3, np.int64), scalar(1, np.int64), scalar(1, np.int64)])


def recurrent_cases():
    seq, batch, inputs, hidden = 3, 2, 3, 4

    def rnn_case(name, op, inputs, attributes=None, outputs=1):
        # onnxruntime needs hidden_size (ONNX lets it follow from R).
        attributes = dict(attributes or {})
        attributes.setdefault("hidden_size", hidden)
        if attributes.get("layout", 0) == 0:
            case(name, op, inputs, attributes, outputs=outputs)
            return
        # onnxruntime lacks layout 1 (batch first). By its definition it is layout 0 with X,
        # initial_h, initial_c, Y, Y_h and Y_c transposed, so the reference runs layout 0 on
        # transposed inputs and transposes the outputs back.
        swapped = [v if v is None else np.swapaxes(v, 0, 1) for v in inputs]
        for i in (1, 2, 3, 4, 7):
            if i < len(inputs):
                swapped[i] = inputs[i]
        plain = {k: v for k, v in attributes.items() if k != "layout"}
        results = run(op, swapped, plain, 17, outputs, True)
        back = [np.transpose(results[0], (2, 0, 1, 3))] + [np.swapaxes(r, 0, 1) for r in results[1:]]
        record(name, op, inputs, attributes, 17, back)

    def lstm_weights(dirs):
        return (f32(dirs, 4 * hidden, inputs, scale=0.5), f32(dirs, 4 * hidden, hidden, scale=0.5),
                f32(dirs, 8 * hidden, scale=0.3))

    def states(dirs, layout=0):
        shape = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
        return f32(*shape, scale=0.5), f32(*shape, scale=0.5)

    x = f32(seq, batch, inputs)
    w, r, b = lstm_weights(1)
    h0, c0 = states(1)
    rnn_case("lstm-forward-bias-initial", "LSTM", [x, w, r, b, None, h0, c0], {"hidden_size": hidden}, outputs=3)
    w, r, _ = lstm_weights(1)
    rnn_case("lstm-forward-no-bias-no-initial", "LSTM", [f32(seq, batch, inputs), w, r], outputs=3)
    w, r, b = lstm_weights(1)
    h0, c0 = states(1)
    rnn_case("lstm-reverse", "LSTM", [f32(seq, batch, inputs), w, r, b, None, h0, c0], {"direction": "reverse"}, outputs=3)
    w, r, b = lstm_weights(2)
    h0, c0 = states(2)
    rnn_case("lstm-bidirectional", "LSTM", [f32(seq, batch, inputs), w, r, b, None, h0, c0],
         {"direction": "bidirectional", "hidden_size": hidden}, outputs=3)
    w, r, b = lstm_weights(1)
    h0, c0 = states(1)
    rnn_case("lstm-peepholes-sequence-lens", "LSTM",
         [f32(seq, batch, inputs), w, r, b, np.array([seq] * batch, dtype=np.int32), h0, c0, f32(1, 3 * hidden, scale=0.5)], outputs=3)
    w, r, b = lstm_weights(1)
    rnn_case("lstm-clip", "LSTM", [f32(seq, batch, inputs, scale=3.0), w * 3, r, b], {"clip": 1.5}, outputs=3)
    w, r, b = lstm_weights(1)
    h0, c0 = states(1, layout=1)
    rnn_case("lstm-layout-1", "LSTM", [f32(batch, seq, inputs), w, r, b, None, h0, c0], {"layout": 1}, outputs=3)
    w, r, b = lstm_weights(1)
    rnn_case("lstm-y-only", "LSTM", [f32(seq, batch, inputs), w, r, b], outputs=1)

    def gru_weights(dirs):
        return (f32(dirs, 3 * hidden, inputs, scale=0.5), f32(dirs, 3 * hidden, hidden, scale=0.5),
                f32(dirs, 6 * hidden, scale=0.3))

    for lbr in [0, 1]:
        w, r, b = gru_weights(1)
        h0, _ = states(1)
        rnn_case(f"gru-lbr{lbr}-bias-initial", "GRU", [f32(seq, batch, inputs), w, r, b, None, h0],
             {"linear_before_reset": lbr, "hidden_size": hidden}, outputs=2)
        w, r, _ = gru_weights(1)
        rnn_case(f"gru-lbr{lbr}-no-bias", "GRU", [f32(seq, batch, inputs), w, r], {"linear_before_reset": lbr}, outputs=2)
        w, r, b = gru_weights(2)
        h0, _ = states(2)
        rnn_case(f"gru-lbr{lbr}-bidirectional", "GRU", [f32(seq, batch, inputs), w, r, b, None, h0],
             {"linear_before_reset": lbr, "direction": "bidirectional"}, outputs=2)
    w, r, b = gru_weights(1)
    rnn_case("gru-reverse", "GRU", [f32(seq, batch, inputs), w, r, b], {"direction": "reverse"}, outputs=2)
    w, r, b = gru_weights(1)
    h0, _ = states(1, layout=1)
    rnn_case("gru-layout-1-lbr1", "GRU", [f32(batch, seq, inputs), w, r, b, None, h0], {"layout": 1, "linear_before_reset": 1},
         outputs=2)
    w, r, b = gru_weights(1)
    rnn_case("gru-clip", "GRU", [f32(seq, batch, inputs, scale=3.0), w * 3, r, b], {"clip": 1.0}, outputs=2)


def spectral_cases():
    """Ops added later: appended after the others so that their random inputs stay as they were."""
    case("sin", "Sin", [f32(3, 5, scale=3.0)])
    case("sin-large", "Sin", [np.array([-1000.5, -7.0, 0, 3.14159, 100.25], dtype=np.float32)])


def main():
    conv_cases()
    pool_cases()
    matrix_cases()
    elementwise_cases()
    unary_cases()
    reduction_cases()
    shape_cases()
    generator_cases()
    recurrent_cases()
    spectral_cases()
    document = {
        "generator": GENERATOR,
        "seed": SEED,
        "onnx": onnx.__version__,
        "onnxruntime": ort.__version__,
        "numpy": np.__version__,
        "cases": cases,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(document, indent=1)
    OUT.write_text(text + "\n")
    ops = sorted({c["op"] for c in cases})
    print(f"{OUT.relative_to(ROOT)}: {len(cases)} cases of {len(ops)} ops, {len(text) // 1024} KiB", file=sys.stderr)


if __name__ == "__main__":
    main()
