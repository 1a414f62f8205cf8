"""`listener-cost`: what hearing a query's progress costs its records' latency.

A local[1] session like a node's runs the node's own plan of a filter CSAS (``job.start``) over a
topic of two partitions, three times: with no listener, with a PySpark listener that does
nothing (PySpark converts each progress for it field by field over Py4J), and with the node's
listener (:mod:`metastore.runtime.progress_listener`, which takes the progress' JSON) whose
hearer does nothing, after an unmeasured run that warms the JVM up, then again in the reverse
order. Each run first reads 5,000 records, then takes ``rounds`` rounds of 120 records at 20/s;
the figures are the p50 and p99, from each record's produce call to a consumer seeing its
result, of the last round (the JVM warms up over the first ones) and of all rounds.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from integration.bench.common import kafka, summary_ms
from integration.bench.pipeline import (
    LATENCY_KEYS,
    PARTITIONS,
    SinkWatcher,
    produce_backlog,
    produce_timed,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.listener import StreamingQueryListener

PROBES, RATE = 120, 20.0


def _field_by_field() -> StreamingQueryListener:
    """A PySpark listener that does nothing: PySpark still converts each progress for it."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class FieldByField(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
            """Nothing to do."""

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            """Nothing to do."""

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            """Nothing to do."""

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            """Nothing to do."""

    return FieldByField()


def _listener(kind: str) -> StreamingQueryListener | None:
    from metastore.runtime import progress_listener

    if kind == "pyspark_field_by_field":
        return _field_by_field()
    return progress_listener.listener(lambda _progress: None) if kind == "node_json" else None


def _filter_query(spark: SparkSession, bootstrap: str, kind: str) -> tuple[Any, str, str]:
    """The node's plan of a filter over a new topic, started; with its topic and sink."""
    from metastore.kafka.admin import Admin
    from metastore.kafka.settings import KafkaSettings
    from metastore.planner.plan import compile_query
    from metastore.runtime import job
    from metastore.runtime.checkpoints import LocalDir
    from metastore.testing.check import run_script

    source = f"bench-listener-{uuid.uuid4().hex[:6]}"
    admin = Admin(KafkaSettings(bootstrap))
    admin.create(source, PARTITIONS)
    admin.create(source + "-out", PARTITIONS)
    results, image = run_script(
        f"CREATE STREAM EVENTS (ID INT KEY, AMOUNT DOUBLE, KEEP BOOLEAN, SENT BIGINT) WITH "
        f"(KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');"
        f"CREATE STREAM OUT WITH (KAFKA_TOPIC='{source}-out') AS SELECT ID, AMOUNT, SENT FROM "
        "EVENTS WHERE KEEP;")
    assert all(result.ok for result in results), results
    plan = compile_query(next(iter(image.queries.values())), image)
    query = job.start(spark, plan, LocalDir(Path(tempfile.mkdtemp()) / "checkpoint"),
                      {"kafka.bootstrap.servers": bootstrap}, listener=_listener(kind))
    return query, source, source + "-out"


def _round(bootstrap: str, source: str, sink: str, number: int) -> list[float]:
    """Seconds from each of PROBES records' produce call to its result in ``sink``."""
    watcher = SinkWatcher(bootstrap, sink, from_end=True)
    try:
        keys = range(LATENCY_KEYS + number * PROBES, LATENCY_KEYS + (number + 1) * PROBES)
        sent = produce_timed(bootstrap, source, keys, RATE)
        watcher.wait(lambda: all(key in watcher.first_seen for key in keys), 120, "the probes")
        return [watcher.first_seen[key] - sent[key] for key in keys]
    finally:
        watcher.close()


def _latencies(spark: SparkSession, bootstrap: str, kind: str, rounds: int) -> dict[str, Any]:
    query, source, sink = _filter_query(spark, bootstrap, kind)
    try:
        produce_backlog(bootstrap, source, 5_000)
        time.sleep(10)
        samples = [_round(bootstrap, source, sink, number) for number in range(rounds)]
    finally:
        query.stop()
    return {"last_round": summary_ms(samples[-1]),
            "all_rounds": summary_ms([s for round_ in samples for s in round_])}


KINDS = ("none", "pyspark_field_by_field", "node_json")


def run(quick: bool) -> dict[str, Any]:
    """Each listener's latencies, in KINDS' order and then in the reverse one: a JVM keeps
    warming up, so whatever runs later gains."""
    from metastore.spark.session import start_session

    rounds = 2 if quick else 4
    with kafka() as bootstrap:
        spark = start_session("local[1]", "bench-listener-cost",
                              Path(tempfile.mkdtemp(prefix="bench-listener-")))
        try:
            _latencies(spark, bootstrap, "none", 2)  # the JVM's warm-up, not measured
            return {order: {kind: _latencies(spark, bootstrap, kind, rounds) for kind in kinds}
                    for order, kinds in (("in_order", KINDS), ("reversed", KINDS[::-1]))}
        finally:
            spark.stop()
