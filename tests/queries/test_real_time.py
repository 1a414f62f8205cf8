"""Persistent queries in Spark's real-time mode (``metastore.query.real.time``), on the real
broker and the shared local[2] SparkSession: the node's own plan of a stateless query writes
each record while its batch still runs, its record checks are still observed at the batch's
end, with the offsets the processing log reads the failing rows again from, and a checkpoint
written in micro-batches goes on in real-time mode without reading a record twice. On the
suite's Spark node (``local[1]``, no slot to spare) a real-time query is accepted but stays
ERROR with the reason, and a stateful one is refused."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer

from metastore.kafka.settings import KafkaSettings
from metastore.planner.plan import compile_query
from metastore.planner.record_checks import observation
from metastore.planner.steps import QueryPlan
from metastore.runtime import job, progress_listener
from metastore.runtime.checkpoints import LocalDir
from metastore.runtime.processing_log import FailedRows
from metastore.runtime.record_errors import RecordErrors
from tests.queries.test_query_health import until_state
from tests.queries.test_query_nodes import ksql, queries
from tests.queries.test_spark_jobs import catalog, int_key, query_id, read_all, spark
from tests.support.kafka import unique
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually

__all__ = ["spark"]

BATCH_MS = 20_000
"""Long enough for the test to read a record back while the batch that reads it runs."""


def _script(source: str, sink: str) -> str:
    return f"""
        CREATE STREAM S (ID INT KEY, N STRING, KEEP BOOLEAN)
            WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE STREAM O WITH (KAFKA_TOPIC='{sink}') AS
            SELECT ID, CAST(N AS INT) AS X FROM S WHERE KEEP;"""


def _produce(producer: Producer, topic: str, rows: range) -> None:
    for i in rows:
        producer.produce(topic, key=int_key(i), value=json.dumps(
            {"N": "bad" if i % 5 == 0 else str(i), "KEEP": i % 2 == 1}))
    producer.flush(10)


def _ids(settings: KafkaSettings, topic: str, count: int, timeout: float = 60) -> list[int]:
    """The keys of the first ``count`` records of ``topic`` (fewer after ``timeout``)."""
    return sorted(struct.unpack(">i", k or b"")[0]
                  for k, _, _ in read_all(settings, topic, count, timeout=timeout))


def _filter(topic_factory: Callable[..., str]) -> tuple[QueryPlan, str, str]:
    """The node's plan of the script's filter over new topics, and its source and sink."""
    source, sink = topic_factory(), topic_factory()
    image = catalog(_script(source, sink))
    return compile_query(image.queries[query_id(image, "O")], image), source, sink


def _read(query: Any) -> int:
    return sum(int(progress["numInputRows"]) for progress in query.recentProgress)


def test_a_real_time_query_writes_each_record_before_its_batch_ends(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    plan, source, sink = _filter(topic_factory)
    assert plan.checked is not None
    producer = producer_factory()
    _produce(producer, source, range(10))
    errors, reported = RecordErrors(), []
    errors.report_to(reported.append)
    errors.started(plan.query_id, plan)
    query = job.start(spark, plan, LocalDir(tmp_path / "q"),
                      {"kafka.bootstrap.servers": kafka_bootstrap}, real_time_ms=BATCH_MS,
                      listener=progress_listener.listener(errors.hear))
    try:
        assert _ids(kafka_settings, sink, 5) == [1, 3, 5, 7, 9]
        eventually(lambda: _read(query) == 10, 60, "the first batch to end")
        [first] = [progress for progress in query.recentProgress if progress["numInputRows"]]
        assert first["observedMetrics"][observation(plan.checked)]["failed0"] == 1, \
            "the CAST of 'bad' at 5 (0 is not kept), observed at its batch's end"
        eventually(lambda: reported, 30, "the listener to hear the batch")
        [batch] = reported
        assert isinstance(batch, FailedRows)
        assert (batch.failed, batch.end) == ((1,), {0: 10}), "the processing log reads it again"
        _produce(producer, source, range(10, 20))
        assert _ids(kafka_settings, sink, 10)[5:] == [11, 13, 15, 17, 19]
        assert _read(query) == 10, "written while the batch reading them still ran"
    finally:
        query.stop()


def test_a_micro_batch_checkpoint_goes_on_in_real_time_mode(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    plan, source, sink = _filter(topic_factory)
    options = {"kafka.bootstrap.servers": kafka_bootstrap}
    producer = producer_factory()
    _produce(producer, source, range(6))
    checkpoint = LocalDir(tmp_path / "q")
    query = job.start(spark, plan, checkpoint, options)
    try:
        assert _ids(kafka_settings, sink, 3) == [1, 3, 5]
        eventually(lambda: _read(query) == 6, 60, "the micro-batches to commit")
    finally:
        query.stop()
    query = job.start(spark, plan, checkpoint, options, real_time_ms=BATCH_MS)
    try:
        _produce(producer, source, range(6, 10))
        assert _ids(kafka_settings, sink, 5) == [1, 3, 5, 7, 9]
        assert _ids(kafka_settings, sink, 6, timeout=5) == [1, 3, 5, 7, 9], "nothing twice"
    finally:
        query.stop()


def test_a_node_without_a_free_task_slot_keeps_a_real_time_query_in_error(
        spark_node: ServerProcess, topic_factory: Callable[..., str]) -> None:
    source = topic_factory()
    name = unique("RT").upper().replace("-", "_")
    ksql(spark_node, f"CREATE STREAM {name}_S (ID INT KEY, N STRING, KEEP BOOLEAN) WITH "
                     f"(KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');")
    response = httpx.post(f"{spark_node.url}/ksql", timeout=120, json={
        "ksql": f"CREATE TABLE {name}_C AS SELECT ID, COUNT(*) AS N FROM {name}_S GROUP BY ID;",
        "streamsProperties": {"metastore.query.real.time": "true"}})
    assert response.status_code == 400, response.text
    assert response.json()["message"].endswith("metastore.query.real.time runs stateless "
                                               "queries only, and this one aggregates.")
    response = httpx.post(f"{spark_node.url}/ksql", timeout=120, json={
        "ksql": f"CREATE STREAM {name}_O AS SELECT ID, N FROM {name}_S WHERE KEEP;",
        "streamsProperties": {"metastore.query.real.time": "true"}})
    assert response.status_code == 200, response.text
    [query_id] = [q for q in queries(spark_node) if q.startswith(f"CSAS_{name}_O")]
    seen = until_state(spark_node, query_id, "ERROR")
    assert seen["errorMessage"].startswith("Not enough task slots for real-time mode: "
                                           f"{query_id} reads 1 source partition"), seen
    [explained] = ksql(spark_node, f"EXPLAIN {query_id};")
    assert {e["type"] for e in explained["queryDescription"]["queryErrors"]} == {"USER"}
