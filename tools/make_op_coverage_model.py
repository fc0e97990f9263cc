#!/usr/bin/env python3
"""A streaming ONNX model that uses every op the graph runtime takes, with random weights, and
onnxruntime's outputs for it over a run of steps: the op-coverage test of `earshot import`.

The model reads one block of audio ([1, 320]: 64 samples of context and a 256-sample chunk) and
two state tensors (an LSTM's [2, 1, 16] and a GRU's [1, 1, 16]), and gives 3 scores. Its ops:
Conv (1-D; 2-D; grouped and depthwise; stride, dilation, pads), MaxPool and AveragePool (1-D and
2-D), GlobalAveragePool and GlobalMaxPool (imported as ReduceMean and ReduceMax), Gemm, MatMul,
Add Sub Mul Div Max Min Pow Sqrt (with broadcasting), Relu LeakyRelu Sigmoid Tanh Clip Softmax Log
Exp, ReduceMean ReduceMax ReduceSum, LayerNormalization and the decomposed form
(ReduceMean/Sub/Pow/Sqrt/Div), BatchNormalization, Transpose Reshape Flatten Squeeze Unsqueeze
Concat Slice Split Gather Pad Cast, LSTM and GRU.

Writes Tests/EarshotTests/Goldens/op-coverage/{model.onnx, golden.json}: the audio of every step,
onnxruntime's scores after every step (the states carried from step to step, zeros at the start).

Usage: tools/.venv/bin/python tools/make_op_coverage_model.py   (needs onnx, onnxruntime, numpy)
"""
import json
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "Tests", "EarshotTests", "Goldens", "op-coverage")
rng = np.random.default_rng(7)
CONTEXT, CHUNK, H = 64, 256, 16

nodes, inits = [], []


def w(name, *shape, scale=0.3):
    inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
    return name


def ints(name, values):
    inits.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
    return name


def node(op, inputs, outputs=None, **attrs):
    outputs = outputs or [f"{op.lower()}_{len(nodes)}"]
    nodes.append(helper.make_node(op, inputs, outputs, name=f"n{len(nodes)}_{op}", **attrs))
    return outputs[0] if len(outputs) == 1 else outputs


def const(name, value, dtype=np.float32):
    inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
    return name


# Audio [1, 320] -> [1, 1, 320], a strided conv "spectrum" -> [1, 8, 39], log power
x = node("Unsqueeze", ["audio", ints("ax1", [1])])
x = node("Pad", [x, ints("pads1", [0, 0, 2, 0, 0, 2])], mode="reflect")
x = node("Conv", [x, w("c1w", 8, 1, 16), w("c1b", 8)], strides=[8], pads=[0, 0])
x = node("Mul", [x, x])
x = node("Sqrt", [node("Add", [x, const("tiny", [0.01])])])
x = node("Log", [node("Add", [x, const("one", [1.0])])])
# grouped and depthwise 1-D convs, dilation, pooling
x = node("Conv", [x, w("c2w", 8, 2, 3), w("c2b", 8)], group=4, pads=[1, 1], dilations=[1])
x = node("LeakyRelu", [x], alpha=0.1)
x = node("Conv", [x, w("c3w", 8, 1, 3)], group=8, pads=[2, 2], dilations=[2])
x = node("MaxPool", [x], kernel_shape=[2], strides=[2])                      # [1, 8, 19]
x = node("AveragePool", [x], kernel_shape=[3], strides=[1], pads=[1, 1], count_include_pad=0)
x = node("BatchNormalization", [x, w("bns", 8), w("bnb", 8), w("bnm", 8),
                                const("bnv", np.abs(rng.standard_normal(8)) + 0.5)], epsilon=1e-5)
# a 2-D branch: [1, 8, 19] -> [1, 1, 8, 19]
y = node("Unsqueeze", [x, ints("ax1b", [1])])
y = node("Conv", [y, w("c4w", 4, 1, 3, 3), w("c4b", 4)], pads=[1, 1, 1, 1])  # [1, 4, 8, 19]
y = node("Relu", [y])
y = node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])                # [1, 4, 4, 9]
y = node("AveragePool", [y], kernel_shape=[2, 3], strides=[1, 1])            # [1, 4, 3, 7]
gap = node("Flatten", [node("GlobalAveragePool", [y])], axis=1)              # [1, 4]
gmp = node("Flatten", [node("GlobalMaxPool", [y])], axis=1)                  # [1, 4]
y = node("Flatten", [y], axis=1)                                             # [1, 84]
# the 1-D path: transpose and reduce over time
t = node("Transpose", [x], perm=[0, 2, 1])                                   # [1, 19, 8]
mean = node("ReduceMean", [t], axes=[1], keepdims=0)                         # [1, 8]
mx = node("ReduceMax", [t], axes=[1], keepdims=0)
sm = node("ReduceSum", [t, ints("ax_sum", [1])], keepdims=0)
feat = node("Concat", [mean, mx, node("Mul", [sm, const("scale", [0.05])]), y, gap, gmp], axis=1)  # [1, 116]
feat = node("Gemm", [feat, w("g1w", 32, 116, scale=0.1), w("g1b", 32)], transB=1)
# the decomposed layer norm
mu = node("ReduceMean", [feat], axes=[-1], keepdims=1)
d = node("Sub", [feat, mu])
var = node("ReduceMean", [node("Pow", [d, const("two", 2.0)])], axes=[-1], keepdims=1)
feat = node("Div", [d, node("Sqrt", [node("Add", [var, const("lneps", 1e-5)])])])
feat = node("Tanh", [feat])
# LSTM over a sequence of 2: [1, 32] -> [2, 1, 16]
seq = node("Reshape", [feat, ints("shape_seq", [2, 1, 16])])
h0 = node("Gather", ["lstm_state", const("idx0", 0, np.int64)], axis=0)      # [1, 16]
c0 = node("Gather", ["lstm_state", const("idx1", 1, np.int64)], axis=0)
h0 = node("Unsqueeze", [h0, ints("ax0", [0])])                               # [1, 1, 16]
c0 = node("Unsqueeze", [c0, ints("ax0b", [0])])
y_l, yh, yc = node("LSTM", [seq, w("lw", 1, 4 * H, 16), w("lr", 1, 4 * H, H), w("lb", 1, 8 * H), "", h0, c0],
                   outputs=["lstm_y", "lstm_h", "lstm_c"], hidden_size=H)
