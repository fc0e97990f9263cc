#!/usr/bin/env python3
"""Hybrid .tflite graphs (TFLite's dynamic-range quantization: int8 weights, float activations,
the input quantized to int8 by the kernel each step) and TFLite's own outputs on them: the corpus
that Tests/EarshotTests/ConformanceTFLiteHybridTests.swift imports and runs through Earshot.

Each graph is written with the `tflite` package's FlatBuffers builders (as
tools/make_tflite_op_corpus.py writes its float graphs: TensorFlow is not needed), in the form
TFLite's converter gives with optimizations=[DEFAULT] and no representative dataset: FULLY_CONNECTED
(weights per tensor or per output, input rows quantized symmetrically or, with
asymmetric_quantize_inputs, asymmetrically), CONV_2D (per-channel filter scales, or one scale),
DEPTHWISE_CONV_2D (per-channel), each with a float bias and a fused activation. Weights are seeded
random floats quantized symmetrically to int8 (scale = max |w| / 127), as the converter does.

Cases: one op each on a seeded random input, and "audio-classifier", a small whole model on raw
audio ([1, 16000] at 16 kHz: learned filterbank CONV_2D, DEPTHWISE_CONV_2D, per-tensor CONV_2D,
FULLY_CONNECTED, LOGISTIC) run on the first 1 s windows of
Tests/EarshotTests/Goldens/microwakeword/wake-words.wav.

Outputs of two resolvers are recorded: TFLite's reference kernels
(OpResolverType.BUILTIN_REF, what Earshot follows) and the default one (XNNPACK where it takes the
op, one thread). Writes Tests/EarshotTests/Goldens/conformance/tflite-hybrid/<case>.tflite and
hybrid.json. Run from the repository root:
  tools/.venv/bin/python tools/make_tflite_hybrid_corpus.py
"""
import importlib.metadata
import json
import sys
from pathlib import Path

import numpy as np
import soundfile
from ai_edge_litert import interpreter as litert
from tflite.BuiltinOperator import BuiltinOperator as OP
from tflite.TensorType import TensorType as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_tflite_op_corpus import ACTIVATIONS, Graph, build  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "Tests/EarshotTests/Goldens/conformance/tflite-hybrid"
AUDIO = ROOT / "Tests/EarshotTests/Goldens/microwakeword/wake-words.wav"
SEED = 4747
rng = np.random.default_rng(SEED)


def rand(*shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, size=shape).astype(np.float32)


def int8_weights(g, w, axis=None):
    """`w` quantized symmetrically to int8: one scale, or one per index of `axis`."""
    if axis is None:
        scales = np.array([np.abs(w).max() / 127], dtype=np.float32)
        q = np.clip(np.round(w / scales[0]), -127, 127)
        return g.const(q, T.INT8, quant=(scales.tolist(), [0]))
    moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    scales = (np.abs(moved).max(axis=1) / 127).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w / scales.reshape(shape)), -127, 127)
    return g.const(q, T.INT8, quant=(scales.tolist(), [0] * len(scales), axis))


def dense(g, x, w, act="none", per_channel=False, asymmetric=False, keep=False, out_shape=None):
    return g.op(OP.FULLY_CONNECTED, [x, int8_weights(g, w, 0 if per_channel else None), g.const(rand(w.shape[0]))], [out_shape],
                ("FullyConnectedOptions", {"FusedActivationFunction": ACTIVATIONS[act], "KeepNumDims": keep,
                                           "AsymmetricQuantizeInputs": asymmetric}))


def conv(g, x, w, out_shape, act="none", padding=0, stride=1, dilation=1, per_channel=True, depthwise=False, multiplier=1):
    # OHWI filters (per channel along 0); depthwise's [1, H, W, O] (per channel along 3).
    filt = int8_weights(g, w, (3 if depthwise else 0) if per_channel else None)
    opts = {"Padding": padding, "StrideW": stride, "StrideH": stride, "DilationWFactor": dilation, "DilationHFactor": dilation,
            "FusedActivationFunction": ACTIVATIONS[act]}
    if depthwise:
        opts["DepthMultiplier"] = multiplier
    bias = g.const(rand(out_shape[3]))
    return g.op(OP.DEPTHWISE_CONV_2D if depthwise else OP.CONV_2D, [x, filt, bias], [out_shape],
                ("DepthwiseConv2DOptions" if depthwise else "Conv2DOptions", opts))


