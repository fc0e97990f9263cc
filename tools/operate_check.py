"""What an operator's tools see of `earshot serve` and `earshot worker`, checked with the
libraries they use: the /metrics text parsed by PyPI `prometheus-client`'s parser (the one
Prometheus's Python clients and exporters use), and the service found over mDNS by PyPI
`zeroconf`'s ServiceBrowser (the library Home Assistant discovers Wyoming services with).

Starts `earshot serve --metrics tcp://127.0.0.1:0 --zeroconf NAME --log-format json` on a free
port, opens Wyoming clients and streams audio, scrapes, and checks: every family parses with a
type; earshot_streams per model equals the clients; earshot_steps_total equals the whole blocks
sent; the tick histogram's buckets are cumulative and end at +Inf = count; every stderr line is a
JSON object. Then browses _wyoming._tcp.local. until NAME is found with the service's port. With
--redis-server (a redis-server binary), starts one and a worker with --metrics and checks its
entries and health the same way. Exits 1 on any failure.

    python tools/operate_check.py --earshot .build/debug/earshot [--redis-server redis-server]
"""
import argparse
import json
import os
import pathlib
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import wave

from prometheus_client.parser import text_string_to_metric_families
from zeroconf import ServiceBrowser, ServiceListener, Zeroconf

root = pathlib.Path(__file__).resolve().parent.parent
failures = []


def check(ok, what):
    print(("  ok    " if ok else "  FAIL  ") + what)
    if not ok:
        failures.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


content_types = set()