node("Concat", [yh, yc], outputs=["lstm_state_next"], axis=0)                # [2, 1, 16]
# GRU on the LSTM's output sequence: [2, 1, 1, 16] -> [2, 1, 16]
gin = node("Squeeze", [y_l, ints("ax_sq", [1])])
y_g, gh = node("GRU", [gin, w("gw", 1, 3 * H, H), w("gr", 1, 3 * H, H), w("gb", 1, 6 * H), "", "gru_state"],
               outputs=["gru_y", "gru_state_next"], hidden_size=H, linear_before_reset=1)
# the head: Slice, Split, MatMul, Max/Min, Clip, LayerNormalization, Exp, Sigmoid, Softmax, Cast
last = node("Slice", [y_g, ints("s_start", [1]), ints("s_end", [2]), ints("s_axes", [0])])  # [1, 1, 1, 16]
last = node("Reshape", [last, ints("shape_16", [1, 16])])
a, b = node("Split", [last, ints("split", [8, 8])], outputs=["half_a", "half_b"], axis=1)
m = node("MatMul", [node("Max", [a, b]), w("mm", 8, 8)])
m = node("Sub", [m, node("Min", [a, b])])
m = node("Clip", [m, const("lo", -2.0), const("hi", 2.0)])
m = node("LayerNormalization", [m, w("lns", 8), w("lnb", 8)], axis=-1, epsilon=1e-5)
m = node("Exp", [node("Mul", [m, const("half", 0.5)])])
logits = node("Gemm", [m, w("hw", 8, 3), w("hb", 3)])
probs = node("Softmax", [node("Sigmoid", [logits])], axis=-1)
probs = node("Cast", [probs], to=TensorProto.FLOAT)
node("Identity", [probs], outputs=["scores"])

graph = helper.make_graph(
    nodes, "op_coverage",
    [helper.make_tensor_value_info("audio", TensorProto.FLOAT, [1, CONTEXT + CHUNK]),
     helper.make_tensor_value_info("lstm_state", TensorProto.FLOAT, [2, 1, H]),
     helper.make_tensor_value_info("gru_state", TensorProto.FLOAT, [1, 1, H])],
    [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 3]),
     helper.make_tensor_value_info("lstm_state_next", TensorProto.FLOAT, [2, 1, H]),
     helper.make_tensor_value_info("gru_state_next", TensorProto.FLOAT, [1, 1, H])],
    inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="earshot tools/make_op_coverage_model.py")
model.ir_version = 8
onnx.checker.check_model(model)
os.makedirs(OUT, exist_ok=True)
onnx.save(model, os.path.join(OUT, "model.onnx"))

options = ort.SessionOptions()
options.intra_op_num_threads = 1
session = ort.InferenceSession(os.path.join(OUT, "model.onnx"), options, providers=["CPUExecutionProvider"])
steps = 40
chunks = (rng.standard_normal((steps, CHUNK)) * 0.3).astype(np.float32)
context = np.zeros(CONTEXT, dtype=np.float32)
lstm = np.zeros((2, 1, H), dtype=np.float32)
gru = np.zeros((1, 1, H), dtype=np.float32)
scores = []
for chunk in chunks:
    block = np.concatenate([context, chunk])[None, :]
    s, lstm, gru = session.run(None, {"audio": block, "lstm_state": lstm, "gru_state": gru})
    scores.append([float(v) for v in s[0]])
    context = block[0, -CONTEXT:]
used = sorted({n.op_type for n in nodes})
with open(os.path.join(OUT, "golden.json"), "w") as f:
    json.dump({"generator": "tools/make_op_coverage_model.py", "onnxruntime": ort.__version__, "contextSamples": CONTEXT,
               "chunkSamples": CHUNK, "ops": used, "chunks": [[float(v) for v in c] for c in chunks], "scores": scores}, f)
print(f"{len(nodes)} nodes, ops: {' '.join(used)}; {steps} steps written to {OUT}")
