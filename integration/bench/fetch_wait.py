"""`fetch-wait`: what a micro-batch of a few records costs by ``kafka.fetch.max.wait.ms`` of the
query's Kafka read (Kafka's 500 ms default, and every query read's
:data:`metastore.spark.views.FETCH_MAX_WAIT_MS`).

One local[2] session like a node's runs a running projection (Kafka source over one partition,
Kafka sink, the default trigger) per setting; each round produces three records and waits until
the query has processed them (``processAllAvailable``). The figures are the medians, over the
rounds after the first (whose batch pays the JVM's warm-up), of that wait and of the last
micro-batch's ``addBatch`` time, and the same for a query started anew each round with
``availableNow`` on one checkpoint (as `metastore test` runs each arrival of a case).
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from integration.bench.common import kafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KAFKA_DEFAULT_MS = "500"


def _topics(bootstrap: str) -> tuple[str, str]:
    from metastore.kafka.admin import Admin
    from metastore.kafka.settings import KafkaSettings

    source = f"bench-fetch-wait-{uuid.uuid4().hex[:8]}"
    admin = Admin(KafkaSettings(bootstrap))
    admin.create(source, 1)
    admin.create(source + "-out", 1)
    return source, source + "-out"


def _produce(bootstrap: str) -> Callable[[str], None]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})

    def three_records(topic: str) -> None:
        for _ in range(3):
            producer.produce(topic, key=b"k", value=b'{"A":1}')
        producer.flush()
    return three_records


def _start(spark: SparkSession, bootstrap: str, wait_ms: str, source: str, sink: str,
           checkpoint: Path, available_now: bool) -> Any:
    frame = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest")
             .option("kafka.fetch.max.wait.ms", wait_ms).load())
    writer = (frame.selectExpr("key", "value").writeStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
              .option("checkpointLocation", str(checkpoint)))
    return (writer.trigger(availableNow=True) if available_now else writer).start()


def _running(spark: SparkSession, bootstrap: str, wait_ms: str, rounds: int,
             work: Path) -> dict[str, float]:
    source, sink = _topics(bootstrap)
    produce = _produce(bootstrap)
    query = _start(spark, bootstrap, wait_ms, source, sink, work / f"running-{wait_ms}", False)
    waits: list[float] = []
    batches: list[float] = []
    try:
        for _ in range(rounds):
            produce(source)
            began = time.monotonic()
            query.processAllAvailable()
            waits.append(time.monotonic() - began)
            batches.append(query.lastProgress["durationMs"].get("addBatch", 0) / 1000)
    finally:
        query.stop()
        _delete(bootstrap, source, sink)
    return {"processed_median_s": round(statistics.median(waits[1:]), 3),
            "add_batch_median_s": round(statistics.median(batches[1:]), 3)}


def _available_now(spark: SparkSession, bootstrap: str, wait_ms: str, rounds: int,
                   work: Path) -> dict[str, float]:
    source, sink = _topics(bootstrap)
    produce = _produce(bootstrap)
    runs = []
    try:
        for _ in range(rounds):  # one checkpoint: each run reads only the three new records
            produce(source)
            began = time.monotonic()
            _start(spark, bootstrap, wait_ms, source, sink, work / f"now-{wait_ms}",
                   True).awaitTermination()
            runs.append(time.monotonic() - began)
    finally:
        _delete(bootstrap, source, sink)
    return {"run_median_s": round(statistics.median(runs[1:]), 3)}


def _delete(bootstrap: str, *topics: str) -> None:
    from metastore.kafka.admin import Admin
    from metastore.kafka.settings import KafkaSettings

    admin = Admin(KafkaSettings(bootstrap))  # held until its deletions are done
    for future in admin.start_deleting(topics):
        future.result()


def _steady(spark: SparkSession, bootstrap: str, wait_ms: str, seconds: float,
            work: Path) -> dict[str, float]:
    """A running query under a steady trickle (50 records/s): its micro-batches per second and
    the driver JVM's share of a core."""
    from confluent_kafka import Producer

    from integration.bench.idle_queries import _cpu_seconds
    from metastore.spark.session import driver_process

    source, sink = _topics(bootstrap)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    query = _start(spark, bootstrap, wait_ms, source, sink, work / f"steady-{wait_ms}", False)
    pid = driver_process().pid
    try:
        time.sleep(5)
        first_batch, cpu_before, began = query.lastProgress, _cpu_seconds(pid), time.monotonic()
        while time.monotonic() - began < seconds:
            producer.produce(source, key=b"k", value=b'{"A":1}')
            producer.poll(0)
            time.sleep(0.02)
        producer.flush()
        elapsed = time.monotonic() - began
        cpu = _cpu_seconds(pid) - cpu_before
        batches = query.lastProgress["batchId"] - (first_batch["batchId"] if first_batch else 0)
    finally:
        query.stop()
        _delete(bootstrap, source, sink)
    return {"micro_batches_per_s": round(batches / elapsed, 2),
            "jvm_core_percent": round(100 * cpu / elapsed, 1)}


def run(quick: bool) -> dict[str, Any]:
    from metastore.spark.session import start_session
    from metastore.spark.views import FETCH_MAX_WAIT_MS

    rounds = 4 if quick else 11
    work = Path(tempfile.mkdtemp(prefix="bench-fetch-wait-"))
    results: dict[str, Any] = {}
    with kafka() as bootstrap:
        spark = start_session("local[2]", "bench-fetch-wait", work / "spark")
        spark.sparkContext.setLogLevel("OFF")
        try:
            for wait_ms in (KAFKA_DEFAULT_MS, FETCH_MAX_WAIT_MS):
                results[f"fetch_max_wait_{wait_ms}ms"] = {
                    "running_query": _running(spark, bootstrap, wait_ms, rounds, work),
                    "available_now_query": _available_now(spark, bootstrap, wait_ms, rounds,
                                                          work),
                    "steady_50_per_s": _steady(spark, bootstrap, wait_ms, 10 if quick else 30,
                                               work)}
        finally:
            spark.stop()
    return results
