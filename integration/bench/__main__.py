"""Run benchmarks and print their figures: ``python -m integration.bench [NAME ...] [--quick] [--json]``."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from integration.bench import (
    abuse,
    contention,
    decode,
    fetch_wait,
    idle_queries,
    interactive,
    latency,
    listener_cost,
    micro_batch,
    one_query,
    pipeline,
    plots,
    queries_per_node,
    realtime,
    reconcile,
    records,
    replay,
    shuffle_partitions,
    state_commits,
    stateful,
    streams_peer,
    streams_profile,
    suite_cpu,
    topic_size,
)

BENCHMARKS: dict[str, Callable[[bool], dict[str, Any]]] = {
    "latency": latency.run,
    "contention": contention.run,
    "replay": replay.run,
    "reconcile": reconcile.run,
    "records": records.run,
    "interactive": interactive.run,
    "pipeline": pipeline.run,
    "micro-batch": micro_batch.run,
    "stateful": stateful.run,
    "topic-size": topic_size.run,
    "state-commits": state_commits.run,
    "shuffle-partitions": shuffle_partitions.run,
    "pipeline-cluster": pipeline.run_on_cluster,
    "abuse": abuse.run,
    "decode": decode.run,
    "one-query": one_query.run,
    "idle-queries": idle_queries.run,
    "fetch-wait": fetch_wait.run,
    "listener-cost": listener_cost.run,
    "suite-cpu": suite_cpu.run,
    "streams-peer": streams_peer.run,
    "streams-profile": streams_profile.run,
    "realtime": realtime.run,
    "queries-per-node": queries_per_node.run,
}
ON_REQUEST = {"suite-cpu", "queries-per-node", "listener-cost", "topic-size", "streams-profile"}
"""Benchmarks run only when named: ``suite-cpu`` runs the whole test suite, ``queries-per-node``
adds queries to a node until it gives out, ``listener-cost`` measures a choice already made,
``topic-size`` fills six queries' sources with a million records each, ``streams-profile``
explains ``streams-peer``'s figures."""


def machine() -> str:
    import os

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def without_samples(value: Any) -> Any:
    """The results without raw samples (kept only for the plots)."""
    if isinstance(value, dict):
        return {k: without_samples(v) for k, v in value.items() if not k.startswith("samples")}
    if isinstance(value, list):
        return [without_samples(v) for v in value]
    return value


def flatten(prefix: str, value: Any) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [row for key, inner in value.items() for row in flatten(f"{prefix}.{key}", inner)]
    if isinstance(value, list):
        return [row for index, inner in enumerate(value)
                for row in flatten(f"{prefix}[{index}]", inner)]
    return [(prefix, str(value))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", choices=[[], *BENCHMARKS], default=[])
    parser.add_argument("--quick", action="store_true", help="smaller runs (a few minutes)")
    parser.add_argument("--json", action="store_true", help="one JSON object keyed by benchmark")
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR",
                        help="also write PNG plots into DIR (e.g. docs/bench)")
    args = parser.parse_args(argv)
    names = args.names or [name for name in BENCHMARKS if name not in ON_REQUEST]
    results: dict[str, Any] = {"machine": machine(), "quick": args.quick}
    for name in names:
        print(f"running {name}...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        results[name] = BENCHMARKS[name](args.quick)
        print(f"{name} done in {time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
    if args.plots is not None:
        for path in plots.write(results, args.plots):
            print(f"wrote {path}", file=sys.stderr)
    results = without_samples(results)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        rows = [row for name in names for row in flatten(name, results[name])]
        width = max(len(key) for key, _ in rows)
        print(f"machine: {results['machine']}")
        for key, value in rows:
            print(f"{key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
