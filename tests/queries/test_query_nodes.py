"""Persistent queries on node processes with Spark: state, owner and lag, TERMINATE, DROP, and
the query group (nodes without Spark never join it)."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from metastore.catalog import commands as cmd
from metastore.kafka.settings import KafkaSettings
from metastore.log.record import decode
from metastore.log.topic import command_topic_name
from metastore.runtime.assignment import group_name
from tests.queries.test_spark_jobs import read_all
from tests.spark.test_spark_catalog import wait_in_sync
from tests.support.kafka import unique
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually

ServerFactory = Callable[..., ServerProcess]


def ksql(server: ServerProcess, text: str, status: int = 200) -> list[dict[str, Any]]:
    response = httpx.post(f"{server.url}/ksql", json={"ksql": text}, timeout=120)
    assert response.status_code == status, response.text
    return list(response.json()) if status == 200 else [response.json()]


def queries(server: ServerProcess) -> dict[str, dict[str, Any]]:
    [entity] = ksql(server, "SHOW QUERIES;")
    return {q["id"]: q for q in entity["queries"]}


def test_queries_run_report_state_owner_lag_and_stop_on_terminate_and_drop(
        server_factory: ServerFactory, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        producer_factory: Callable[..., Producer], tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    node = server_factory("--query-checkpoint-dir", str(checkpoints),
                          "--query-session-timeout-ms", "6000", spark=True)
    plain = server_factory(service_id=node.service_id, node_id="no-spark")
    source, sink, counts = unique("src"), unique("sink"), unique("counts")
    ksql(node, f"""
        CREATE STREAM SRC (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON',
            PARTITIONS=1);
        CREATE STREAM EVEN WITH (KAFKA_TOPIC='{sink}') AS
            SELECT ID, V FROM SRC WHERE V % 2 = 0 EMIT CHANGES;
        CREATE TABLE COUNTS WITH (KAFKA_TOPIC='{counts}') AS
            SELECT V, COUNT(*) AS N FROM SRC GROUP BY V EMIT CHANGES;""")
    ksql(node, f"CREATE STREAM OTHER (ID INT KEY, W INT) WITH (KAFKA_TOPIC='{unique('other')}', "
               "VALUE_FORMAT='JSON', PARTITIONS=1);")
    rejected = ksql(plain, "CREATE TABLE PAIRS AS SELECT A.ID, COUNT(*) AS N FROM SRC A FULL "
                           "JOIN OTHER B WITHIN 1 MINUTE GRACE PERIOD 1 MINUTE ON A.ID = B.ID "
                           "GROUP BY A.ID EMIT CHANGES;", status=400)
    assert "aggregating an outer stream-stream join with a GRACE PERIOD" in rejected[0]["message"]

    producer = producer_factory()
    for i in range(10):
        producer.produce(source, key=struct.pack(">i", i), value=json.dumps({"V": i}))
    producer.flush(10)
    records = read_all(kafka_settings, sink, 5)
    assert sorted(json.loads(v or b"")["V"] for _, v, _ in records) == [0, 2, 4, 6, 8]

    def settled() -> dict[str, dict[str, Any]] | None:
        seen = queries(plain)  # a node without Spark reports what the owner publishes
        ok = len(seen) == 2 and all(q["state"] == "RUNNING" and q["ownerNode"] == "node-1"
                                    and q["lag"] == 0 for q in seen.values())
        return seen if ok else None

    seen = eventually(settled, 60, "both queries RUNNING on node-1 with no lag", interval=0.5)
    even_id = next(q for q in seen if q.startswith("CSAS_EVEN_"))
    counts_id = next(q for q in seen if q.startswith("CTAS_COUNTS_"))
    assert seen[even_id]["sinkKafkaTopics"] == [sink]
    [described] = ksql(node, "DESCRIBE SRC;")
    read_by = {q["id"]: q for q in described["sourceDescription"]["readQueries"]}
    assert read_by[even_id]["state"] == "RUNNING" and read_by[even_id]["ownerNode"] == "node-1"

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    futures = admin.describe_consumer_groups([group_name(node.service_id)])
    group = futures[group_name(node.service_id)].result(30)
    assert [m.client_id for m in group.members] == ["node-1-queries"], "no-spark never joins"

    [scope] = (checkpoints / node.service_id).iterdir()  # one command log incarnation
    assert (scope / even_id).is_dir() and (scope / counts_id).is_dir()
    ksql(plain, f"TERMINATE {even_id};")
    eventually(lambda: not (scope / even_id).exists(), 60, "the checkpoint to be deleted", interval=0.5)
    for i in range(10, 14):
        producer.produce(source, key=struct.pack(">i", i), value=json.dumps({"V": i}))
    producer.flush(10)
    eventually(lambda: queries(node)[counts_id]["lag"] == 0, 60, "COUNTS to process the new rows",
               interval=0.5)
    assert len(read_all(kafka_settings, sink, 6, timeout=5)) == 5, "terminated: no new output"
    assert list(queries(node)) == [counts_id]

    ksql(node, "DROP TABLE COUNTS;")
    eventually(lambda: not (scope / counts_id).exists(), 60, "DROP to stop the CTAS query", interval=0.5)
    assert queries(plain) == {}


def test_a_pull_query_right_after_its_table_waits_for_the_spark_catalog(
        server_factory: ServerFactory, producer_factory: Callable[..., Producer]) -> None:
    """Whatever the node answered 200 it can serve: with the Spark catalog projection a second
    behind the log, a pull query sent at once waits for the table's view instead of
    failing on a table Spark does not know yet."""
    node = server_factory("--fault-injection", "slow-projection:1", spark=True)
    wait_in_sync(node)
    name = unique("PROJ").upper().replace("-", "_")
    ksql(node, f"CREATE STREAM {name}_RAW (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{name}', "
               "VALUE_FORMAT='JSON', PARTITIONS=1);")
    producer = producer_factory()
    producer.produce(name, key=struct.pack(">i", 1), value=json.dumps({"V": "one"}))
    producer.flush(10)
    ksql(node, f"CREATE SOURCE TABLE {name} (ID INT PRIMARY KEY, V STRING) WITH ("
               f"KAFKA_TOPIC='{name}', VALUE_FORMAT='JSON');")
    response = httpx.post(f"{node.url}/query", json={"ksql": f"SELECT * FROM {name};"},
                          timeout=60)
    assert response.status_code == 200, response.text
    _header, *rows = response.json()
    assert [row["row"]["columns"] for row in rows] == [[1, "one"]]


def test_a_plan_written_by_a_newer_release_stops_that_query_alone_with_the_reason(
        server_factory: ServerFactory, kafka_settings: KafkaSettings,
        producer_factory: Callable[..., Producer]) -> None:
    """A stored plan naming a node version this release does not know: its query is ERROR,
    saying so, and the node's other queries run on."""
    node = server_factory(spark=True)
    source, sink = unique("src"), unique("kept")
    ksql(node, f"""
        CREATE STREAM SRC (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON',
            PARTITIONS=1);
        CREATE STREAM KEPT WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, V FROM SRC WHERE V > 0;""")
    log_topic = command_topic_name(node.service_id)
    [kept] = [r for r in read_all(kafka_settings, log_topic, 2) if r[0] == b"stream/KEPT/create"]
    record = decode(kept[1])
    command = record.command
    assert isinstance(command, cmd.CreateAsSelectCommand)
    document = json.loads(command.plan)
    document["versions"]["Step"] = 99  # as a newer release would write it
    future = replace(command, source=replace(command.source, name="FUTURE",
                                             topic=unique("future")),
                     plan=cmd.canonical_json(document))
    key, value = replace(record, command=future, statement="CREATE STREAM FUTURE AS ...",
                         request_id="from-a-newer-release").encode()
    writer = producer_factory(transactional_id=f"{node.service_id}-newer-release")
    writer.init_transactions(30)
    writer.begin_transaction()
    writer.produce(log_topic, key=key, value=value)
    writer.commit_transaction(30)

    def settled() -> dict[str, dict[str, Any]] | None:
        seen = queries(node)
        states = {q["sinks"][0]: q["state"] for q in seen.values()}
        return seen if states == {"KEPT": "RUNNING", "FUTURE": "ERROR"} else None

    seen = eventually(settled, 90, "KEPT RUNNING and FUTURE in ERROR", interval=0.5)
    [failed] = [q for q in seen.values() if q["sinks"] == ["FUTURE"]]
    assert "stored plan uses Step v99, which this node does not know" in failed["errorMessage"]
