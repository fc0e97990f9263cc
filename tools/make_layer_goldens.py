#!/usr/bin/env python3
"""Writes reference data for the Earshot layer tests.

Usage (from the repository root):
    tools/.venv/bin/python tools/make_layer_goldens.py

Writes Tests/EarshotModelTests/Goldens/layers.json: one case per layer
configuration, each holding the layer spec, its weights, an input, the input
state (recurrent layers) and the expected output and output state. Two case
shapes extend this: "sequence" (a list of specs run one after the other,
instead of "spec") and "blocks" (consecutive blocks of one stream, each with
its own input, stateIn, output and stateOut, instead of the top-level ones;
block 1 starts from zero state, each later block from the previous stateOut).

Weights, inputs and input states are drawn from a fixed seed, quantised to
6 significant digits and then to float32, so the decimal text in the file
parses to exactly the float32 values the reference used. The reference itself
is computed in float64 with numpy, following the PyTorch definitions of
Conv1d, Linear, LSTM, GRU, LayerNorm and BatchNorm1d (eval mode), and the outputs are stored rounded to
8 significant digits. Activations are laid out [channels][time], row-major.
"""

import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "Tests" / "EarshotModelTests" / "Goldens" / "layers.json"
GENERATOR = "tools/make_layer_goldens.py"
SEED = 20240611

INPUT_DIGITS = 6
OUTPUT_DIGITS = 8
WEIGHT_STD = 0.5

rng = np.random.default_rng(SEED)


# ---------------------------------------------------------------------------
# Value handling
# ---------------------------------------------------------------------------

def quantise(a):
    """float64 array holding float32 values whose short decimal form is exact."""
    a = np.asarray(a, dtype=np.float64)
    text = [f"{v:.{INPUT_DIGITS}g}" for v in a.ravel()]
    q = np.array([float(np.float32(t)) for t in text], dtype=np.float64)
    return q.reshape(a.shape)


def input_list(a):
    """Flat list of stored input values; checks they survive a float32 round trip."""
    out = []
    for v in np.asarray(a, dtype=np.float64).ravel():
        t = float(f"{v:.{INPUT_DIGITS}g}")
        assert float(np.float32(t)) == v, (t, v)
        out.append(t)
    return out


def output_list(a):
    return [float(f"{v:.{OUTPUT_DIGITS}g}") for v in np.asarray(a, dtype=np.float64).ravel()]


def weights(*shape):
    return quantise(rng.normal(0.0, WEIGHT_STD, size=shape))


def signal(*shape):
    return quantise(rng.normal(0.0, 1.0, size=shape))


def tensor(a):
    return {"shape": list(a.shape), "values": input_list(a)}


def activation_io(x):
    return {"channels": int(x.shape[0]), "time": int(x.shape[1]), "values": input_list(x)}


def output_io(y):
    return {"channels": int(y.shape[0]), "time": int(y.shape[1]), "values": output_list(y)}


# ---------------------------------------------------------------------------
# Reference layers (float64)
# ---------------------------------------------------------------------------

