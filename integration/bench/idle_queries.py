"""`idle-queries`: what a streaming query costs a node while its topic gets no records, by
``spark.sql.streaming.pollingDelay`` (how long a query that found nothing waits to ask again).

Each delay runs in a process of its own (one Spark driver JVM per process): a local[2] session
like a node's runs N queries over one empty two-partition topic (Kafka source, ``noop`` sink,
the default trigger, as a node's persistent queries); after a warm-up, the figure is the driver
JVM's CPU time over the measured seconds (``/proc/<pid>/stat``), in percent of one core, and the
same with no query at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from integration.bench.common import cpu_seconds, kafka

DELAYS = ("10ms", "100ms", "500ms")
"""Spark's default, the node's, and a slower one."""


def measure(bootstrap: str, delay: str, queries: int, seconds: float) -> dict[str, Any]:
    """The driver JVM's share of a core with ``queries`` idle queries polling every ``delay``."""
    from metastore.kafka.admin import Admin
    from metastore.kafka.settings import KafkaSettings
    from metastore.spark.session import driver_process, start_session

    work = Path(tempfile.mkdtemp(prefix="bench-idle-"))
    spark = start_session("local[2]", "bench-idle-queries", work,
                          conf={"spark.sql.streaming.pollingDelay": delay})
    topic = f"bench-idle-{uuid.uuid4().hex[:8]}"
    admin = Admin(KafkaSettings(bootstrap))
    admin.create(topic, 2)
    started = []
    try:
        for index in range(queries):
            frame = (spark.readStream.format("kafka")
                     .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                     .load())
            started.append(frame.writeStream.format("noop")
                           .option("checkpointLocation", str(work / f"checkpoint-{index}"))
                           .start())
        time.sleep(10)  # the queries' first micro-batches and the JIT's warm-up
        process = driver_process()
        before, began = cpu_seconds(process.pid), time.monotonic()
        time.sleep(seconds)
        share = (cpu_seconds(process.pid) - before) / (time.monotonic() - began)
    finally:
        for query in started:
            query.stop()
        spark.stop()
        admin.delete(topic)
    return {"queries": queries, "polling_delay": delay, "jvm_core_percent": round(100 * share, 1)}


def _in_own_process(bootstrap: str, delay: str, queries: int, seconds: float) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "integration.bench.idle_queries", json.dumps(
        {"bootstrap": bootstrap, "delay": delay, "queries": queries, "seconds": seconds})],
        capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def run(quick: bool) -> dict[str, Any]:
    queries, seconds = (5, 15) if quick else (10, 30)
    with kafka() as bootstrap:
        results: dict[str, Any] = {"no_query": _in_own_process(bootstrap, DELAYS[0], 0, seconds)}
        for delay in DELAYS:
            figures = _in_own_process(bootstrap, delay, queries, seconds)
            figures["per_query_core_percent"] = round(
                (figures["jvm_core_percent"] - results["no_query"]["jvm_core_percent"])
                / queries, 2)
            results[f"polling_{delay}"] = figures
    return results


if __name__ == "__main__":
    arguments = json.loads(sys.argv[1])
    print(json.dumps(measure(arguments["bootstrap"], arguments["delay"], arguments["queries"],
                             arguments["seconds"])))
