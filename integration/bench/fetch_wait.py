"""`fetch-wait`: what a micro-batch of a few records costs by ``kafka.fetch.max.wait.ms`` of the
query's Kafka read (Kafka's 500 ms default, and the node's :data:`FETCH_MAX_WAIT_MS`).

One local[2] session like a node's runs a running projection (Kafka source over one partition,
Kafka sink, the default trigger) per setting; each round produces three records and waits until
the query has processed them (``processAllAvailable``). The figures are the medians, over the
rounds after the first (whose batch pays the JVM's warm-up), of that wait and of the batch's
``addBatch`` time, and the same for a query started anew each round with ``availableNow`` (as
`metastore test` runs each arrival).
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
    waits, batches = [], []
    try:
        for _ in range(rounds):
            produce(source)
            began = time.monotonic()
            query.processAllAvailable()
            waits.append(time.monotonic() - began)
            batches.append(query.lastProgress["durationMs"].get("addBatch", 0) / 1000)
    finally:
        query.stop()
    return {"processed_median_s": round(statistics.median(waits[1:]), 3),
            "add_batch_median_s": round(statistics.median(batches[1:]), 3)}


def _available_now(spark: SparkSession, bootstrap: str, wait_ms: str, rounds: int,
                   work: Path) -> dict[str, float]:
    source, sink = _topics(bootstrap)
    produce = _produce(bootstrap)
    runs = []
    for index in range(rounds):
        produce(source)
        began = time.monotonic()
        _start(spark, bootstrap, wait_ms, source, sink, work / f"now-{wait_ms}-{index}",
               True).awaitTermination()
        runs.append(time.monotonic() - began)
    return {"run_median_s": round(statistics.median(runs[1:]), 3)}


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
                                                          work)}
        finally:
            spark.stop()
    return results
