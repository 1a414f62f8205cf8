"""A full node built in process by the composition root (metastore.server.build.build), as `metastore
server` builds it: the Spark catalog projection, the persistent-query runner and membership run
here, in the test's own process, against the real broker and a real SparkSession."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from fastapi.testclient import TestClient

from metastore.server.build import NodeServices, build
from metastore.server.http.streaming import DELIMITED
from metastore.server.settings import server_settings
from tests.queries.test_spark_jobs import read_all
from tests.support.kafka import unique
from tests.support.waiting import eventually

ALICE, BOB = ("alice", "alice-secret"), ("bob", "bob-secret")


def users_file(directory: Path) -> Path:
    path = directory / "users"
    path.write_text("".join(f"{user}:{password}\n" for user, password in (ALICE, BOB)))
    return path


def basic(user: tuple[str, str]) -> dict[str, str]:
    token = base64.b64encode(":".join(user).encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture
def services(kafka_bootstrap: str, tmp_path: Path, own_spark: None) -> Iterator[NodeServices]:
    built = build(server_settings({
        "bootstrap_servers": kafka_bootstrap, "service_id": unique("svc"), "node_id": "inproc",
        "listen": "127.0.0.1:0", "data_dir": str(tmp_path / "node"),
        "spark_catalog": "in-memory", "query_session_timeout_ms": 6000,
        "auth_file": str(users_file(tmp_path))}))
    built.start()
    try:
        assert built.node.replica.wait_ready(60)
        yield built
    finally:
        built.stop()


def test_a_node_built_in_process_projects_runs_queries_heartbeats_and_guards_push_queries(
        services: NodeServices, producer_factory: Callable[..., Producer]) -> None:
    source, sink = unique("src"), unique("even")
    client = TestClient(services.app, headers=basic(ALICE))
    response = client.post("/ksql", json={"ksql": f"""
        CREATE STREAM SRC (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON',
            PARTITIONS=1);
        CREATE STREAM EVEN WITH (KAFKA_TOPIC='{sink}') AS
            SELECT ID, V FROM SRC WHERE V % 2 = 0 EMIT CHANGES;"""})
    assert response.status_code == 200, response.text

    status = eventually(lambda: (s := client.get("/v1/metastore").json())["sparkInSync"] and s,
                        120, "the Spark catalog to match the image", interval=0.5)
    assert status["state"] == "READY"
    assert services.projection is not None and services.queries is not None

    [query_id] = services.node.replica.image.queries
    eventually(lambda: (services.queries.statuses().get(query_id) or None)
               and services.queries.statuses()[query_id].state == "RUNNING", 180,
               "the persistent query to run on this node", interval=0.5)
    producer = producer_factory()
    for value in range(4):
        producer.produce(source, key=value.to_bytes(4, "big"),
                         value=json.dumps({"V": value}).encode())
    producer.flush(10)
    records = read_all(services.node.settings, sink, 2, timeout=120)
    assert sorted(json.loads(value)["V"] for _key, value, _headers in records) == [0, 2]

    eventually(lambda: [b for b, alive in services.membership.nodes() if alive
                        and b.node_id == "inproc"
                        and b.queries.get(query_id, {}).get("state") == "RUNNING"], 30,
               "this node's heartbeat to report the query RUNNING", interval=0.5)
    [shown] = client.post("/ksql", json={"ksql": "SHOW QUERIES;"}).json()
    assert [(q["id"], q["state"]) for q in shown["queries"]] == [(query_id, "RUNNING")]

    # a push query is its owner's to close: to another user its id is unknown
    assert services.push_queries is not None
    with client.stream("POST", "/query-stream", json={"sql": "SELECT * FROM SRC EMIT CHANGES;"},
                       headers={"Accept": DELIMITED}) as stream:
        assert stream.status_code == 200
        query_id = json.loads(next(stream.iter_lines()))["queryId"]
        assert services.push_queries.running == 1
        other = TestClient(services.app, headers=basic(BOB)).post(
            "/close-query", json={"queryId": query_id})
        assert other.status_code == 400 and f"No query with id {query_id}" in other.text
        assert services.push_queries.running == 1
        mine = TestClient(services.app, headers=basic(ALICE)).post(
            "/close-query", json={"queryId": query_id})
        assert mine.status_code == 200
    assert services.push_queries.running == 0