def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def conv1d(x, w, b, stride, padding, dilation, groups):
    cin, t = x.shape
    cout, cin_g, k = w.shape
    assert cin == cin_g * groups and cout % groups == 0
    cout_g = cout // groups
    t_out = (t + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    xp = np.pad(x, ((0, 0), (padding, padding)))
    # taps[c, j, n] = xp[c, n*stride + j*dilation]
    idx = np.arange(t_out)[None, :] * stride + np.arange(k)[:, None] * dilation
    taps = xp[:, idx]
    y = np.empty((cout, t_out))
    for g in range(groups):
        xs = taps[g * cin_g:(g + 1) * cin_g]
        ws = w[g * cout_g:(g + 1) * cout_g]
        y[g * cout_g:(g + 1) * cout_g] = np.einsum("oik,ikn->on", ws, xs)
    if b is not None:
        y += b[:, None]
    return y


def linear(x, w, b):
    y = w @ x
    if b is not None:
        y += b[:, None]
    return y


def lstm(x, w_ih, w_hh, b_ih, b_hh, h, c):
    hidden = w_hh.shape[1]
    ys = []
    for step in range(x.shape[1]):
        gates = w_ih @ x[:, step] + b_ih + w_hh @ h + b_hh
        i = sigmoid(gates[0:hidden])
        f = sigmoid(gates[hidden:2 * hidden])
        g = np.tanh(gates[2 * hidden:3 * hidden])
        o = sigmoid(gates[3 * hidden:4 * hidden])
        c = f * c + i * g
        h = o * np.tanh(c)
        ys.append(h)
    return np.stack(ys, axis=1), h, c


def gru(x, w_ih, w_hh, b_ih, b_hh, h):
    hidden = w_hh.shape[1]
    ys = []
    for step in range(x.shape[1]):
        gi = w_ih @ x[:, step] + b_ih
        gh = w_hh @ h + b_hh
        r = sigmoid(gi[0:hidden] + gh[0:hidden])
        z = sigmoid(gi[hidden:2 * hidden] + gh[hidden:2 * hidden])
        n = np.tanh(gi[2 * hidden:] + r * gh[2 * hidden:])
        h = (1.0 - z) * n + z * h
        ys.append(h)
    return np.stack(ys, axis=1), h


def layer_norm(x, w, b, eps):
    # torch.nn.LayerNorm(C) on x.T: per time step over the channels, biased variance.
    mu = x.mean(axis=0, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=0, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w[:, None] + b[:, None]


def batch_norm(x, w, b, mean, var, eps):
    # torch.nn.BatchNorm1d in eval mode: running statistics per channel.
    return (x - mean[:, None]) / np.sqrt(var[:, None] + eps) * w[:, None] + b[:, None]


def causal_conv1d_block(x, state, w, b, dilation, groups):
    """One block of a stride-1 causal conv; state = previous (k-1)*dilation frames."""
    ctx = (w.shape[2] - 1) * dilation
    xin = np.concatenate([state, x], axis=1)
    return conv1d(xin, w, b, 1, 0, dilation, groups), xin[:, xin.shape[1] - ctx:]


def gelu(x):
    return np.vectorize(lambda v: 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))))(x)


def softmax_channels(x):
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0.0),
    "sigmoid": sigmoid,
    "tanh": np.tanh,
    "silu": lambda x: x * sigmoid(x),
    "gelu": gelu,
    "softmax": softmax_channels,
    "log": lambda x: np.log(x + 1e-6),
}


# ---------------------------------------------------------------------------
# Independent scalar-loop checks
# ---------------------------------------------------------------------------

