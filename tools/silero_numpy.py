#!/usr/bin/env python3
"""Plain numpy runner for Earshot model packages of the Silero VAD kind.

Reads only Models/<name>/model.json and weights.safetensors and carries out the
computation the manifest describes, chunk by chunk, as the Swift runtime is
meant to:

  per chunk of audio.chunkSamples new samples
    x      = [context (audio.contextSamples) | chunk]      context: zeros at start
    x      = pad(x, frontEnd.padLeft, frontEnd.padRight, reflect)
    frames = frames of nFFT samples every hopLength samples (no centring)
    spec   = |rfft(frame * periodic Hann(nFFT))|           bins 0 ... nFFT/2, [bins][frames]
    y      = network layers in order on [channels][time]   lstm: carries (h, c)
    p      = mean over time of sigmoid(y)                  outputs.activation / reduceTime
    context = last contextSamples of x before padding

Modes:
  run:    python tools/silero_numpy.py run --model-dir Models/silero-vad --audio FILE
  check:  python tools/silero_numpy.py check [--only 16k|8k] [--float64] [--exact]
          compares against onnxruntime on the original ONNX model (probability
          and LSTM state after every chunk) and against the goldens, if present;
          --exact also evaluates the original graph in float64 and compares it
          with this runner in float64.

Precision: the encoder's re-parameterised convolutions have large weights
(|w| up to ~55), which amplify float32 rounding: onnxruntime's own float32
result is up to ~1.5e-5 away from the exact (float64) probability on the
sample audio, worst on digital silence after speech. Any float32 runtime has
the same noise floor, so two float32 implementations can differ by ~2e-5.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- package reading

def read_safetensors(path: Path) -> tuple[dict, dict]:
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            raise ValueError(f"{name}: dtype {info['dtype']} not supported")
        begin, end = info["data_offsets"]
        count = int(np.prod(info["shape"], dtype=np.int64))
        if end - begin != 4 * count or base + end > len(data):
            raise ValueError(f"{name}: bad data offsets {begin}..{end}")
        tensors[name] = np.frombuffer(data, dtype="<f4", count=count,
                                      offset=base + begin).reshape(info["shape"])
    return tensors, meta


class Package:
    def __init__(self, model_dir: Path, dtype=np.float32):
        self.dir = Path(model_dir)
        self.manifest = json.loads((self.dir / "model.json").read_text())
        if self.manifest.get("format") != "earshot-model":
            raise ValueError(f"{self.dir}: not an earshot-model package")
        raw, self.meta = read_safetensors(self.dir / "weights.safetensors")
        self.dtype = dtype
        self.w = {k: v.astype(dtype) for k, v in raw.items()}
        self.audio = self.manifest["audio"]
        self.front = self.manifest["frontEnd"]
        self.layers = self.manifest["network"]
        self.outputs = self.manifest["outputs"]
        self._check()

    def _check(self) -> None:
        f = self.front
        if f["type"] != "stft" or f["spectrum"] != "magnitude" or f["center"] \
                or f["window"] != "hann" or f["winLength"] != f["nFFT"] \
                or f["padMode"] != "reflect" or f.get("normalized", False) \
                or not f.get("onesided", True):
            raise ValueError(f"front end not supported: {f}")
        for layer in self.layers:
            if layer["type"] == "conv1d":
                w = self.w[layer["weight"]]
                want = (layer["outChannels"], layer["inChannels"] // layer["groups"],
                        layer["kernelSize"])
                if w.shape != want:
                    raise ValueError(f"{layer['name']}: weight {w.shape} != {want}")
            elif layer["type"] == "lstm":
                h, i = layer["hiddenSize"], layer["inputSize"]
                if layer.get("numLayers", 1) != 1 or layer.get("gateOrder", "ifgo") != "ifgo":
                    raise ValueError(f"{layer['name']}: only one layer, gate order ifgo")
                for key, shape in (("weightIH", (4 * h, i)), ("weightHH", (4 * h, h)),
                                   ("biasIH", (4 * h,)), ("biasHH", (4 * h,))):
                    if self.w[layer[key]].shape != shape:
                        raise ValueError(f"{layer['name']}: {key} shape")
            elif layer["type"] != "relu":
                raise ValueError(f"layer type {layer['type']} not supported")


# ---------------------------------------------------------------- computation

def hann(n: int, periodic: bool, dtype) -> np.ndarray:
    m = n if periodic else n - 1
    k = np.arange(n, dtype=np.float64)
    return (0.5 - 0.5 * np.cos(2.0 * np.pi * k / m)).astype(dtype)


def reflect_pad(x: np.ndarray, left: int, right: int) -> np.ndarray:
    # Mirror without repeating the edge sample: [.. x1 x0 | x0 x1 .. xn-1 | xn-2 ..]
    return np.concatenate([x[1:left + 1][::-1], x, x[len(x) - 1 - right:len(x) - 1][::-1]])


def conv1d(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: int,
           padding: int, dilation: int, groups: int) -> np.ndarray:
    """x [cin][t], w [cout][cin/groups][k] -> [cout][t_out]; zero padding."""
    cin, t = x.shape
    cout, cpg, k = w.shape
    xp = np.pad(x, ((0, 0), (padding, padding)))
    t_out = (t + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    y = np.empty((cout, t_out), dtype=x.dtype)
    opg = cout // groups
    for g in range(groups):
        xs = xp[g * cpg:(g + 1) * cpg]
        # cols[cin_g * k, t_out]: column j holds the window feeding output j
        cols = np.stack([xs[:, j * dilation: j * dilation + (t_out - 1) * stride + 1: stride]
                         for j in range(k)], axis=1).reshape(cpg * k, t_out)
        y[g * opg:(g + 1) * opg] = w[g * opg:(g + 1) * opg].reshape(opg, cpg * k) @ cols
    if b is not None:
        y += b[:, None]
    return y


def sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):                 # exp overflow -> 1/inf = 0, as wanted
        return 1.0 / (1.0 + np.exp(-x))


class Stream:
    """One audio stream through a package: context samples plus LSTM states."""

    def __init__(self, pkg: Package):
        self.pkg = pkg
        self.window = hann(pkg.front["nFFT"], pkg.front["periodic"], pkg.dtype)
        self.reset()

    def reset(self) -> None:
        dt = self.pkg.dtype
        self.context = np.zeros(self.pkg.audio["contextSamples"], dtype=dt)
        self.state = {l["name"]: (np.zeros(l["hiddenSize"], dtype=dt),
                                  np.zeros(l["hiddenSize"], dtype=dt))
                      for l in self.pkg.layers if l["type"] == "lstm"}

    def spectrum(self, x: np.ndarray) -> np.ndarray:
        f = self.pkg.front
        n_fft, hop = f["nFFT"], f["hopLength"]
        xp = reflect_pad(x, f["padLeft"], f["padRight"])
        frames = 1 + (len(xp) - n_fft) // hop
        idx = np.arange(frames)[:, None] * hop + np.arange(n_fft)[None, :]
        spec = np.fft.rfft(xp[idx].astype(np.float64) * self.window, axis=1)
        mag = np.sqrt(spec.real ** 2 + spec.imag ** 2)
        if "framesPerChunk" in f and frames != f["framesPerChunk"]:
            raise ValueError(f"{frames} frames, manifest says {f['framesPerChunk']}")
        return mag.T.astype(self.pkg.dtype)            # [bins][frames]

    def lstm(self, layer: dict, x: np.ndarray) -> np.ndarray:
        w = self.pkg.w
        wih, whh = w[layer["weightIH"]], w[layer["weightHH"]]
        bias = w[layer["biasIH"]] + w[layer["biasHH"]]
        hs = layer["hiddenSize"]
        h, c = self.state[layer["name"]]
        out = np.empty((hs, x.shape[1]), dtype=x.dtype)
        for t in range(x.shape[1]):
            gates = wih @ x[:, t] + whh @ h + bias
            i = sigmoid(gates[0:hs])
            f = sigmoid(gates[hs:2 * hs])
            g = np.tanh(gates[2 * hs:3 * hs])
            o = sigmoid(gates[3 * hs:4 * hs])
            c = f * c + i * g
            h = o * np.tanh(c)
            out[:, t] = h
        self.state[layer["name"]] = (h, c)
        return out

    def step(self, chunk: np.ndarray) -> float:
        a = self.pkg.audio
        if len(chunk) != a["chunkSamples"]:
            raise ValueError(f"chunk of {len(chunk)} samples, expected {a['chunkSamples']}")
        x = np.concatenate([self.context, chunk.astype(self.pkg.dtype)])
        self.context = x[len(x) - a["contextSamples"]:].copy()
        y = self.spectrum(x)
        w = self.pkg.w
        for layer in self.pkg.layers:
            kind = layer["type"]
            if kind == "conv1d":
                y = conv1d(y, w[layer["weight"]], w[layer["bias"]] if layer.get("bias") else None,
                           layer["stride"], layer["padding"], layer["dilation"], layer["groups"])
            elif kind == "relu":
                y = np.maximum(y, 0)
            elif kind == "lstm":
                y = self.lstm(layer, y)
        out = self.pkg.outputs
        if out["activation"] != "sigmoid" or out.get("reduceTime", "mean") != "mean":
            raise ValueError(f"outputs not supported: {out}")
        p = sigmoid(y).mean(axis=1)                    # [labels]
        return float(p[0])

    def lstm_state(self) -> np.ndarray:
        """State of the (single) LSTM as [2][hidden] = [h, c], like the ONNX `stateN`."""
        (h, c), = self.state.values()
        return np.stack([h, c])


def run(pkg: Package, audio: np.ndarray, with_state: bool = False):
    s = Stream(pkg)
    chunk = pkg.audio["chunkSamples"]
    probs, states = [], []
    for start in range(0, len(audio), chunk):
        piece = audio[start:start + chunk]
        if len(piece) < chunk:                         # audio.partialChunk == "zero-pad"
            piece = np.concatenate([piece, np.zeros(chunk - len(piece), dtype=piece.dtype)])
        probs.append(s.step(piece))
        if with_state:
            states.append(s.lstm_state())
    return (np.array(probs), np.array(states)) if with_state else np.array(probs)


# ---------------------------------------------------------------- command line

def cmd_run(args) -> int:
    import soundfile as sf
    pkg = Package(args.model_dir)
    audio, sr = sf.read(args.audio, dtype="float32", always_2d=True)
    audio = audio.mean(axis=1, dtype=np.float32)
    if sr != pkg.audio["sampleRate"]:
        raise SystemExit(f"audio is {sr} Hz, model wants {pkg.audio['sampleRate']} Hz")
    probs = run(pkg, audio)
    step = pkg.audio["chunkSamples"] / sr
    for i, p in enumerate(probs):
        print(f"{i * step:9.3f}s {p:.6f}")
    return 0


def float64_reference(model_bytes: bytes):
    """The original ONNX graph, every float made double, run by onnx's own
    reference evaluator (onnxruntime has no double Conv). This evaluates the
    source model's exact computation, free of float32 rounding."""
    import onnx
    from onnx import TensorProto, numpy_helper
    from onnx.reference import ReferenceEvaluator

    model = onnx.load_model_from_string(model_bytes)

    def widen(graph):
        for v in list(graph.input) + list(graph.output) + list(graph.value_info):
            if v.type.tensor_type.elem_type == TensorProto.FLOAT:
                v.type.tensor_type.elem_type = TensorProto.DOUBLE
        for node in graph.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    widen(a.g)
                elif a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                    wide = numpy_helper.to_array(a.t).astype(np.float64)
                    a.t.CopyFrom(numpy_helper.from_array(wide, a.t.name))
                elif node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                    a.i = TensorProto.DOUBLE

    widen(model.graph)
    return ReferenceEvaluator(model)


