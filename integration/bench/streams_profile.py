"""`streams-profile`: where each engine's core goes in `streams-peer`'s throughput runs.

The same topic, queries and engines as :mod:`integration.bench.streams_peer`, at one core
(the engine's JVM pinned to it, the harness on the other), each engine warmed up as there.
Each query's run over the topic is recorded by Java Flight Recorder in the engine's JVM (the
peer's, or the Spark driver a node starts, which runs its queries' tasks on ``local[1]``) and
summed up by :mod:`integration.bench.jvm_profile` (the recordings and their folded stacks are
kept, in a folder the run prints): the JVM's CPU seconds, those of its JIT compilers and garbage
collector, and the share of its CPU samples in each part of a record's path (JSON decoding and
encoding, the Kafka read and write, state, Spark's planning and scheduling, its rows and
expressions, the engine's own machinery). Each JVM has
recorded once before its warm-up (:func:`~integration.bench.jvm_profile.prime`). The figures
say what bounds the node's records/s against Kafka Streams'.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from integration.bench import jvm_profile
from integration.bench.common import jvms_below, kafka
from integration.bench.pipeline import throughput, warm_up
from integration.bench.streams_peer import ENGINES, QUERIES, pinned, sizes, topics

JVM_MARKERS = {"kafka_streams": "StreamsPeer", "metastore": "org.apache.spark.deploy.SparkSubmit"}
"""What the command line of each engine's JVM holds."""


def _engine(bootstrap: str, engine: str, found: tuple[str, str, str], records: tuple[int, int],
            folder: Path) -> dict[str, Any]:
    """One engine at one core: warmed up, then each query's run over ``found``'s source topic
    recorded (``records``: the source's and the warm-up topic's)."""
    source, warm, users = found
    backlog, warm_records = records
    figures: dict[str, Any] = {}
    with pinned(ENGINES[engine](bootstrap, 1, users), 1) as start:
        print(f"streams-profile: {engine} warm-up", file=sys.stderr, flush=True)
        found = jvms_below(os.getpid(), JVM_MARKERS[engine])
        if len(found) != 1:
            raise RuntimeError(f"{engine}: {len(found)} JVMs hold {JVM_MARKERS[engine]!r} in "
                               "their command line, where one was started")
        [pid] = found
        jvm_profile.prime(pid, folder)
        warm_up(bootstrap, warm, warm_records, start, QUERIES)
        for query in QUERIES:
            print(f"streams-profile: {engine} {query}", file=sys.stderr, flush=True)
            with jvm_profile.recording(pid, folder / f"{engine}-{query}.jfr") as path:
                before = jvm_profile.cpu_seconds(pid)
                with throughput(bootstrap, source, query, start, backlog, 0) as (seconds, _):
                    cpu = jvm_profile.cpu_between(before, jvm_profile.cpu_seconds(pid))
            figures[query] = {"seconds": round(seconds, 2),
                              "records_per_s": round(backlog / seconds), **cpu,
                              **jvm_profile.shares(path)}
    return figures


def run(quick: bool) -> dict[str, Any]:
    backlog, warm_records, _, _ = sizes(quick)
    folder = Path(tempfile.mkdtemp(prefix="metastore-bench-jfr-"))
    results: dict[str, Any] = {"records": backlog, "warm_up_records": warm_records, "cores": 1,
                               "recordings": str(folder)}
    print(f"streams-profile: recordings and folded stacks kept in {folder}", file=sys.stderr,
          flush=True)
    with kafka() as bootstrap:
        found = topics(bootstrap, backlog, warm_records, 0)
        for engine in ENGINES:
            results[engine] = _engine(bootstrap, engine, found, (backlog, warm_records), folder)
    return results
