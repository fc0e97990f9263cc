#!/usr/bin/env python3
"""TFLite's reference kernels on a microWakeWord .tflite, for Earshot's interop tests.

Usage: microwakeword_tflite_outputs.py MODEL.tflite FEATURES.int8

FEATURES.int8 holds the model's int8 input codes, step after step (each step the input
tensor's [1, 3, 40] codes, as microWakeWord's Quantize of TFLite Micro's front end gives them).
Runs ai-edge-litert's Interpreter with OpResolverType.BUILTIN_REF (TFLite's reference kernels,
the arithmetic TFLite Micro's kernels equal) over the steps, from a fresh interpreter, and prints
one JSON line: {"outputs": [the output's code at each step], "input": {"scale", "zero_point"},
"output": {"scale", "zero_point"}}.

The Swift tests run it (tools/.venv/bin/python, or $EARSHOT_PYTHON) on a model trained and
exported in the test, and compare the outputs with Earshot's on the same steps.
"""
import json
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType


def main():
    model, features = sys.argv[1], sys.argv[2]
    it = Interpreter(model_path=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    shape = [int(s) for s in inp["shape"]]
    size = int(np.prod(shape))
    codes = np.fromfile(features, dtype=np.int8)
    outputs = []
    for s in range(len(codes) // size):
        it.set_tensor(inp["index"], codes[s * size:(s + 1) * size].reshape(shape))
        it.invoke()
        outputs.append(int(it.get_tensor(out["index"]).reshape(-1)[0]))
    print(json.dumps({"outputs": outputs,
                      "input": {"scale": float(inp["quantization"][0]), "zero_point": int(inp["quantization"][1])},
                      "output": {"scale": float(out["quantization"][0]), "zero_point": int(out["quantization"][1])}}))


if __name__ == "__main__":
    main()
