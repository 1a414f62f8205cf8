"""Pull queries answered from a table kept materialized on the node (real Kafka and Spark):
key lookups and range scans see every committed update and delete at once, answers equal
Spark's, and what a store cannot answer goes to Spark."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

import httpx
from confluent_kafka import Producer

from tests.queries.test_push_queries import node  # noqa: F401 - the module's node fixture
from tests.queries.test_query_nodes import ksql
from tests.spark.test_spark_catalog import wait_in_sync
from tests.support.kafka import unique
from tests.support.servers import ServerProcess, gauge
from tests.support.waiting import eventually


def pull(server: ServerProcess, text: str) -> list[list[Any]]:
    response = httpx.post(f"{server.url}/query", json={"ksql": text}, timeout=120)
    assert response.status_code == 200, response.text
    header, *rows = response.json()
    assert header["header"]["queryId"].startswith("query_")
    return [row["row"]["columns"] for row in rows]


def test_key_lookups_come_from_the_store_and_see_updates_and_deletes(
        node: ServerProcess, producer_factory: Callable[..., Producer]  # noqa: F811
) -> None:
    name = unique("T").upper().replace("-", "_")
    ksql(node, f"CREATE SOURCE TABLE {name} (ID INT PRIMARY KEY, V STRING, N BIGINT) WITH ("
               f"KAFKA_TOPIC='{name}', VALUE_FORMAT='JSON', PARTITIONS=2);")
    producer = producer_factory()

    def put(key: int, value: dict[str, Any] | None) -> None:
        producer.produce(name, key=struct.pack(">i", key),
                         value=None if value is None else json.dumps(value), partition=key % 2)
        producer.flush(10)

    for i in range(1, 7):
        put(i, {"V": f"v{i}", "N": i * 10})
    put(6, None)
    wait_in_sync(node)  # the table's Spark view exists, for the answers Spark gives
    def from_store() -> bool:  # the first queries may be Spark's, while the store fills
        before = gauge(node, "metastore_pull_queries_from_stores_total")
        assert pull(node, f"SELECT * FROM {name} WHERE ID = 3;") == [[3, "v3", 30]]
        return gauge(node, "metastore_pull_queries_from_stores_total") == before + 1

    eventually(from_store, 120, "the table's store", interval=0.5)
    assert gauge(node, "metastore_table_stores") >= 1
    before = gauge(node, "metastore_pull_queries_from_stores_total")
    put(3, {"V": "new", "N": 31})
    assert pull(node, f"SELECT V, ID FROM {name} WHERE ID = 3;") == [["new", 3]]
    assert sorted(pull(node, f"SELECT ID FROM {name} WHERE ID IN (1, 2, 9) OR ID = 5;")) == [
        [1], [2], [5]]
    assert sorted(pull(node, f"SELECT ID, N FROM {name};")) == [
        [1, 10], [2, 20], [3, 31], [4, 40], [5, 50]]
    assert sorted(pull(node, f"SELECT ID, V FROM {name} WHERE ID > 1 AND ID <= 3;")) == [
        [2, "v2"], [3, "new"]]
    put(4, None)
    assert pull(node, f"SELECT * FROM {name} WHERE ID = 4;") == []
    assert sorted(pull(node, f"SELECT ID FROM {name} WHERE ID BETWEEN 3 AND 9;")) == [[3], [5]]
    store_answers = gauge(node, "metastore_pull_queries_from_stores_total") - before
    assert store_answers == 6
    # an expression in the projection is Spark's to answer, with the same rows
    assert pull(node, f"SELECT ID, UCASE(V) AS U FROM {name} WHERE ID = 3;") == [[3, "NEW"]]
    assert gauge(node, "metastore_pull_queries_from_stores_total") - before == store_answers

    def store_lags() -> dict[str, Any] | None:  # the store, in /clusterStatus, caught up
        hosts = httpx.get(f"{node.url}/clusterStatus", timeout=10).json()["clusterStatus"]
        found = next((host["hostStoreLags"]["stateStoreLags"][f"{name}#materialized"]
                      for host in hosts.values()
                      if f"{name}#materialized" in host["hostStoreLags"]["stateStoreLags"]), None)
        measured = found is not None and sum(  # the lags are measured once a second
            v["endOffsetPosition"] for v in found["lagByPartition"].values()) == 9
        return found if measured else None

    lags = eventually(store_lags, 30, "the table's store's 9 records in /clusterStatus")
    assert lags["size"] == 2 and {p: (v["endOffsetPosition"], v["offsetLag"])
                                  for p, v in lags["lagByPartition"].items()} == {
        "0": (5, 0), "1": (4, 0)}, "9 records in its 2 partitions, every one read"


def test_a_windowed_table_answers_with_its_windows(
        node: ServerProcess, producer_factory: Callable[..., Producer]  # noqa: F811
) -> None:
    name = unique("W").upper().replace("-", "_")
    ksql(node, f"CREATE SOURCE TABLE {name} (A INT PRIMARY KEY, V INT) WITH (KAFKA_TOPIC="
               f"'{name}', VALUE_FORMAT='JSON', PARTITIONS=1, WINDOW_TYPE='TUMBLING', "
               "WINDOW_SIZE='1 MINUTE');")
    producer = producer_factory()
    for key, start, value in ((1, 60_000, 10), (1, 120_000, 11), (2, 60_000, 20), (1, 60_000, 12)):
        producer.produce(name, key=struct.pack(">iq", key, start), value=json.dumps({"V": value}))
    producer.flush(10)
    wait_in_sync(node)  # the table's Spark view exists
    response = httpx.post(f"{node.url}/query", timeout=120,
                          json={"ksql": f"SELECT * FROM {name} WHERE A = 1;"})
    assert response.status_code == 200, response.text
    header, *rows = response.json()
    assert header["header"]["schema"] == ("`A` INTEGER KEY, `WINDOWSTART` BIGINT KEY, "
                                          "`WINDOWEND` BIGINT KEY, `V` INTEGER")
    assert sorted(row["row"]["columns"] for row in rows) == [[1, 60_000, 120_000, 12],
                                                             [1, 120_000, 180_000, 11]]
    assert pull(node, f"SELECT V FROM {name} WHERE A = 1 AND WINDOWSTART > 60000;") == [[11]]
    before = gauge(node, "metastore_pull_queries_from_stores_total")
    producer.produce(name, key=struct.pack(">iq", 1, 180_000), value=json.dumps({"V": 13}))
    producer.flush(10)
    assert sorted(pull(node, f"SELECT WINDOWEND, V FROM {name} WHERE A = 1 AND WINDOWSTART "
                             ">= 120000;")) == [[180_000, 11], [240_000, 13]]
    assert gauge(node, "metastore_pull_queries_from_stores_total") > before, "a store answered"