CASES = {}


def case(name):
    def register(fn):
        CASES[name] = fn
        return fn
    return register


for act in ["none", "relu", "relu6"]:
    for per_channel in [False, True]:
        for asymmetric in [False, True]:
            def fn(act=act, per_channel=per_channel, asymmetric=asymmetric):
                g = Graph()
                x = g.input([2, 3, 24])
                return g, dense(g, x, rand(5, 24), act, per_channel, asymmetric, out_shape=[6, 5])
            case(f"fully-connected-{'per-channel' if per_channel else 'per-tensor'}-{'asymmetric' if asymmetric else 'symmetric'}-{act}")(fn)


@case("fully-connected-keep-dims")
def _():
    g = Graph()
    x = g.input([1, 4, 40])
    return g, dense(g, x, rand(7, 40), per_channel=True, asymmetric=True, keep=True, out_shape=[1, 4, 7])


@case("fully-connected-zero-row")
def _():
    # A row of zeros among others: TFLite's scale 1 and zero integers for it.
    g = Graph()
    x = g.input([3, 16])
    return g, dense(g, x, rand(4, 16), per_channel=False, asymmetric=True, out_shape=[3, 4])


def size(n, k, stride, dilation, padding):
    extent = (k - 1) * dilation + 1
    return (n + stride - 1) // stride if padding == 0 else (n - extent) // stride + 1


for name, padding, stride, dilation, per_channel, act in [
    ("conv-2d-per-channel-same", 0, 1, 1, True, "none"), ("conv-2d-per-channel-valid-stride-2", 1, 2, 1, True, "relu"),
    ("conv-2d-per-channel-same-dilated", 0, 1, 2, True, "relu6"), ("conv-2d-per-tensor-same", 0, 1, 1, False, "none"),
    ("conv-2d-per-tensor-valid-stride-2", 1, 2, 1, False, "relu"),
]:
    def fn(padding=padding, stride=stride, dilation=dilation, per_channel=per_channel, act=act):
        g = Graph()
        x = g.input([1, 9, 7, 4])
        out = [1, size(9, 3, stride, dilation, padding), size(7, 3, stride, dilation, padding), 6]
        return g, conv(g, x, rand(6, 3, 3, 4), out, act, padding, stride, dilation, per_channel)
    case(name)(fn)

@case("conv-2d-per-tensor-three-taps")
def _():
    # Three taps along one axis, 8 channels in and out: a float Conv of this shape may run as
    # Winograd's tiles, which would not keep the integer sums exact.
    g = Graph()
    x = g.input([1, 24, 1, 8])
    return g, conv(g, x, rand(8, 3, 1, 8), [1, 24, 1, 8], per_channel=False)


for name, padding, stride, dilation, multiplier, act in [
    ("depthwise-conv-2d-same", 0, 1, 1, 1, "none"), ("depthwise-conv-2d-valid-stride-2", 1, 2, 1, 1, "relu"),
    ("depthwise-conv-2d-same-dilated-relu6", 0, 1, 2, 1, "relu6"), ("depthwise-conv-2d-multiplier-2", 0, 1, 1, 2, "none"),
]:
    def fn(padding=padding, stride=stride, dilation=dilation, multiplier=multiplier, act=act):
        g = Graph()
        x = g.input([1, 9, 7, 4])
        c = 4 * multiplier
        out = [1, size(9, 3, stride, dilation, padding), size(7, 3, stride, dilation, padding), c]
        return g, conv(g, x, rand(1, 3, 3, c), out, act, padding, stride, dilation, depthwise=True, multiplier=multiplier)
    case(name)(fn)