def naive_conv1d(x, w, b, stride, padding, dilation, groups):
    cin, t = x.shape
    cout, cin_g, k = w.shape
    cout_g = cout // groups
    t_out = (t + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    y = [[0.0] * t_out for _ in range(cout)]
    for o in range(cout):
        g = o // cout_g
        for n in range(t_out):
            acc = 0.0 if b is None else float(b[o])
            for ci in range(cin_g):
                for j in range(k):
                    pos = n * stride - padding + j * dilation
                    if 0 <= pos < t:
                        acc += float(w[o, ci, j]) * float(x[g * cin_g + ci, pos])
            y[o][n] = acc
    return np.array(y)


def naive_lstm(x, w_ih, w_hh, b_ih, b_hh, h0, c0):
    hidden = len(h0)
    h = [float(v) for v in h0]
    c = [float(v) for v in c0]
    cols = []

    def sig(v):
        return 1.0 / (1.0 + math.exp(-v))

    for step in range(x.shape[1]):
        pre = []
        for row in range(4 * hidden):
            acc = float(b_ih[row]) + float(b_hh[row])
            for j in range(x.shape[0]):
                acc += float(w_ih[row, j]) * float(x[j, step])
            for j in range(hidden):
                acc += float(w_hh[row, j]) * h[j]
            pre.append(acc)
        new_h, new_c = [], []
        for u in range(hidden):
            i = sig(pre[u])
            f = sig(pre[hidden + u])
            g = math.tanh(pre[2 * hidden + u])
            o = sig(pre[3 * hidden + u])
            cu = f * c[u] + i * g
            new_c.append(cu)
            new_h.append(o * math.tanh(cu))
        h, c = new_h, new_c
        cols.append(list(h))
    return np.array(cols).T, np.array(h), np.array(c)


def naive_gru(x, w_ih, w_hh, b_ih, b_hh, h0):
    hidden = len(h0)
    h = [float(v) for v in h0]
    cols = []

    def sig(v):
        return 1.0 / (1.0 + math.exp(-v))

    def dot(w, row, vec):
        return sum(float(w[row, j]) * float(vec[j]) for j in range(len(vec)))

    for step in range(x.shape[1]):
        xs = x[:, step]
        new_h = []
        for u in range(hidden):
            r = sig(dot(w_ih, u, xs) + b_ih[u] + dot(w_hh, u, h) + b_hh[u])
            zr = hidden + u
            z = sig(dot(w_ih, zr, xs) + b_ih[zr] + dot(w_hh, zr, h) + b_hh[zr])
            nr = 2 * hidden + u
            n = math.tanh(dot(w_ih, nr, xs) + b_ih[nr] + r * (dot(w_hh, nr, h) + b_hh[nr]))
            new_h.append((1.0 - z) * n + z * h[u])
        h = new_h
        cols.append(list(h))
    return np.array(cols).T, np.array(h)


def naive_linear(x, w, b):
    return np.array([[(0.0 if b is None else float(b[o]))
                      + sum(float(w[o, i]) * float(x[i, n]) for i in range(x.shape[0]))
                      for n in range(x.shape[1])] for o in range(w.shape[0])])


def naive_layer_norm(x, w, b, eps):
    c, t = x.shape
    y = [[0.0] * t for _ in range(c)]
    for n in range(t):
        col = [float(x[i, n]) for i in range(c)]
        mu = sum(col) / c
        var = sum((v - mu) * (v - mu) for v in col) / c
        for i in range(c):
            y[i][n] = (col[i] - mu) / math.sqrt(var + eps) * float(w[i]) + float(b[i])
    return np.array(y)


def naive_batch_norm(x, w, b, mean, var, eps):
    return np.array([[(float(x[i, n]) - float(mean[i])) / math.sqrt(float(var[i]) + eps)
                      * float(w[i]) + float(b[i]) for n in range(x.shape[1])]
                     for i in range(x.shape[0])])


def naive_pool(x, kind):
    y = []
    for row in x:
        acc = float(row[0])
        for v in row[1:]:
            acc = acc + float(v) if kind == "meanPool" else (float(v) if v > acc else acc)
        y.append([acc / len(row) if kind == "meanPool" else acc])
    return np.array(y)


def naive_causal_stream(blocks, w, b, dilation, groups):
    """Frame-history streaming conv: returns per-block outputs and states."""
    cout, cin_g, k = w.shape
    cout_g = cout // groups
    ctx = (k - 1) * dilation
    hist = [[0.0] * ctx for _ in range(cin_g * groups)]
    outs, states = [], []
    for x in blocks:
        frames = [hist[c] + [float(v) for v in x[c]] for c in range(len(hist))]
        y = [[0.0] * x.shape[1] for _ in range(cout)]
        for o in range(cout):
            g = o // cout_g
            for n in range(x.shape[1]):
                acc = float(b[o])
                for ci in range(cin_g):
                    for j in range(k):
                        acc += float(w[o, ci, j]) * frames[g * cin_g + ci][n + j * dilation]
                y[o][n] = acc
        hist = [row[len(row) - ctx:] for row in frames]
        outs.append(np.array(y))
        states.append(np.array(hist).reshape(len(hist), ctx))
    return outs, states


CHECK_TOL = 1e-12
checks = []


def check(label, got, want):
    err = float(np.max(np.abs(np.asarray(got) - np.asarray(want))))
    checks.append((label, err))
    if not err <= CHECK_TOL:
        sys.exit(f"self-check failed for {label}: max abs difference {err}")


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

cases = []


def conv_case(title, cin, cout, k, stride, padding, dilation, groups, t, bias=True):
    w = weights(cout, cin // groups, k)
    b = weights(cout) if bias else None
    x = signal(cin, t)
    y = conv1d(x, w, b, stride, padding, dilation, groups)
    check(title, y, naive_conv1d(x, w, b, stride, padding, dilation, groups))
    spec = {"type": "conv1d", "name": "c", "inChannels": cin, "outChannels": cout,
            "kernelSize": k, "stride": stride, "padding": padding, "dilation": dilation,
            "groups": groups, "weight": "c.weight"}
    tensors = {"c.weight": tensor(w)}
    if bias:
        spec["bias"] = "c.bias"
        tensors["c.bias"] = tensor(b)
    cases.append({"name": title, "spec": spec, "tensors": tensors, "input": activation_io(x),
                  "stateIn": [], "output": output_io(y), "stateOut": []})


def linear_case(title, fin, fout, t, bias=True):
    w = weights(fout, fin)
    b = weights(fout) if bias else None
    x = signal(fin, t)
    y = linear(x, w, b)
    spec = {"type": "linear", "name": "fc", "inFeatures": fin, "outFeatures": fout,
            "weight": "fc.weight"}
    tensors = {"fc.weight": tensor(w)}
    if bias:
        spec["bias"] = "fc.bias"
        tensors["fc.bias"] = tensor(b)
    cases.append({"name": title, "spec": spec, "tensors": tensors, "input": activation_io(x),
                  "stateIn": [], "output": output_io(y), "stateOut": []})


def recurrent_tensors(prefix, gates, isz, hsz):
    w_ih = weights(gates * hsz, isz)
    w_hh = weights(gates * hsz, hsz)
    b_ih = weights(gates * hsz)
    b_hh = weights(gates * hsz)
    names = {"weightIH": f"{prefix}.weight_ih", "weightHH": f"{prefix}.weight_hh",
             "biasIH": f"{prefix}.bias_ih", "biasHH": f"{prefix}.bias_hh"}
    tensors = {names["weightIH"]: tensor(w_ih), names["weightHH"]: tensor(w_hh),
               names["biasIH"]: tensor(b_ih), names["biasHH"]: tensor(b_hh)}
    return (w_ih, w_hh, b_ih, b_hh), names, tensors


def lstm_case(title, isz, hsz, t):
    (w_ih, w_hh, b_ih, b_hh), names, tensors = recurrent_tensors("lstm", 4, isz, hsz)
    x = signal(isz, t)
    h0 = signal(hsz)
    c0 = signal(hsz)
    y, h1, c1 = lstm(x, w_ih, w_hh, b_ih, b_hh, h0, c0)
    ny, nh, nc = naive_lstm(x, w_ih, w_hh, b_ih, b_hh, h0, c0)
    check(title, np.concatenate([y.ravel(), h1, c1]), np.concatenate([ny.ravel(), nh, nc]))
    spec = {"type": "lstm", "name": "lstm", "inputSize": isz, "hiddenSize": hsz,
            "numLayers": 1, "gateOrder": "ifgo", **names}
    cases.append({"name": title, "spec": spec, "tensors": tensors, "input": activation_io(x),
                  "stateIn": input_list(np.concatenate([h0, c0])), "output": output_io(y),
                  "stateOut": output_list(np.concatenate([h1, c1]))})


def gru_case(title, isz, hsz, t):
    (w_ih, w_hh, b_ih, b_hh), names, tensors = recurrent_tensors("gru", 3, isz, hsz)
    x = signal(isz, t)
    h0 = signal(hsz)
    y, h1 = gru(x, w_ih, w_hh, b_ih, b_hh, h0)
    ny, nh = naive_gru(x, w_ih, w_hh, b_ih, b_hh, h0)
    check(title, np.concatenate([y.ravel(), h1]), np.concatenate([ny.ravel(), nh]))
    spec = {"type": "gru", "name": "gru", "inputSize": isz, "hiddenSize": hsz,
            "numLayers": 1, "gateOrder": "rzn", **names}
    cases.append({"name": title, "spec": spec, "tensors": tensors, "input": activation_io(x),
                  "stateIn": input_list(h0), "output": output_io(y),
                  "stateOut": output_list(h1)})


def activation_case(kind):
    # 15 values spread over about -4..4 with a little jitter, shuffled so each
    # time step sees a mix of signs and magnitudes.
    base = np.linspace(-4.0, 4.0, 15) + rng.uniform(-0.2, 0.2, size=15)
    x = quantise(rng.permutation(base).reshape(5, 3))
    y = ACTIVATIONS[kind](x)
    cases.append({"name": f"{kind} 5x3", "spec": {"type": kind, "name": kind}, "tensors": {},
                  "input": activation_io(x), "stateIn": [], "output": output_io(y),
                  "stateOut": []})


def positive(*shape, low=0.5, high=1.5):
    return quantise(rng.uniform(low, high, size=shape))


def layer_norm_case(title, c, t, eps, scale=1.0):
    w = positive(c)
    b = weights(c)
    x = quantise(scale * rng.normal(0.0, 1.0, size=(c, t)))
    y = layer_norm(x, w, b, eps)
    check(title, y, naive_layer_norm(x, w, b, eps))
    spec = {"type": "layerNorm", "name": "ln", "normalizedShape": c, "eps": eps,
            "weight": "ln.weight", "bias": "ln.bias"}
    tensors = {"ln.weight": tensor(w), "ln.bias": tensor(b)}
    cases.append({"name": title, "spec": spec, "tensors": tensors, "input": activation_io(x),
                  "stateIn": [], "output": output_io(y), "stateOut": []})


def batch_norm_sequence_case(title, first, fin, fout, t, k=1, padding=0, eps=1e-5):
    """first = "conv1d" (k, padding; stride, dilation, groups 1) or "linear"."""
    if first == "conv1d":
        w = weights(fout, fin, k)
        spec1 = {"type": "conv1d", "name": "c", "inChannels": fin, "outChannels": fout,
                 "kernelSize": k, "stride": 1, "padding": padding, "dilation": 1, "groups": 1,
                 "weight": "c.weight", "bias": "c.bias"}
    else:
        w = weights(fout, fin)
        spec1 = {"type": "linear", "name": "fc", "inFeatures": fin, "outFeatures": fout,
                 "weight": "fc.weight", "bias": "fc.bias"}
    b = weights(fout)
    bn_w, bn_b, bn_mean, bn_var = positive(fout), weights(fout), weights(fout), positive(fout, high=2.0)
    x = signal(fin, t)
    if first == "conv1d":
        h = conv1d(x, w, b, 1, padding, 1, 1)
        nh = naive_conv1d(x, w, b, 1, padding, 1, 1)
    else:
        h, nh = linear(x, w, b), naive_linear(x, w, b)
    y = batch_norm(h, bn_w, bn_b, bn_mean, bn_var, eps)
    check(title, y, naive_batch_norm(nh, bn_w, bn_b, bn_mean, bn_var, eps))
    spec2 = {"type": "batchNorm", "name": "bn", "numFeatures": fout, "eps": eps,
             "weight": "bn.weight", "bias": "bn.bias", "runningMean": "bn.running_mean",
             "runningVar": "bn.running_var"}
    tensors = {spec1["weight"]: tensor(w), spec1["bias"]: tensor(b), "bn.weight": tensor(bn_w),
               "bn.bias": tensor(bn_b), "bn.running_mean": tensor(bn_mean),
               "bn.running_var": tensor(bn_var)}
    cases.append({"name": title, "sequence": [spec1, spec2], "tensors": tensors,
                  "input": activation_io(x), "stateIn": [], "output": output_io(y),
                  "stateOut": []})


def pool_case(kind, c, t):
    x = signal(c, t)
    y = x.mean(axis=1, keepdims=True) if kind == "meanPool" else x.max(axis=1, keepdims=True)
    title = f"{kind} {c}x{t}"
    check(title, y, naive_pool(x, kind))
    cases.append({"name": title, "spec": {"type": kind, "name": "pool"}, "tensors": {},
                  "input": activation_io(x), "stateIn": [], "output": output_io(y),
                  "stateOut": []})


def causal_conv_case(title, cin, cout, k, dilation, groups, t, n_blocks=2):
    w = weights(cout, cin // groups, k)
    b = weights(cout)
    xs = [signal(cin, t) for _ in range(n_blocks)]
    ctx = (k - 1) * dilation
    state = np.zeros((cin, ctx))
    blocks, ys, states = [], [], []
    for x in xs:
        y, new_state = causal_conv1d_block(x, state, w, b, dilation, groups)
        blocks.append({"input": activation_io(x), "stateIn": input_list(state),
                       "output": output_io(y), "stateOut": input_list(new_state)})
        ys.append(y)
        states.append(new_state)
        state = new_state
    # The blocks together must equal one non-causal conv over [zeros | block 1 | block 2 ...].
    whole = conv1d(np.concatenate([np.zeros((cin, ctx))] + xs, axis=1), w, b, 1, 0, dilation, groups)
    check(f"{title} vs whole stream", np.concatenate(ys, axis=1), whole)
    nys, nstates = naive_causal_stream(xs, w, b, dilation, groups)
    check(title, np.concatenate([np.concatenate(ys, axis=1).ravel()] + [s.ravel() for s in states]),
          np.concatenate([np.concatenate(nys, axis=1).ravel()] + [s.ravel() for s in nstates]))
    spec = {"type": "conv1d", "name": "c", "inChannels": cin, "outChannels": cout,
            "kernelSize": k, "stride": 1, "padding": 0, "dilation": dilation, "groups": groups,
            "weight": "c.weight", "bias": "c.bias", "causal": True}
    tensors = {"c.weight": tensor(w), "c.bias": tensor(b)}
    cases.append({"name": title, "spec": spec, "tensors": tensors, "blocks": blocks})


def log_case(title, c, t):
    # Mel energies: non-negative, over several decades, one exactly zero.
    x = quantise(np.exp(rng.uniform(-12.0, 4.0, size=(c, t))))
    x[0, 0] = 0.0
    y = ACTIVATIONS["log"](x)
    check(title, y, np.array([[math.log(float(v) + 1e-6) for v in row] for row in x]))
    cases.append({"name": title, "spec": {"type": "log", "name": "log"}, "tensors": {},
                  "input": activation_io(x), "stateIn": [], "output": output_io(y), "stateOut": []})


def standalone_batch_norm_case(title, c, t, eps=1e-5):
    bn_w, bn_b, bn_mean, bn_var = positive(c), weights(c), weights(c), positive(c, high=2.0)
    x = signal(c, t)
    h = np.maximum(x, 0.0)
    y = batch_norm(h, bn_w, bn_b, bn_mean, bn_var, eps)
    check(title, y, naive_batch_norm(h, bn_w, bn_b, bn_mean, bn_var, eps))
    spec = {"type": "batchNorm", "name": "bn", "numFeatures": c, "eps": eps, "weight": "bn.weight",
            "bias": "bn.bias", "runningMean": "bn.running_mean", "runningVar": "bn.running_var"}
    tensors = {"bn.weight": tensor(bn_w), "bn.bias": tensor(bn_b), "bn.running_mean": tensor(bn_mean),
               "bn.running_var": tensor(bn_var)}
    cases.append({"name": title, "sequence": [{"type": "relu", "name": "relu"}, spec], "tensors": tensors,
                  "input": activation_io(x), "stateIn": [], "output": output_io(y), "stateOut": []})


def build():
    conv_case("conv1d k3 p1", 3, 5, 3, 1, 1, 1, 1, 7)
    conv_case("conv1d k3 s2 p1 odd sizes", 5, 7, 3, 2, 1, 1, 1, 9)
    conv_case("conv1d k5 d2 p4", 3, 5, 5, 1, 4, 2, 1, 11)
    conv_case("conv1d groups 2", 6, 4, 3, 1, 1, 1, 2, 7)
    conv_case("conv1d depthwise groups 5", 5, 5, 3, 1, 1, 1, 5, 9)
    conv_case("conv1d k1 no bias", 5, 3, 1, 1, 0, 1, 1, 7, bias=False)
    linear_case("linear 7->3", 7, 3, 5)
    linear_case("linear 5->3 no bias", 5, 3, 3, bias=False)
    lstm_case("lstm I5 H7 T4", 5, 7, 4)
    lstm_case("lstm I3 H9 T1", 3, 9, 1)
    gru_case("gru I5 H7 T4", 5, 7, 4)
    gru_case("gru I4 H3 T2", 4, 3, 2)
    for kind in ("relu", "sigmoid", "tanh", "silu", "gelu", "softmax"):
        activation_case(kind)
    # Appended after the first 18 cases so their random draws stay unchanged.
    layer_norm_case("layerNorm C7 T3", 7, 3, 1e-5)
    layer_norm_case("layerNorm C5 T4 eps 1e-3", 5, 4, 1e-3, scale=0.1)
    batch_norm_sequence_case("conv1d k3 p1 + batchNorm", "conv1d", 4, 6, 5, k=3, padding=1)
    batch_norm_sequence_case("linear 5->3 + batchNorm", "linear", 5, 3, 2)
    pool_case("meanPool", 5, 4)
    pool_case("maxPool", 5, 4)
    causal_conv_case("causal conv1d k3 d1 2 blocks", 3, 4, 3, 1, 1, 5)
    causal_conv_case("causal conv1d k3 d2 2 blocks", 2, 3, 3, 2, 1, 4)
    causal_conv_case("causal conv1d k2 groups 2 2 blocks", 4, 4, 2, 1, 2, 3)
    # Appended after the cases above so their random draws stay unchanged.
    log_case("log 5x3", 5, 3)
    standalone_batch_norm_case("relu + batchNorm (no layer to fold into)", 4, 3)


def write():
    note = ("Weights ~N(0, 0.5) and inputs/states ~N(0, 1) from numpy default_rng seed "
            f"{SEED}, quantised to {INPUT_DIGITS} significant digits then float32 (the stored "
            "decimals parse to exactly those float32 values). Outputs computed in float64 with "
            "numpy following PyTorch Conv1d/Linear/LSTM/GRU/LayerNorm/BatchNorm1d semantics (zero "
            "padding; LSTM gates i,f,g,o with state h then c; GRU gates r,z,n with state h; gelu "
            "exact erf form; softmax over channels per time step; layerNorm over the channels per "
            "time step with biased variance; batchNorm in eval mode from running statistics; "
            "meanPool/maxPool over time to [C][1]; causal conv1d pads only on the left with the "
            "previous (kernelSize-1)*dilation input frames, carried as state [channels][frames] "
            "oldest first, zeros at stream start), rounded to {OUTPUT_DIGITS} significant "
            "digits. Activations are [channels][time] row-major; tensors are row-major. Cases with "
            "\"sequence\" run its specs in order; cases with \"blocks\" run the blocks in order, "
            "each from the previous block's stateOut (carried input frames, stored exactly).")
    head = {"generator": GENERATOR, "numpy": np.__version__, "note": note}
    lines = [json.dumps(head)[:-1] + ',\n "cases": [']
    lines.append(",\n".join("  " + json.dumps(c, separators=(",", ":")) for c in cases))
    lines.append(" ]}\n")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines))
    json.loads(OUT.read_text())  # must stay valid JSON


def main():
    build()
    write()
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes, {len(cases)} cases)")
    for c in cases:
        kind = "+".join(s["type"] for s in c["sequence"]) if "sequence" in c else c["spec"]["type"]
        for step in c.get("blocks", [c]):
            i, o = step["input"], step["output"]
            extra = f" state {len(step['stateIn'])}->{len(step['stateOut'])}" if step["stateOut"] else ""
            print(f"  {c['name']:<36} {kind:<16} in [{i['channels']}][{i['time']}]"
                  f" -> out [{o['channels']}][{o['time']}]{extra}")
    for label, err in checks:
        print(f"  self-check {label:<52} max |diff| = {err:.2e}")


if __name__ == "__main__":
    main()
