"""Abuse over HTTP: what a hostile or careless client sends is refused with a 4xx, the node's
memory stays bounded, nothing is written or lost, and a fresh node replays to the same catalog."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from metastore.core.limits import MAX_NESTING, MAX_TYPE_DEPTH
from metastore.log.topic import command_topic_name
from tests.support.servers import ServerProcess

ServerFactory = Callable[..., ServerProcess]


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc")


def stream(name: str, topic: str, columns: int = 1) -> str:
    extra = "".join(f", C{i} STRING" for i in range(columns))
    return (f"CREATE STREAM {name} (ID INT KEY{extra}) WITH (KAFKA_TOPIC='{topic}', "
            "VALUE_FORMAT='JSON', PARTITIONS=1);")


def abuses(service_id: str) -> list[tuple[str, str]]:
    """(what, ksql) pairs, each of which must be refused with a 400 and nothing written."""
    own_log = command_topic_name(service_id)
    chain = ["CREATE TYPE T1 AS ARRAY<INT>;"] + [
        f"CREATE TYPE T{i} AS ARRAY<T{i - 1}>;" for i in range(2, MAX_TYPE_DEPTH + 2)]
    return [
        ("own command log as a source", stream("STEAL", own_log)),
        ("another service's command log",
         "CREATE STREAM STEAL (ID INT KEY) WITH (KAFKA_TOPIC='_metastore-victim-command-log', "
         "VALUE_FORMAT='JSON');"),
        ("Kafka's offsets topic",
         "CREATE STREAM STEAL (ID INT KEY) WITH (KAFKA_TOPIC='__consumer_offsets', "
         "VALUE_FORMAT='JSON');"),
        ("a command log as a sink",
         f"CREATE STREAM SINK WITH (KAFKA_TOPIC='{own_log}') AS SELECT * FROM BASE;"),
        ("shared topic deleted", "DROP STREAM BASE DELETE TOPIC;"),
        ("nested custom types", "\n".join(chain)),
        ("deeply nested type", "CREATE TYPE DEEP AS " + "ARRAY<" * 5000 + "INT" + ">" * 5000 + ";"),
        ("deeply nested expression",
         "CREATE STREAM X AS SELECT ID, " + "(" * 100_000 + "1" + ")" * 100_000 + " FROM BASE;"),
        ("nested function calls",
         "CREATE STREAM X AS SELECT ID, " + "ABS(" * (MAX_NESTING + 1) + "1"
         + ")" * (MAX_NESTING + 1) + " AS A FROM BASE;"),
        ("very long expression",
         "CREATE STREAM X AS SELECT ID, " + " + ".join(["1"] * 20_000) + " AS A FROM BASE;"),
        ("NUL in a topic name",
         "CREATE STREAM X (ID INT KEY) WITH (KAFKA_TOPIC='a\x00b', VALUE_FORMAT='JSON', "
         "PARTITIONS=1);"),
        ("2^40 partitions",
         "CREATE STREAM X (ID INT KEY) WITH (KAFKA_TOPIC='huge', VALUE_FORMAT='JSON', "
         f"PARTITIONS={2 ** 40});"),
        ("40000 replicas",
         "CREATE STREAM X (ID INT KEY) WITH (KAFKA_TOPIC='wide', VALUE_FORMAT='JSON', "
         "PARTITIONS=1, REPLICAS=40000);"),
        ("more replicas than brokers",
         "CREATE STREAM X (ID INT KEY) WITH (KAFKA_TOPIC='wide', VALUE_FORMAT='JSON', "
         "PARTITIONS=1, REPLICAS=2);"),
        ("too many statements", "SHOW STREAMS;" * 1001),
        ("a response too large", "SHOW STREAMS EXTENDED;" * 1000),
        ("a very long name", stream("N" * 5000, "base")),
    ]


@pytest.mark.serial  # measures the machine: alone, after the parallel phase
def test_abuse_is_refused_bounded_and_loses_nothing(server_factory: ServerFactory) -> None:
    node = server_factory()
    client = node.http()
    setup = [stream("BASE", "base-" + node.service_id, columns=20),
             stream("ALSO", "base-" + node.service_id, columns=20)]
    setup += [stream(f"S{i}", f"t-{node.service_id}-{i}", columns=20) for i in range(40)]
    written = client.post("/ksql", json={"ksql": "\n".join(setup)})
    assert written.status_code == 200, written.text
    before = client.get("/v1/metastore").json()
    baseline_rss = peak_rss_mib(node.process.pid)

    for what, ksql in abuses(node.service_id):
        response = client.post("/ksql", json={"ksql": ksql})
        assert response.status_code == 400, (what, response.status_code, response.text[:500])
        body = response.json()
        assert body["error_code"] == 40001, (what, body)
        assert "Traceback" not in body["message"] and "Internal error" not in body["message"]

    first = client.post("/ksql", json={"ksql": stream("ONCE", "once"), "requestId": "abuse-id"})
    assert first.status_code == 200, first.text
    assert first.json()[0]["commandSequenceNumber"] == before["endOffset"], "an abuse was written"
    reused = client.post("/ksql", json={"ksql": stream("OTHER", "other"), "requestId": "abuse-id"})
    assert reused.status_code == 400 and "already used" in reused.json()["message"]

    nested_json = b'{"ksql": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = client.post("/ksql", content=nested_json,
                           headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and response.json()["error_code"] == 40000
    oversized = client.post("/ksql", json={"ksql": "SHOW STREAMS;" + " " * (2 << 20)})
    assert oversized.status_code == 413

    assert peak_rss_mib(node.process.pid) - baseline_rss < 300, "a request exhausted memory"
    after = client.get("/v1/metastore").json()
    assert after["state"] == "READY"
    assert client.get("/healthcheck").status_code == 200
    listed = client.post("/ksql", json={"ksql": "SHOW STREAMS;"}).json()[0]["streams"]
    assert {s["name"] for s in listed} == {"BASE", "ALSO", "ONCE", *(f"S{i}" for i in range(40))}

    fresh = server_factory(service_id=node.service_id, node_id="fresh", wait=True)
    replayed = fresh.http().get("/v1/metastore").json()
    assert replayed["state"] == "READY"
    assert replayed["imageFingerprint"] == after["imageFingerprint"]


def test_a_request_id_reused_over_http_names_the_first_request(
        server_factory: ServerFactory) -> None:
    node = server_factory()
    client = node.http()
    body = {"ksql": stream("FIRST", "first"), "requestId": "same"}
    first = client.post("/ksql", json=body).json()
    again = client.post("/ksql", content=json.dumps(body),
                        headers={"Content-Type": "application/json"}).json()
    assert again[0]["commandSequenceNumber"] == first[0]["commandSequenceNumber"]
    other = client.post("/ksql", json={**body, "ksql": stream("SECOND", "second")})
    assert other.status_code == 400
    assert "already used for another request" in other.json()["message"]