def scrape(port):
    """The families of /metrics, by name, parsed by prometheus-client."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        content_type = r.headers["Content-Type"]
        if content_type not in content_types:
            content_types.add(content_type)
            check(content_type == "text/plain; version=0.0.4; charset=utf-8", "Content-Type is the text format 0.0.4")
        text = r.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(families, name, sample=None, **labels):
    family = families.get(name)
    if family is None:
        return None
    for s in family.samples:
        if s.name == (sample or name) and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


def health(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def check_histogram(families, name):
    family = families.get(name)
    check(family is not None and family.type == "histogram", f"{name} is a histogram")
    if family is None:
        return 0
    buckets = [(float(s.labels["le"]), s.value) for s in family.samples if s.name == name + "_bucket"]
    count = value(families, name, name + "_count")
    check(all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), f"{name}: buckets increasing and cumulative")
    check(buckets and buckets[-1][0] == float("inf") and buckets[-1][1] == count, f"{name}: +Inf bucket = count ({count})")
    return count


def wait_for(predicate, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.1)
    return predicate()


def json_lines(path, command):
    lines = pathlib.Path(path).read_text().splitlines()
    ok = bool(lines)
    for line in lines:
        try:
            o = json.loads(line)
            ok = ok and o.get("command") == command and o.get("level") in ("info", "warning", "error") and o.get("message") and o.get("time")
        except json.JSONDecodeError:
            ok = False
    check(ok, f"{command}: all {len(lines)} stderr lines are JSON objects with time, level, message, command")
    return [json.loads(line) for line in lines if line.startswith("{")]


def wyoming_event(sock, kind, data, payload=b""):
    d = json.dumps(data).encode()
    header = {"type": kind, "data_length": len(d)}
    if payload:
        header["payload_length"] = len(payload)
    sock.sendall(json.dumps(header).encode() + b"\n" + d + payload)


def serve(earshot, workdir):
    port, name = free_port(), f"earshot-check-{os.getpid()}-{random.randrange(10**6)}"
    log = pathlib.Path(workdir) / "serve.log"
    models = ["silero-vad", "okay-nabu"]
    proc = subprocess.Popen([earshot, "serve", "--uri", f"tcp://127.0.0.1:{port}", "--model", ",".join(models),
                             "--metrics", "tcp://127.0.0.1:0", "--zeroconf", name, "--verbose", "--log-format", "json"],
                            cwd=root, stderr=open(log, "w"), stdout=subprocess.DEVNULL)
    try:
        metrics = wait_for(lambda: next((int(o["metrics"].rsplit(":", 1)[1]) for o in map(json.loads, log.read_text().splitlines())
                                         if "metrics" in o), None), 60)
        check(metrics is not None, "serve: the metrics address is in the log")
        wait_for(lambda: "serving" in log.read_text(), 30)
        with wave.open(str(root / "AudioSamples/speech-noise-16k.wav")) as w:
            pcm = w.readframes(24000)
        samples = len(pcm) // 2
        fmt = {"rate": 16000, "width": 2, "channels": 1}
        clients = []
        for _ in range(3):
            c = socket.create_connection(("127.0.0.1", port))
            wyoming_event(c, "audio-start", fmt)
            wyoming_event(c, "audio-chunk", fmt, pcm)
            clients.append(c)
        chunk = {"silero-vad": 512, "okay-nabu": 480}  # their manifests' chunkSamples
        expected = sum(3 * (samples // chunk[m]) for m in models)
        families = wait_for(lambda: (lambda f: f if value(f, "earshot_steps", "earshot_steps_total") == expected else None)(scrape(metrics)), 10) or scrape(metrics)
        check(all(f.type for f in families.values()), f"serve: {len(families)} families parsed by prometheus-client")
        for m in models:
            check(value(families, "earshot_streams", model=m) == 3, f"serve: earshot_streams{{model={m}}} = 3 clients")
        check(value(families, "earshot_steps", "earshot_steps_total") == expected, f"serve: earshot_steps_total = {expected} blocks sent")
        check(value(families, "earshot_clients") == 3, "serve: earshot_clients = 3")
        check_histogram(families, "earshot_tick_seconds")
        check(value(families, "process_resident_memory_bytes") > 1e6, "serve: process_resident_memory_bytes")
        check(health(metrics) == (200, "ok\n"), "serve: /health 200 ok")

        class Found(ServiceListener):
            def __init__(self):
                self.info = None

            def add_service(self, zc, type_, found):
                if found == f"{name}._wyoming._tcp.local.":
                    self.info = zc.get_service_info(type_, found, timeout=3000)

            update_service = add_service

            def remove_service(self, zc, type_, found):
                pass

        zc = Zeroconf()
        listener = Found()
        ServiceBrowser(zc, "_wyoming._tcp.local.", listener)
        info = wait_for(lambda: listener.info, 10)
        check(info is not None, f"zeroconf: ServiceBrowser found {name}._wyoming._tcp.local.")
        if info:
            check(info.port == port, f"zeroconf: its port is the service's ({info.port})")
            check(len(info.parsed_addresses()) > 0, f"zeroconf: its addresses {info.parsed_addresses()}")
        zc.close()
        for c in clients:
            c.close()
    finally:
        proc.terminate()
        proc.wait(30)
    check(proc.returncode == 0, "serve: SIGTERM exits 0")
    json_lines(log, "serve")


def worker(earshot, redis_server, workdir):
    port = free_port()
    redis = subprocess.Popen([redis_server, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", workdir],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}"
    log = pathlib.Path(workdir) / "worker.log"
    proc = None
    try:
        wait_for(lambda: subprocess.run([earshot, "events", "--redis", url], capture_output=True).returncode == 0, 20)
        proc = subprocess.Popen([earshot, "worker", "--redis", url, "--name", "check", "--metrics", "tcp://127.0.0.1:0", "--log-format", "json"],
                                cwd=root, stderr=open(log, "w"), stdout=subprocess.DEVNULL)
        metrics = wait_for(lambda: next((int(o["metrics"].rsplit(":", 1)[1]) for o in map(json.loads, log.read_text().splitlines())
                                         if "metrics" in o), None), 60)
        check(metrics is not None, "worker: the metrics address is in the log")
        wav = root / "AudioSamples/speech-noise-16k.wav"
        subprocess.run([earshot, "publish", "--redis", url, "--source", "check-1", "--chunk-ms", "100", str(wav)], check=True, cwd=root,
                       capture_output=True)
        with wave.open(str(wav)) as w:
            entries = -(-w.getnframes() // 1600) + 1
        families = wait_for(lambda: (lambda f: f if value(f, "earshot_entries", "earshot_entries_total") == entries else None)(scrape(metrics)), 30) \
            or scrape(metrics)
        check(value(families, "earshot_entries", "earshot_entries_total") == entries, f"worker: earshot_entries_total = {entries} entries published")
        check(value(families, "earshot_sources_ended", "earshot_sources_ended_total") == 1, "worker: one source ended")
        check(check_histogram(families, "earshot_tick_seconds") >= 1, "worker: rounds stepped")
        check(health(metrics)[0] == 200, "worker: /health 200 while connected")
        redis.terminate()
        redis.wait(10)
        check(wait_for(lambda: health(metrics)[0] == 503, 15), "worker: /health 503 once Redis is gone")
    finally:
        if proc:
            proc.terminate()
            proc.wait(30)
        if redis.poll() is None:
            redis.terminate()
    json_lines(log, "worker")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--earshot", default=str(root / ".build/debug/earshot"))
    parser.add_argument("--redis-server", help="a redis-server binary: also check a worker")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        print("earshot serve --metrics --zeroconf --log-format json:")
        serve(args.earshot, workdir)
        if args.redis_server:
            print("earshot worker --metrics --log-format json:")
            worker(args.earshot, args.redis_server, workdir)
    if failures:
        print(f"{len(failures)} failed")
        sys.exit(1)
    print("all ok")


if __name__ == "__main__":
    main()