def cmd_check(args) -> int:
    import silero_reference as ref
    model_bytes = ref.onnx_model_bytes()
    sess = ref.session(model_bytes)
    exact = float64_reference(model_bytes) if args.exact else None
    worst = 0.0
    worst_exact = 0.0
    for key, case in ref.CASES.items():
        if args.only and key != args.only:
            continue
        path = ROOT / case["audio"]
        if args.audio_16k and key == "16k":
            path = Path(args.audio_16k)
        if args.audio_8k and key == "8k":
            path = Path(args.audio_8k)
        pkg = Package(ROOT / "Models" / case["model"], np.float64 if args.float64 else np.float32)
        audio = ref.read_audio(path, case["rate"])
        p_np, s_np = run(pkg, audio, with_state=True)
        p_ort, s_ort = ref.stream(sess, audio, case["rate"], with_state=True)
        dp = np.abs(p_np - p_ort)
        ds = np.abs(s_np - s_ort)
        worst = max(worst, float(dp.max()))
        print(f"{case['model']:14s} {path.name}: {len(p_np)} chunks, "
              f"max |p_numpy - p_ort| = {dp.max():.3e} (chunk {int(dp.argmax())}), "
              f"mean {dp.mean():.2e}; max |state diff| = {ds.max():.3e}; "
              f"{(p_ort >= 0.5).mean() * 100:.1f}% chunks >= 0.5")
        golden = ref.GOLDENS / case["golden"]
        if golden.exists() and not (args.audio_16k or args.audio_8k):
            g = np.array(json.loads(golden.read_text())["probabilities"])
            if len(g) != len(p_np):
                print(f"  golden {golden.name}: {len(g)} values, expected {len(p_np)}")
                worst = float("inf")
            else:
                dg = np.abs(p_np - g).max()
                print(f"  vs golden {golden.name}: max |diff| = {dg:.3e}")
                worst = max(worst, float(dg))
        if exact is not None:
            p64, s64 = run(Package(ROOT / "Models" / case["model"], np.float64), audio,
                           with_state=True)
            p_ref, s_ref = ref.stream(exact, audio, case["rate"], with_state=True,
                                      dtype=np.float64)
            de, dse = np.abs(p64 - p_ref).max(), np.abs(s64 - s_ref).max()
            worst_exact = max(worst_exact, float(de))
            print(f"  float64 numpy vs float64 ONNX graph: max |p diff| = {de:.3e}, "
                  f"max |state diff| = {dse:.3e}; onnxruntime vs float64 graph: "
                  f"max |p diff| = {np.abs(p_ort - p_ref).max():.3e}")
    ok = worst <= args.tolerance and worst_exact <= args.exact_tolerance
    print(f"{'PASS' if ok else 'FAIL'}: worst vs onnxruntime/goldens {worst:.3e} "
          f"(tolerance {args.tolerance:g})"
          + (f", worst vs float64 graph {worst_exact:.3e} (tolerance {args.exact_tolerance:g})"
             if exact is not None else ""))
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="print the speech probability of every chunk")
    r.add_argument("--model-dir", type=Path, default=ROOT / "Models" / "silero-vad")
    r.add_argument("--audio", required=True)
    c = sub.add_parser("check", help="compare with onnxruntime and the goldens")
    c.add_argument("--only", choices=["16k", "8k"])
    c.add_argument("--float64", action="store_true", help="compute in float64")
    c.add_argument("--tolerance", type=float, default=5e-5,
                   help="max |diff| against onnxruntime's float32 results and the goldens "
                        "(default 5e-5: onnxruntime itself is up to ~1.5e-5 from the exact value)")
    c.add_argument("--exact", action="store_true",
                   help="also run the original graph in float64 (onnx reference evaluator) "
                        "and compare with this runner in float64")
    c.add_argument("--exact-tolerance", type=float, default=1e-6,
                   help="for --exact (the ONNX file's DFT basis is float32-rounded: ~4e-7)")
    c.add_argument("--audio-16k", help="use this 16 kHz file instead of the sample")
    c.add_argument("--audio-8k", help="use this 8 kHz file instead of the sample")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    return cmd_run(args) if args.cmd == "run" else cmd_check(args)


if __name__ == "__main__":
    sys.exit(main())
