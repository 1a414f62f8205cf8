"""A persistent query that fails, on the suite's Spark node: its checkpoint's commit log cannot
be written (a disk that refuses writes), so its next micro-batch fails after writing its
records. The query goes to ERROR, with ksqlDB's QueryError in EXPLAIN (UNKNOWN: a failing disk
is no cause the user can fix in a statement) and its failure in ``/metrics``; once the disk
takes writes again, the query starts after its backoff and every record is written."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer

from metastore.kafka.settings import KafkaSettings
from tests.queries.test_query_nodes import ksql, queries
from tests.queries.test_skipped_records import earliest
from tests.queries.test_spark_jobs import read_all
from tests.support.kafka import unique
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually


def test_a_failing_query_is_error_with_its_cause_and_starts_again_after_its_backoff(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer],
        kafka_settings: KafkaSettings) -> None:
    name = unique("HEALTH").upper().replace("-", "_")
    source, sink = name.lower(), f"{name.lower()}-out"
    ksql(spark_node, f"CREATE STREAM {name} (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{source}', "
                     "VALUE_FORMAT='JSON', PARTITIONS=1);")
    producer = producer_factory()

    def send(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.produce(source, key=struct.pack(">i", i), value=json.dumps({"V": i}))
        assert producer.flush(30) == 0

    send(0, 3)
    [created] = earliest(spark_node, f"CREATE STREAM {name}_OUT WITH (KAFKA_TOPIC='{sink}') AS "
                                     f"SELECT ID, V FROM {name};")
    query_id = created["commandStatus"]["queryId"]
    assert len(read_all(kafka_settings, sink, 3)) == 3
    [commits] = (spark_node.log.parent / "data").glob(f"query-checkpoints/**/{query_id}/commits")
    aside = commits.with_name("commits.held")
    commits.rename(aside)
    commits.write_text("a disk that refuses writes\n")
    try:
        send(3, 3)
        seen = _until_state(spark_node, query_id, "ERROR")
        [explained] = ksql(spark_node, f"EXPLAIN {query_id};")
        errors = explained["queryDescription"]["queryErrors"]
        assert errors and errors[-1]["type"] == "UNKNOWN", errors
        assert errors[-1]["errorMessage"] == seen["errorMessage"]
        assert isinstance(errors[-1]["timestamp"], int)
        metrics = httpx.get(f"{spark_node.url}/metrics", timeout=10).text
        assert f'metastore_query_up{{query_id="{query_id}"}} 0.0' in metrics
    finally:
        _give_back(commits, aside)
    _until_state(spark_node, query_id, "RUNNING", timeout=120)
    send(6, 3)
    assert {json.loads(v or b"")["V"] for _, v, _ in read_all(kafka_settings, sink, 9)} == set(
        range(9)), "every record written, those of the failed micro-batch again"


def _until_state(server: ServerProcess, query_id: str, state: str,
                 timeout: float = 60) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def reached() -> bool:
        seen.update(queries(server)[query_id])
        return seen["state"] == state

    eventually(reached, timeout, lambda: f"{query_id} to be {state}: {seen}", interval=0.5)
    return seen


def _give_back(commits: Path, aside: Path) -> None:
    commits.unlink()
    aside.replace(commits)
