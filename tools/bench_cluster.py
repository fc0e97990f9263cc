#!/usr/bin/env python3
"""`earshot bench cluster` (a redis-server, W worker processes, N sources at real-time pace) into
the cluster section of BENCHMARKS.md, between its markers; tools/benchmarks.py runs it too.

    swift build -c release && python3 tools/bench_cluster.py [--sources 300,1000,2000] [--workers 1,2,4] [--seconds 15]
    python3 tools/bench_cluster.py --from-json run.json    # a saved `earshot bench cluster --json` line
"""
import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from earshot_bench import earshot_json, replace_section, snake_keys  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- cluster: tools/bench_cluster.py -->", "<!-- /cluster -->"


def section(result):
    rows = [
        "| sources | workers | entries/s sent | entries/s done | latency p50 | latency p99 | workers CPU | Redis CPU | backlog at end | kept up |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|:--:|",
    ]
    for r in result["results"]:
        rows.append(f"| {r['sources']} | {r['workers']} | {r['published_per_second']:.0f} | {r['processed_per_second']:.0f} | "
                    f"{r['latency_p50_ms']:.1f} ms | {r['latency_p99_ms']:.1f} ms | {r['workers_cpu_percent']:.0f} % | "
                    f"{r['redis_cpu_percent']:.0f} % | {r['backlog_entries']} | {'yes' if r['kept_up'] else 'no'} |")
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        BEGIN,
        f"## Workers on Redis Streams ({result['model']}, {when})",
        "",
        f"`earshot bench cluster --seconds {result['seconds']:.0f}`: a redis-server of its own, W `earshot worker` processes, "
        f"and N sources published by the bench at real-time pace, one {result['entry_ms']} ms entry of 16 kHz PCM per source "
        f"every {result['entry_ms']} ms, all on the same {result['cores']} cores (the publisher too). Latency: from an entry's "
        "publishing to its processing by a worker (its events appended); p99 is the worst second's. CPU in % of one core. "
        "Backlog: entries published but not yet read when the publishing stopped. Kept up: the publisher held the pace, the "
        "backlog is under 200 ms per source and p99 < 1 s.",
        "",
        *rows,
        END,
    ])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sources", default="300,1000,2000")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--seconds", default="15")
    parser.add_argument("--from-json")
    args = parser.parse_args()
    if args.from_json:
        result = snake_keys(json.loads(Path(args.from_json).read_text().strip().splitlines()[-1]))
    else:
        result = earshot_json(str(ROOT / ".build/release/earshot"),
                              ["bench", "cluster", "--sources", args.sources, "--workers", args.workers, "--seconds", args.seconds], ROOT)
    new = section(result)
    replace_section(ROOT / "BENCHMARKS.md", BEGIN, END, new)
    print(new)


if __name__ == "__main__":
    main()
