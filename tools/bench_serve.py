#!/usr/bin/env python3
"""`earshot bench serve` (N Wyoming clients over loopback against an `earshot serve` process) into
the serve section of BENCHMARKS.md, between its markers; tools/benchmarks.py runs it too.

    swift build -c release && python3 tools/bench_serve.py [--clients 100,500,1000,1250,1500,2000] [--seconds 60]
"""
import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from earshot_bench import earshot_json, replace_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- serve: tools/bench_serve.py -->", "<!-- /serve -->"


def section(result):
    rows = [
        "| clients | answers | latency p50 | latency p99 | server CPU | clients CPU | server RSS | late sends | errors |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    best = 0
    for r in result["results"]:
        ok = r["latency_p99_ms"] < 100 and r["errors"] == 0 and r["late_chunks"] <= r["clients"]
        if ok:
            best = max(best, r["clients"])
        rows.append(f"| {r['clients']} | {r['answers']} | {r['latency_p50_ms']:.1f} ms | {r['latency_p99_ms']:.1f} ms | "
                    f"{r['server_cpu_percent']:.0f} % | {r['clients_cpu_percent']:.0f} % | {r['server_rss_mb']:.0f} MB | "
                    f"{r['late_chunks']} | {r['errors']} |")
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        BEGIN,
        f"## earshot serve under load ({result['model']}, {when})",
        "",
        f"`earshot bench serve --seconds {result['seconds']:.0f}`: each client is a Wyoming connection over loopback sending "
        f"{result['chunk_ms']} ms chunks of 16-bit PCM at real-time pace (the bundled speech, each from its own offset); the "
        f"clients are one process on the same {result['cores']} cores as the server, at a higher priority "
        f"(nice {result['results'][0].get('clients_nice', 0)}) so that they send on time as other machines would: the server has the CPU "
        "they leave. Past 500 clients the server reads each client every 40 ms (`--read-batch-ms`). Latency: from sending the chunk "
        "whose arrival let an answer (voice-started / voice-stopped) be decided (the server names it in `chunk_timestamp`) "
        "to reading the answer. CPU in % of one core (200 % is the whole machine). Late sends: chunks the clients "
        "sent more than one chunk late (their own lag, or the server not reading them).",
        "",
        *rows,
        "",
        f"Largest count with p99 < 100 ms, no errors and late sends under one per client: **{best}** "
        "(goal: 2000; the clients' own CPU grows with them on the same two cores).",
        END,
    ])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", default="100,500,1000,1250,1500,2000")
    parser.add_argument("--seconds", default="60")
    args = parser.parse_args()
    result = earshot_json(str(ROOT / ".build/release/earshot"), ["bench", "serve", "--clients", args.clients, "--seconds", args.seconds], ROOT)
    new = section(result)
    replace_section(ROOT / "BENCHMARKS.md", BEGIN, END, new)
    print(new)


if __name__ == "__main__":
    main()
