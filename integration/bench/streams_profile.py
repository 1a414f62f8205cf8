"""`streams-profile`: where each engine's core goes in `streams-peer`'s throughput runs.

The same topic, queries and engines as :mod:`integration.bench.streams_peer`, at one core
(the engine's JVM pinned to it, the harness on the other), each engine warmed up as there.
Each query's run over the topic is recorded by Java Flight Recorder in the engine's JVM (the
peer's, or the Spark driver a node starts, which runs its queries' tasks on ``local[1]``) and
summed up by :mod:`integration.bench.jvm_profile` (the recordings are kept, in a folder the
run prints): the JVM's CPU seconds, those of its JIT compilers and garbage collector, and the
share of its CPU samples in each part of a record's path (JSON decoding and encoding, the Kafka
read and write, state, Spark's rows and expressions, the engine's own machinery). Each JVM has
recorded once before its warm-up (:func:`~integration.bench.jvm_profile.prime`). The figures
say what bounds the node's records/s against Kafka Streams'.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from integration.bench import jvm_profile
from integration.bench.common import kafka
from integration.bench.pipeline import Start, throughput
from integration.bench.streams_peer import (
    ENGINES,
    QUERIES,
    _sizes,
    _topics,
    affinity,
    warm_up,
)

JVM_MARKERS = {"kafka_streams": "StreamsPeer", "metastore": "org.apache.spark.deploy.SparkSubmit"}
"""What the command line of each engine's JVM holds."""


def _profiled(bootstrap: str, source: str, query: str, start: Start, backlog: int, pid: int,
              folder: Path) -> dict[str, Any]:
    before = jvm_profile.cpu_seconds(pid)
    with jvm_profile.recording(pid, folder / f"{pid}-{query}.jfr") as path:
        seconds, stop, watcher = throughput(bootstrap, source, query, start, backlog, 0)
    cpu = jvm_profile.cpu_between(before, jvm_profile.cpu_seconds(pid))
    stop()
    watcher.close()
    return {"seconds": round(seconds, 2), "records_per_s": round(backlog / seconds), **cpu,
            **jvm_profile.shares(path)}


def run(quick: bool) -> dict[str, Any]:
    backlog, warm_records, _, _ = _sizes(quick)
    jfr = tempfile.mkdtemp(prefix="metastore-bench-jfr-")
    results: dict[str, Any] = {"records": backlog, "warm_up_records": warm_records, "cores": 1,
                               "recordings": jfr}
    print(f"streams-profile: recordings kept in {jfr} (open them with JDK Mission Control or "
          "`jfr print`)", file=sys.stderr, flush=True)
    with kafka() as bootstrap:
        source, warm, users = _topics(bootstrap, backlog, warm_records, 0)
        cpus = sorted(os.sched_getaffinity(0))
        for engine, starter in ENGINES.items():
            with contextlib.ExitStack() as stack:
                with affinity({cpus[0]}):
                    start = stack.enter_context(starter(bootstrap, 1, users))
                stack.enter_context(affinity(set(cpus[1:]) or set(cpus)))
                print(f"streams-profile: {engine} warm-up", file=sys.stderr, flush=True)
                [pid] = jvm_profile.jvms_below(os.getpid(), JVM_MARKERS[engine])
                jvm_profile.prime(pid, Path(jfr))
                warm_up(bootstrap, warm, warm_records, start)
                results[engine] = {}
                for query in QUERIES:
                    print(f"streams-profile: {engine} {query}", file=sys.stderr, flush=True)
                    results[engine][query] = _profiled(bootstrap, source, query, start, backlog,
                                                       pid, Path(jfr))
    return results
