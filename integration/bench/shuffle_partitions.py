"""`shuffle-partitions`: a stateful query's shuffles and state in as many partitions as its
source has, as Kafka Streams runs a task per source partition, against a node's 4 (Spark's
session setting, which a checkpoint keeps).

Two counts over a stream of two partitions (``COUNT(*)`` by key, 1,000 keys, with a TUMBLING
window of an hour and without one), each run by :func:`metastore.runtime.job.start` in one
``local[1]`` session like a node's, with ``spark.sql.shuffle.partitions`` 2 and 4: a backlog of
50,000 records (10,000 with ``--quick``), then 8 rounds of 2,000 (4 with ``--quick``), each a
run of what the topic holds on the query's checkpoint. Both settings in each of two trials, the
second in the other order. A round's figure is its micro-batches' ``triggerExecution``;
printed: each query's and setting's median round.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from integration.bench.common import kafka
from integration.bench.stateful import accepted, plan_of, run_round
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings

PARTITIONS = 2
SETTINGS = (PARTITIONS, 4)
QUERIES = {
    "windowed_count": "CREATE TABLE OUT_C WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, COUNT(*) "
                      "AS N FROM EV WINDOW TUMBLING (SIZE 1 HOUR) GROUP BY ID;",
    "count": "CREATE TABLE OUT_C WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, COUNT(*) AS N "
             "FROM EV GROUP BY ID;",
}


def _produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for index in range(first, first + count):
        producer.produce(topic, key=(index % 1_000).to_bytes(4, "big"),
                         partition=index % PARTITIONS, value=json.dumps({"V": index}),
                         timestamp=1_700_000_000_000 + index)
        producer.poll(0)
    assert producer.flush(60) == 0, "every record was acknowledged"


def _rounds(spark: Any, bootstrap: str, root: Path, statement: str, sizes: list[int]
            ) -> list[float]:
    """Seconds of each round after the backlog."""
    stamp = str(time.time_ns())
    source, sink = f"in-{stamp}", f"out-{stamp}"
    for topic in (source, sink):
        Admin(KafkaSettings(bootstrap)).create(topic, PARTITIONS)
    plan = plan_of(accepted(f"CREATE STREAM EV (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{source}', "
                            "VALUE_FORMAT='JSON');" + statement.format(sink=sink)), "OUT_C")
    seconds = []
    for number, size in enumerate(sizes):
        _produce(bootstrap, source, sum(sizes[:number]), size)
        seconds.append(run_round(spark, plan, root / stamp, bootstrap))
    return seconds[1:]


@contextmanager
def _shuffles(partitions: int) -> Iterator[None]:
    """Each query session ``job.start`` makes meanwhile has ``partitions`` shuffle partitions."""
    from metastore.runtime import job

    made = job.query_session

    def session(spark: Any) -> Any:
        made_now = made(spark)
        made_now.conf.set("spark.sql.shuffle.partitions", str(partitions))
        return made_now

    job.query_session = session
    try:
        yield
    finally:
        job.query_session = made


def run(quick: bool) -> dict[str, Any]:
    from metastore.spark.session import start_session

    sizes = [10_000, *[2_000] * 4] if quick else [50_000, *[2_000] * 8]
    found: dict[str, dict[int, list[float]]] = {name: {} for name in QUERIES}
    with kafka() as bootstrap, tempfile.TemporaryDirectory(prefix="metastore-bench-") as root:
        spark = start_session("local[1]", "bench-shuffle-partitions", Path(root) / "spark")
        try:
            for trial in (SETTINGS, SETTINGS[::-1]):
                for shuffle in trial:
                    for name, statement in QUERIES.items():
                        print(f"shuffle-partitions: {name}, {shuffle}", file=sys.stderr,
                              flush=True)
                        with _shuffles(shuffle):
                            found[name].setdefault(shuffle, []).extend(
                                _rounds(spark, bootstrap, Path(root), statement, sizes))
        finally:
            spark.stop()
    return {"source_partitions": PARTITIONS, "backlog": sizes[0],
            "rounds_per_trial": len(sizes) - 1, "records_per_round": sizes[1],
            **{name: {f"shuffle_{shuffle}": {
                "round_p50_ms": round(statistics.median(values) * 1000),
                "samples_ms": [round(v * 1000) for v in values]}
                for shuffle, values in by.items()} for name, by in found.items()}}
