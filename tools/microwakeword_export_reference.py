#!/usr/bin/env python3
"""What other runtimes make of `earshot export --format microwakeword`, for Earshot's tests.

For each microWakeWord package shipped in Models/ (okay-nabu, hey-jarvis, alexa, hey-mycroft):

1. exports it with the given earshot binary into a temporary folder (NAME.tflite, NAME.json);
2. runs TFLite's reference kernels (ai-edge-litert, OpResolverType.BUILTIN_REF) over the
   features of Tests/EarshotTests/Goldens/microwakeword (tools/microwakeword_reference.py), three
   frames a step, on the exported file and on the published one: the outputs must be equal, step
   for step from step 0 (the script stops otherwise);
3. finds the smallest tensor arena tflite-micro's interpreter (PyPI tflite-micro, x86-64, 64-bit
   pointers: an upper bound of a 32-bit device's need) allocates and runs the exported model in
   (bisection to the byte), and the same for the published file;
4. loads the exported pair with pymicro-wakeword (MicroWakeWord.from_config on NAME.json) and
   runs it over the recording's features, as pymicro-wakeword's own front end makes them: the
   detections must be those of the published pair.

Writes Tests/EarshotTests/Goldens/microwakeword-export/NAME.json: the exported file's sha256 and
size, the reference outputs, the arena figures, the manifest as exported and the detections.
Tests never run this; they check that `earshot export` still writes these exact bytes.

Run from the repository root after building earshot:
  tools/.venv/bin/python tools/microwakeword_export_reference.py [.build/debug/earshot]
"""
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from pymicro_wakeword import MicroWakeWord

ROOT = Path(__file__).resolve().parent.parent
GOLDENS = ROOT / "Tests/EarshotTests/Goldens/microwakeword"
OUT = ROOT / "Tests/EarshotTests/Goldens/microwakeword-export"
MODELS = ["okay_nabu", "hey_jarvis", "alexa", "hey_mycroft"]


def reference(path: Path, frames: np.ndarray):
    it = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    scale, zero = inp["quantization"]
    stride = int(inp["shape"][1])
    outputs = []
    for s in range(len(frames) // stride):
        q = np.round(frames[s * stride:(s + 1) * stride].reshape(1, stride, 40) / scale + zero).astype(np.int8)
        it.set_tensor(inp["index"], q)
        it.invoke()
        outputs.append(int(it.get_tensor(out["index"]).reshape(-1)[0]))
    return outputs


PROBE = """
import sys
import numpy as np
from tflite_micro.python.tflite_micro import runtime
it = runtime.Interpreter.from_file(sys.argv[1], arena_size=int(sys.argv[2]))
it.set_input(np.zeros(tuple(it.get_input_details(0)["shape"]), np.int8), 0)
it.invoke()
"""


def runs_in(path: Path, arena: int) -> bool:
    """Whether tflite-micro allocates and runs the model in `arena` bytes (in a process of its
    own: at some sizes a failed allocation crashes the interpreter instead of raising)."""
    return subprocess.run([sys.executable, "-c", PROBE, str(path), str(arena)], capture_output=True).returncode == 0


def minimum_arena(path: Path) -> int:
    low, high = 1024, 1 << 20
    assert runs_in(path, high)
    while high - low > 1:
        mid = (low + high) // 2
        if runs_in(path, mid):
            high = mid
        else:
            low = mid
    return high


def pymicro_detections(config: Path, frames: np.ndarray):
    mww = MicroWakeWord.from_config(config)
    steps = []
    for i in range(len(frames)):
        if mww.process_streaming(frames[i].reshape(1, 40).astype(np.float32)):
            steps.append(i)
    return steps


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / ".build/debug/earshot")
    frames = np.fromfile(GOLDENS / "features.f32", dtype="<f4").reshape(-1, 40).astype(np.float64)
    published = Path(ROOT / "Models/sources/microwakeword")
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        for name in MODELS:
            tflite = Path(d) / f"{name}.tflite"
            subprocess.run([binary, "export", str(ROOT / "Models" / name.replace("_", "-")), "--format", "microwakeword", "-o", str(tflite)],
                           check=True, stdout=subprocess.DEVNULL)
            exported = reference(tflite, frames)
            original = reference(published / f"{name}.tflite", frames)
            assert exported == original, f"{name}: the exported file's outputs differ from the published file's"
            golden = json.loads((GOLDENS / f"{name}.json").read_text())
            assert exported == golden["reference"], f"{name}: the reference outputs are not the goldens'"
            manifest = json.loads((Path(d) / f"{name}.json").read_text())
            record = {
                "generator": "tools/microwakeword_export_reference.py",
                "model": f"{name}.tflite",
                "sha256": hashlib.sha256(tflite.read_bytes()).hexdigest(),
                "bytes": tflite.stat().st_size,
                "reference": exported,
                "reference_equals_published": True,
                "tflite_micro_minimum_arena": minimum_arena(tflite),
                "published_tflite_micro_minimum_arena": minimum_arena(published / f"{name}.tflite"),
                "manifest": manifest,
                "pymicro_wakeword_detections": pymicro_detections(Path(d) / f"{name}.json", frames),
                "published_pymicro_wakeword_detections": pymicro_detections(published / f"{name}.json", frames),
            }
            assert record["pymicro_wakeword_detections"] == record["published_pymicro_wakeword_detections"]
            (OUT / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
            print(f"{name}: {len(exported)} steps equal to the published file's; {record['bytes']} bytes; arena written "
                  f"{manifest['micro']['tensor_arena_size']}, tflite-micro needs {record['tflite_micro_minimum_arena']} "
                  f"(published file: {record['published_tflite_micro_minimum_arena']}); pymicro-wakeword detects at feature frames "
                  f"{record['pymicro_wakeword_detections']}")


if __name__ == "__main__":
    main()
