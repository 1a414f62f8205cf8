"""`stateful`: what a micro-batch of a stateful query costs once its stream is long, with the
query's state as keyed state in its checkpoint against the plan that replays a topic in batch at
every micro-batch (the plan a checkpoint from before keyed state keeps).

Three queries, each compiled twice from one catalog (``compile_query(..., table_state=...,
stream_state=...)``) and run by :func:`metastore.runtime.job.start` in one ``local[1]`` Spark
session like a node's, over JSON records with KAFKA INT keys over 100 values, 100 ms apart in
event time:

- ``session``: ``COUNT(*)`` per key in ``WINDOW SESSION (5 SECONDS)`` (a key's records are 10 s
  apart, so each is a session of its own);
- ``final``: ``COUNT(*)`` per key in ``WINDOW TUMBLING (SIZE 10 SECONDS) ... EMIT FINAL``;
- ``left_join``: ``LEFT JOIN`` of two such streams ``WITHIN 1 SECOND``, no GRACE PERIOD (one
  right record for every other left record).

First a backlog (200,000 records; 50,000 with ``--quick``), then rounds of 1,000 records;
after each the query runs what the topic holds (``availableNow``) on its checkpoint. A round's
figure is the ``triggerExecution`` of its micro-batches, summed (the query's start is not in
it). Printed per query and plan: the backlog's and the rounds' median: a plan whose micro-batch
reads only its new records costs the same whatever the backlog, one that replays the topic
pays for the backlog at every round.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from integration.bench.common import kafka
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from metastore.testing.check import run_script

KEYS = 100
STEP_MS = 100
STREAMS = ("CREATE STREAM LEFT_S (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{left}', "
           "VALUE_FORMAT='JSON');"
           "CREATE STREAM RIGHT_S (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{right}', "
           "VALUE_FORMAT='JSON');")
"""The two streams the stateful benchmarks' queries read, over the topics ``left``, ``right``."""
QUERIES = {
    "session": "CREATE TABLE OUT_{plan} WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, COUNT(*) AS N "
               "FROM LEFT_S WINDOW SESSION (5 SECONDS) GROUP BY ID;",
    "final": "CREATE TABLE OUT_{plan} WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, COUNT(*) AS N "
             "FROM LEFT_S WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY ID EMIT FINAL;",
    "left_join": "CREATE STREAM OUT_{plan} WITH (KAFKA_TOPIC='{sink}') AS SELECT L.ID AS ID, "
                 "L.V AS V, R.V AS W FROM LEFT_S L LEFT JOIN RIGHT_S R WITHIN 1 SECOND "
                 "ON L.ID = R.ID;",
}


def accepted(script: str) -> Any:
    """The catalog ``script`` makes, every statement of it accepted."""
    outcomes, image = run_script(script)
    assert all(o.ok for o in outcomes), [o.message for o in outcomes if not o.ok]
    return image


def plan_of(image: Any, sink: str, *, keyed: bool = True) -> Any:
    """The plan of the query writing ``sink`` in ``image``: as a node plans it, or, unless
    ``keyed``, as a checkpoint from before keyed state keeps it (the topics replayed)."""
    from metastore.planner.plan import compile_query

    source = image.source(sink)
    assert source is not None and source.query_id is not None
    return compile_query(image.queries[source.query_id], image, table_state=keyed,
                         stream_state=keyed)


def produce(bootstrap: str, topics: tuple[str, ...], first: int, count: int) -> None:
    """Records ``first`` to ``first + count - 1`` into the first topic, and every other one into
    each of the others, 50 ms later."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for index in range(first, first + count):
        key = (index % KEYS).to_bytes(4, "big")
        value = json.dumps({"V": index})
        sends = [(topics[0], index * STEP_MS)]
        if index % 2 == 0:
            sends += [(topic, index * STEP_MS + 50) for topic in topics[1:]]
        for topic, at in sends:
            while True:
                try:
                    producer.produce(topic, key=key, value=value, timestamp=at)
                    break
                except BufferError:  # the producer's queue is full: let it send
                    producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0, "every record was acknowledged"


def run_round(spark: Any, plan: Any, checkpoint: Path, bootstrap: str) -> float:
    """One availableNow run on the checkpoint: its micro-batches' triggerExecution, seconds."""
    seconds = run_until(spark, plan, checkpoint, bootstrap, 600)
    assert seconds is not None, "the run finished"
    return seconds


def run_until(spark: Any, plan: Any, checkpoint: Path, bootstrap: str,
              budget: float) -> float | None:
    """:func:`run_round`, or None when the run is still going after ``budget`` seconds (it is
    stopped; its checkpoint holds what it committed)."""
    from metastore.runtime import job
    from metastore.runtime.checkpoints import LocalDir

    streaming = job.start(spark, plan, LocalDir(checkpoint),
                          {"kafka.bootstrap.servers": bootstrap}, available_now=True)
    if not streaming.awaitTermination(round(budget)):
        streaming.stop()
        return None
    assert streaming.exception() is None, streaming.exception()
    millis: int = sum(p["durationMs"].get("triggerExecution", 0)
                      for p in streaming.recentProgress if p["numInputRows"] > 0)
    return millis / 1000


def measure(bootstrap: str, backlog: int, rounds: int, per_round: int) -> dict[str, Any]:
    from metastore.spark.session import start_session

    admin = Admin(KafkaSettings(bootstrap))
    directory = tempfile.TemporaryDirectory(prefix="metastore-bench-stateful-")
    root = Path(directory.name)
    spark = start_session("local[1]", "bench-stateful", root / "spark")
    results: dict[str, Any] = {}
    try:
        for name, statement in QUERIES.items():
            stamp = f"{name}-{time.time_ns()}"
            topics = (f"left-{stamp}", f"right-{stamp}")
            sinks = {plan: f"out-{plan}-{stamp}" for plan in ("keyed", "replay")}
            for topic in (*topics, *sinks.values()):
                admin.create(topic, 1)
            image = accepted(STREAMS.format(left=topics[0], right=topics[1]) + "".join(
                statement.format(plan=plan.upper(), sink=sink) for plan, sink in sinks.items()))
            plans = {plan: plan_of(image, f"OUT_{plan.upper()}", keyed=plan == "keyed")
                     for plan in sinks}
            seconds: dict[str, list[float]] = {plan: [] for plan in plans}
            sizes = [backlog, *([per_round] * rounds)]
            for number, size in enumerate(sizes):
                produce(bootstrap, topics, sum(sizes[:number]), size)
                for plan, compiled in plans.items():
                    seconds[plan].append(run_round(spark, compiled, root / name / plan, bootstrap))
            results[name] = {plan: {
                "backlog_ms": round(values[0] * 1000),
                "round_p50_ms": round(statistics.median(values[1:]) * 1000),
                "samples_ms": [round(v * 1000) for v in values]} for plan, values in seconds.items()}
    finally:
        spark.stop()
        directory.cleanup()
    return results


def run(quick: bool) -> dict[str, Any]:
    backlog, rounds, per_round = (50_000, 3, 1_000) if quick else (200_000, 5, 1_000)
    with kafka() as bootstrap:
        return {"backlog": backlog, "rounds": rounds, "records_per_round": per_round,
                **measure(bootstrap, backlog, rounds, per_round)}
