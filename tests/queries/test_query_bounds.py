"""One query cannot take a node down: pull queries that would build a huge value or a huge answer
fail alone with the reason, and the node, its Spark and its other queries go on."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

import httpx
from confluent_kafka import Producer

from metastore.core.limits import MAX_PADDED_CHARS, MAX_SERIES_ELEMENTS, RequestLimits
from tests.support.kafka import unique
from tests.support.servers import ServerProcess


def ksql(server: ServerProcess, text: str) -> list[dict[str, Any]]:
    response = httpx.post(f"{server.url}/ksql", json={"ksql": text}, timeout=120)
    assert response.status_code == 200, response.text
    return list(response.json())


def pull(server: ServerProcess, text: str) -> httpx.Response:
    return httpx.post(f"{server.url}/query", json={"ksql": text}, timeout=120)


def rows(response: httpx.Response) -> list[list[Any]]:
    assert response.status_code == 200, response.text
    _header, *found = response.json()
    return [row["row"]["columns"] for row in found]


def a_stream(server: ServerProcess) -> str:
    name = unique("BOUND").upper().replace("-", "_")
    ksql(server, f"CREATE STREAM {name} (K INT KEY, V STRING) WITH (KAFKA_TOPIC='{name}', "
                 "VALUE_FORMAT='JSON', PARTITIONS=1);")
    return name


def assert_serving(server: ServerProcess, stream: str, expected: int) -> None:
    """The node still answers, healthy, with its Spark."""
    assert len(rows(pull(server, f"SELECT K FROM {stream};"))) == expected
    health = httpx.get(f"{server.url}/healthcheck", timeout=10)
    assert health.status_code == 200, health.text
    assert health.json()["details"]["spark"] == {"isHealthy": True}
    status = httpx.get(f"{server.url}/v1/metastore", timeout=10).json()
    assert status["state"] == "READY" and status["sparkInSync"] is True
    assert httpx.get(f"{server.url}/metrics", timeout=10).status_code == 200


def test_a_pull_query_building_a_huge_value_fails_alone_with_the_reason(
        spark_node: ServerProcess) -> None:
    stream = a_stream(spark_node)
    ksql(spark_node, f"INSERT INTO {stream} (K, V) VALUES (1, 'x');")
    pid = httpx.get(f"{spark_node.url}/v1/metastore", timeout=10).json()[
        "sparkApplication"]["driverPid"]

    series = pull(spark_node, f"SELECT EXPLODE(GENERATE_SERIES(1, 30000000)) FROM {stream};")
    assert series.status_code == 400, series.text
    assert series.json()["error_code"] == 40001
    assert (f"GENERATE_SERIES would produce 30000000 elements; one value may hold at most "
            f"{MAX_SERIES_ELEMENTS}") in series.json()["message"]
    padded = pull(spark_node, f"SELECT LEN(LPAD(V, 1500000000, 'y')) FROM {stream};")
    assert padded.status_code == 400, padded.text
    assert (f"LPAD would produce 1500000000 characters; one value may hold at most "
            f"{MAX_PADDED_CHARS}") in padded.json()["message"]

    assert rows(pull(spark_node, f"SELECT GENERATE_SERIES(1, 3) FROM {stream};")) == [[[1, 2, 3]]]
    assert rows(pull(spark_node, f"SELECT LEN(LPAD(V, 5, 'y')) FROM {stream};")) == [[5]]
    assert_serving(spark_node, stream, 1)
    assert httpx.get(f"{spark_node.url}/v1/metastore", timeout=10).json()[
        "sparkApplication"]["driverPid"] == pid, "the same Spark: it never died"


def test_an_answer_larger_than_a_response_may_be_is_refused_not_sent(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer]) -> None:
    stream = a_stream(spark_node)
    producer = producer_factory()
    value = json.dumps({"V": "v" * 10_000})
    total = RequestLimits().max_response_bytes // 10_000 + 100
    for i in range(total):
        producer.produce(stream, key=struct.pack(">i", i), value=value)
    assert producer.flush(30) == 0

    refused = pull(spark_node, f"SELECT * FROM {stream} LIMIT 1000000;")
    assert refused.status_code == 400, refused.text[:500]
    assert len(refused.content) < 1000
    assert (f"The answer is larger than {RequestLimits().max_response_bytes} bytes"
            in refused.json()["message"])
    assert len(rows(pull(spark_node, f"SELECT * FROM {stream} LIMIT 10;"))) == 10
    assert_serving(spark_node, stream, total)
