"""`topic-size`: whether a stateful query's micro-batch costs the same with 10,000 or 1,000,000
records already in its source, for each stateful shape.

Each shape is planned as a node plans it today (``compile_query`` with its defaults) and run by
:func:`metastore.runtime.job.start` in one ``local[1]`` Spark session like a node's, over the
JSON records of :mod:`integration.bench.stateful` (KAFKA INT keys over 100 values, 100 ms apart
in event time; a record of the second stream, and one of the table on a topic of its own, for
every other one of the first):

- ``final``: ``COUNT(*)`` per key in ``WINDOW TUMBLING (SIZE 10 SECONDS) ... EMIT FINAL``;
- ``left_join``: a ``LEFT JOIN`` of the two streams ``WITHIN 1 SECOND`` without GRACE PERIOD;
- ``table_aggregation``: ``COUNT(*)`` of the table's rows by ``V % 10``;
- ``stream_table_stream``: a stream ``LEFT JOIN`` the table, then ``JOIN`` the second stream
  ``WITHIN 1 SECOND``: the table keyed state over the first stream's records (planner
  version 5 read every version of the table's rows in batch);
- ``session``: ``COUNT(*)`` per key in ``WINDOW SESSION (5 SECONDS)``, keyed sessions;
- ``final_session``: ``WINDOW SESSION (5 SECONDS) ... EMIT FINAL``: keyed sessions per source
  partition (planner version 5 replayed its stream).

Per shape: the sources fill to the first size and the query runs them (``availableNow``) on a
new checkpoint, then rounds of 1,000 records, each run on that checkpoint (a first one unmeasured,
to warm the query up); then the sources fill to the second size, the query catches up, and the
rounds again. A round's figure is the ``triggerExecution`` of its micro-batches with records
(:func:`integration.bench.stateful.run_until`). Printed per shape and size: the catch-up's
seconds and the rounds' median, and the ratio of the medians; a shape whose micro-batch reads
only its new records keeps the ratio near 1. A run (a catch-up or a round) that does not finish
within the budget is reported as such and the shape stops there.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from integration.bench.common import kafka
from integration.bench.stateful import STREAMS, accepted, plan_of, produce, run_until
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings

SOURCES = STREAMS + ("CREATE TABLE RIGHT_T (ID INT PRIMARY KEY, V INT) WITH (KAFKA_TOPIC="
                     "'{table}', VALUE_FORMAT='JSON');")
SHAPES = {  # the ones that may take longest last
    "final": "CREATE TABLE OUT WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, COUNT(*) AS N "
             "FROM LEFT_S WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY ID EMIT FINAL;",
    "left_join": "CREATE STREAM OUT WITH (KAFKA_TOPIC='{sink}') AS SELECT L.ID AS ID, L.V AS V, "
                 "R.V AS W FROM LEFT_S L LEFT JOIN RIGHT_S R WITHIN 1 SECOND ON L.ID = R.ID;",
    "table_aggregation": "CREATE TABLE OUT WITH (KAFKA_TOPIC='{sink}') AS SELECT V % 10 AS G, "
                         "COUNT(*) AS N FROM RIGHT_T GROUP BY V % 10;",
    "stream_table_stream": "CREATE STREAM OUT WITH (KAFKA_TOPIC='{sink}') AS SELECT L.ID AS ID, "
                           "L.V AS V, T.V AS T, R.V AS W FROM LEFT_S L LEFT JOIN RIGHT_T T "
                           "ON L.ID = T.ID JOIN RIGHT_S R WITHIN 1 SECOND ON L.ID = R.ID;",
    "session": "CREATE TABLE OUT WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, COUNT(*) AS N "
               "FROM LEFT_S WINDOW SESSION (5 SECONDS) GROUP BY ID;",
    "final_session": "CREATE TABLE OUT WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, COUNT(*) AS N "
                     "FROM LEFT_S WINDOW SESSION (5 SECONDS) GROUP BY ID EMIT FINAL;",
}
PER_ROUND = 1_000


def _plan(shape: str, topics: tuple[str, str, str], sink: str) -> Any:
    left, right, table = topics
    return plan_of(accepted(SOURCES.format(left=left, right=right, table=table)
                            + SHAPES[shape].format(sink=sink)), "OUT")


def _shape(spark: Any, bootstrap: str, shape: str, sizes: tuple[int, ...], rounds: int,
           root: Path, budget: float) -> dict[str, Any]:
    admin = Admin(KafkaSettings(bootstrap))
    stamp = f"{shape}-{time.time_ns()}"
    topics = (f"left-{stamp}", f"right-{stamp}", f"table-{stamp}")
    sink = f"out-{stamp}"
    for topic in (*topics, sink):
        admin.create(topic, 1)
    plan = _plan(shape, topics, sink)
    checkpoint, produced = root / shape, 0
    figures: dict[str, Any] = {}

    def run() -> float | None:
        return run_until(spark, plan, checkpoint, bootstrap, budget)

    for size in sizes:
        produce(bootstrap, topics, produced, size - produced)
        produced = size
        started = time.monotonic()
        if run() is None:
            figures[str(size)] = {"finished": False, "stopped_at": "catch-up"}
            break
        caught_up = time.monotonic() - started
        measured: list[float] = []
        for number in range(rounds + 1):  # the first warms the query up
            produce(bootstrap, topics, produced, PER_ROUND)
            produced += PER_ROUND
            seconds = run()
            if seconds is None:
                break
            measured += [seconds] if number else []
        if len(measured) < rounds:
            figures[str(size)] = {"finished": False, "stopped_at": "round",
                                  "catch_up_s": round(caught_up, 1)}
            break
        figures[str(size)] = {"finished": True, "catch_up_s": round(caught_up, 1),
                              "round_p50_ms": round(statistics.median(measured) * 1000),
                              "samples_ms": [round(sample * 1000) for sample in measured]}
    medians = [f["round_p50_ms"] for f in figures.values() if f["finished"]]
    if len(medians) == len(sizes) == 2:
        figures["ratio"] = round(medians[1] / max(medians[0], 1), 2)
    return figures


def measure(bootstrap: str, sizes: tuple[int, ...], rounds: int, budget: float,
            shapes: tuple[str, ...] = tuple(SHAPES)) -> dict[str, Any]:
    from metastore.spark.session import start_session

    directory = tempfile.TemporaryDirectory(prefix="metastore-bench-topic-size-")
    root = Path(directory.name)
    spark = start_session("local[1]", "bench-topic-size", root / "spark")
    try:
        results = {}
        for shape in shapes:
            results[shape] = _shape(spark, bootstrap, shape, sizes, rounds, root, budget)
            print(f"[topic-size] {shape}: {results[shape]}", file=sys.stderr, flush=True)
        return results
    finally:
        spark.stop()
        directory.cleanup()


def run(quick: bool) -> dict[str, Any]:
    sizes, rounds, budget = ((10_000, 100_000), 3, 600.0) if quick else (
        (10_000, 1_000_000), 5, 1_800.0)
    with kafka() as bootstrap:
        return {"sizes": list(sizes), "rounds": rounds, "records_per_round": PER_ROUND,
                "budget_s": budget, **measure(bootstrap, sizes, rounds, budget)}
