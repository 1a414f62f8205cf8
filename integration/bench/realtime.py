"""`realtime`: Spark 4.2's real-time mode against micro-batches, for a stateless query.

The filter of ``streams-peer`` two ways, in a session like a node's: written by hand in PySpark
(the Kafka source, ``KEEP`` read from the JSON value, the Kafka sink; in micro-batches also
with Spark's asynchronous progress tracking, ``asyncProgressTrackingEnabled``, which writes
the offset and commit logs beside the batches instead of between them), and as the node's own
plan of ``CREATE STREAM ... AS SELECT ID, AMOUNT, SENT FROM EVENTS WHERE KEEP`` (its decoding,
its checks, its sink's interceptor), started as a node starts it (``job.start``). Each runs with
the default micro-batch trigger and then with ``trigger(realTime=...)`` (the node's
``metastore.query.real.time``), on ``local[2]`` and ``local[1]``, over a topic of two
partitions, in a JVM of its own; on ``local[2]`` also with batches of 30 s. Latency: after 200
records that warm the query up, 7,000 records at 200/s (35 s, longer than a batch: a batch's
end and the next one's start are in it; 1,000 at 100/s with ``--quick``), each from its produce
call to a consumer seeing it in the sink. A real-time query holds a task per source partition
for its whole batch: with fewer cores than partitions some partitions are never read, which the ``seen``
count shows (a node refuses to start it there).
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from integration.bench.common import kafka, summary_ms
from integration.bench.pipeline import PARTITIONS, SinkWatcher, produce_timed
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from metastore.planner.plan import compile_query
from metastore.runtime import job
from metastore.runtime.checkpoints import LocalDir
from metastore.spark.session import discard_session, start_session
from metastore.testing.check import run_script

TRIGGERS: dict[str, int | None] = {"micro_batch": None, "real_time": 5_000,
                                   "real_time_30s": 30_000}
"""Micro-batches, and real-time batches of 5 s (Spark's shortest, the node's default) and 30 s."""
MASTERS = {"local[2]": tuple(TRIGGERS), "local[1]": ("micro_batch", "real_time")}
"""The triggers run on each master (on one core, real-time mode reads one partition of two)."""
WARM_UP = 200

Start = Callable[[Any, str, str, str, Path, int | None], Any]
"""Starts a filter from a source topic into a sink topic: (spark, bootstrap, source, sink,
checkpoint directory, real-time batch ms or None) -> the StreamingQuery."""


def _by_hand(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: Path,
             real_time_ms: int | None, async_progress: bool = False) -> Any:
    writer = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
              .option("startingOffsets", "earliest").load()
              .selectExpr("key", "value")
              .where("get_json_object(CAST(value AS STRING), '$.KEEP') = 'true'")
              .writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("topic", sink).option("checkpointLocation", str(checkpoint))
              .outputMode("update"))
    if async_progress:
        writer = writer.option("asyncProgressTrackingEnabled", "true")
    if real_time_ms is not None:
        writer = writer.trigger(realTime=f"{real_time_ms} milliseconds")
    return writer.start()


def _node_plan(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: Path,
               real_time_ms: int | None) -> Any:
    results, image = run_script(
        f"CREATE STREAM EVENTS (ID INT KEY, AMOUNT DOUBLE, KEEP BOOLEAN, SENT BIGINT) WITH "
        f"(KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON', PARTITIONS={PARTITIONS});"
        f"CREATE STREAM KEPT WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, AMOUNT, SENT FROM EVENTS "
        "WHERE KEEP;")
    assert all(result.ok for result in results), [r.message for r in results if not r.ok]
    [query] = image.queries.values()
    return job.start(spark, compile_query(query, image), LocalDir(checkpoint),
                     {"kafka.bootstrap.servers": bootstrap}, real_time_ms=real_time_ms)


QUERIES: dict[str, Start] = {"by_hand": _by_hand,
                             "by_hand_async_progress": partial(_by_hand, async_progress=True),
                             "node": _node_plan}
MICRO_BATCH_ONLY = {"by_hand_async_progress"}
"""Queries run only in micro-batches: Spark 4.2 refuses asynchronous progress tracking in
real-time mode."""


def _seen(watcher: SinkWatcher, sent: dict[int, float], timeout: float) -> dict[int, float]:
    deadline = time.monotonic() + timeout
    while any(key not in watcher.first_seen for key in sent) and time.monotonic() < deadline:
        time.sleep(0.1)
    return {key: watcher.first_seen[key] - at for key, at in sent.items()
            if key in watcher.first_seen}


def _latency(bootstrap: str, master: str, start: Start, real_time_ms: int | None,
             records: int, rate: float) -> dict[str, Any]:
    source, sink = (f"realtime-{name}-{uuid.uuid4().hex[:6]}" for name in ("in", "out"))
    admin = Admin(KafkaSettings(bootstrap))
    for topic in (source, sink):
        admin.create(topic, PARTITIONS)
    with tempfile.TemporaryDirectory(prefix="metastore-bench-realtime-") as root:
        spark = start_session(master, "realtime-bench", Path(root))
        try:
            query = start(spark, bootstrap, source, sink, Path(root) / "checkpoint",
                          real_time_ms)
            time.sleep(10)  # its first batch planned and its tasks started
            watcher = SinkWatcher(bootstrap, sink)
            try:
                _seen(watcher, produce_timed(bootstrap, source, range(WARM_UP), rate), 30)
                keys = range(WARM_UP, WARM_UP + records)
                seen = _seen(watcher, produce_timed(bootstrap, source, keys, rate), 40)
            finally:
                watcher.close()
            query.stop()
        finally:
            spark.stop()
            discard_session()  # the next run's master in a JVM of its own
    return {"seen": len(seen), "sent": records,
            "latency": summary_ms(list(seen.values())) if seen else None}


def run(quick: bool) -> dict[str, Any]:
    records, rate = (1_000, 100.0) if quick else (7_000, 200.0)
    results: dict[str, Any] = {"records": records, "rate_per_s": rate, "warm_up": WARM_UP,
                               "source_partitions": PARTITIONS,
                               "real_time_batch_ms": {name: ms for name, ms in TRIGGERS.items()
                                                      if ms is not None}}
    with kafka() as bootstrap:
        for master, triggers in MASTERS.items():
            for query, start in QUERIES.items():
                for name in triggers:
                    if query in MICRO_BATCH_ONLY and TRIGGERS[name] is not None:
                        continue
                    print(f"realtime: {query}, {name} on {master}", file=sys.stderr, flush=True)
                    results[f"{query}_{name}_{master}"] = _latency(
                        bootstrap, master, start, TRIGGERS[name], records, rate)
    return results