@case("audio-classifier")
def _():
    g = Graph()
    x = g.input([1, 16000])
    frames = g.op(OP.RESHAPE, [x, g.const([1, 100, 160, 1], T.INT32)], [[1, 100, 160, 1]])
    bank = conv(g, frames, rand(16, 1, 160, 1, low=-0.5, high=0.5), [1, 100, 1, 16], "relu", padding=1)
    smooth = conv(g, bank, rand(1, 5, 1, 16, low=-0.5, high=0.5), [1, 100, 1, 16], "relu", depthwise=True)
    mixed = conv(g, smooth, rand(8, 3, 1, 16, low=-0.3, high=0.3), [1, 50, 1, 8], "relu6", stride=2, per_channel=False)
    flat = g.op(OP.RESHAPE, [mixed, g.const([1, 400], T.INT32)], [[1, 400]])
    logits = dense(g, flat, rand(4, 400, low=-0.2, high=0.2), per_channel=True, asymmetric=True, out_shape=[1, 4])
    return g, g.op(OP.LOGISTIC, [logits], [[1, 4]])


def batch_matmul_hybrid():
    """A hybrid BATCH_MATMUL (float input, int8 constant operand): TFLite runs it; Earshot refuses it,
    naming the operator (written, not run)."""
    g = Graph()
    x = g.input([1, 4, 6])
    y = int8_weights(g, rand(1, 6, 5))
    return g, g.op(OP.BATCH_MATMUL, [x, y], [[1, 4, 5]], ("BatchMatMulOptions", {"AdjX": False, "AdjY": False}))


def run(data, resolver, x):
    kwargs = {"experimental_op_resolver_type": litert.OpResolverType.BUILTIN_REF} if resolver == "reference" else {}
    interp = litert.Interpreter(model_content=data, num_threads=1, **kwargs)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"]).astype(np.float32)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    audio, rate = soundfile.read(AUDIO, dtype="float32")
    assert rate == 16000
    results = []
    for name, fn in CASES.items():
        g, output = fn()
        data = build(g, output)
        (OUT / f"{name}.tflite").write_bytes(data)
        shape = [int(d) for d in g.tensors[g.inputs[0]][0]]
        if name == "audio-classifier":
            inputs = [audio[None, k * 16000:(k + 1) * 16000] for k in range(4)]
        else:
            x = rand(*shape)
            if name == "fully-connected-zero-row":
                x[1] = 0
            inputs = [x]
        for k, x in enumerate(inputs):
            ref, default = run(data, "reference", x), run(data, "default", x)
            # The audio classifier's input is the wav's window k (not repeated here).
            given = [] if name == "audio-classifier" else x.ravel().tolist()
            results.append({"name": name, "file": f"{name}.tflite", "window": k, "input_shape": shape, "input": given,
                            "output_shape": list(map(int, ref.shape)), "reference": ref.ravel().tolist(), "default": default.ravel().tolist()})
    g, output = batch_matmul_hybrid()
    (OUT / "batch-matmul-hybrid.tflite").write_bytes(build(g, output))
    meta = {"generator": "tools/make_tflite_hybrid_corpus.py", "seed": SEED, "refused": ["batch-matmul-hybrid.tflite"],
            "reference": "ai-edge-litert Interpreter, OpResolverType.BUILTIN_REF (TFLite's reference kernels), one thread",
            "default": "ai-edge-litert Interpreter, default resolver (XNNPACK where it takes the op), one thread",
            "audio": "Tests/EarshotTests/Goldens/microwakeword/wake-words.wav, 1 s windows 0-3 (audio-classifier)",
            "ai_edge_litert": importlib.metadata.version("ai-edge-litert"), "tflite": importlib.metadata.version("tflite")}
    (OUT / "hybrid.json").write_text(json.dumps({"meta": meta, "cases": results}) + "\n")
    worst = max(float(np.max(np.abs(np.array(r["reference"]) - np.array(r["default"])))) for r in results)
    print(f"{len(results)} runs of {len(CASES)} graphs written to {OUT}; reference against default resolver: max |diff| {worst:.3g}")


if __name__ == "__main__":
    main()
