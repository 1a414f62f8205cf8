"""The local Schema Registry (Apicurio's Confluent-compatible API, built from Maven Central) and
the node's use of it, on the real registry and the real broker: its client, ASSERT SCHEMA with its
timeout, and an outage that fails a request saying why, with nothing written."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from metastore.catalog.exceptions import AssertionFailedError
from metastore.dev.schema_registry import LocalSchemaRegistry, SchemaRegistryState, answers
from metastore.schema_registry.client import SchemaRegistryClient
from metastore.schema_registry.exceptions import (
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
)
from metastore.server.http.error_codes import classify
from metastore.server.node import Node
from tests.broker.test_command_log import committed_values, create_stream
from tests.support.kafka import unique

NodeFactory = Callable[..., Node]
AVRO = json.dumps({"type": "record", "name": "KsqlDataSourceSchema",
                   "namespace": "io.confluent.ksql.avro_schemas",
                   "fields": [{"name": "V", "type": ["null", "string"], "default": None}]})


def test_the_client_registers_and_reads_each_schema_type(client: SchemaRegistryClient) -> None:
    subject = unique("orders") + "-value"
    avro_id = client.register(subject, AVRO)
    assert client.register(subject, AVRO) == avro_id  # the same schema: the same id
    latest = client.latest(subject)
    assert latest is not None and latest.schema_id == avro_id and latest.version == 1
    assert json.loads(latest.schema) == json.loads(AVRO) and latest.schema_type == "AVRO"
    protobuf_id = client.register(unique("p") + "-value",
                                  'syntax = "proto3"; message Row { int32 ID = 1; }', "PROTOBUF")
    json_id = client.register(unique("j") + "-value", json.dumps(
        {"type": "object", "properties": {"ID": {"type": "integer"}}}), "JSON")
    by_id = client.by_id(protobuf_id)
    assert by_id is not None and by_id.schema_type == "PROTOBUF" and "message Row" in by_id.schema
    assert len({avro_id, protobuf_id, json_id}) == 3
    assert (subject, 1) in client.versions_of(avro_id)
    assert subject in client.subjects()
    assert client.latest(unique("unknown")) is None
    assert client.by_id(987_654) is None and client.versions_of(987_654) == []


def test_assert_schema_asks_the_registry(node_factory: NodeFactory,
                                         client: SchemaRegistryClient) -> None:
    subject = unique("asserted") + "-value"
    schema_id = client.register(subject, AVRO)
    node = node_factory(schema_registry_url=client.url)
    for statement in (f"ASSERT SCHEMA SUBJECT '{subject}';", f"ASSERT SCHEMA ID {schema_id};",
                      f"ASSERT SCHEMA SUBJECT '{subject}' ID {schema_id};",
                      "ASSERT NOT EXISTS SCHEMA SUBJECT 'no-such-subject';",
                      "ASSERT NOT EXISTS SCHEMA ID 987654;",
                      f"ASSERT NOT EXISTS SCHEMA SUBJECT 'other' ID {schema_id};"):
        [entity] = node.execute(statement)
        assert entity["@type"] == "assert_schema", (statement, entity)
    with pytest.raises(AssertionFailedError,
                       match="Schema with subject name no-such-subject does not exist"):
        node.execute("ASSERT SCHEMA SUBJECT 'no-such-subject';")
    with pytest.raises(AssertionFailedError, match=f"Schema with subject name {subject} id "
                                                   f"{schema_id} exists"):
        node.execute(f"ASSERT NOT EXISTS SCHEMA SUBJECT '{subject}' ID {schema_id};")
    with pytest.raises(AssertionFailedError, match="Schema with id 987654 does not exist"):
        node.execute("ASSERT SCHEMA ID 987654;")


@pytest.mark.serial  # measures the machine: alone, after the parallel phase
def test_assert_schema_waits_until_its_timeout(node_factory: NodeFactory,
                                                client: SchemaRegistryClient) -> None:
    subject = unique("later") + "-value"
    node = node_factory(schema_registry_url=client.url)
    registering = threading.Timer(1.0, client.register, args=(subject, AVRO))
    registering.start()
    started = time.monotonic()
    [entity] = node.execute(f"ASSERT SCHEMA SUBJECT '{subject}' TIMEOUT 10 SECONDS;")
    registering.join()
    assert entity["exists"] is True and 0.9 < time.monotonic() - started < 5
    started = time.monotonic()
    with pytest.raises(AssertionFailedError, match=f"Schema with subject name {subject} exists"):
        node.execute(f"ASSERT NOT EXISTS SCHEMA SUBJECT '{subject}';")  # ksqlDB's default: 1 s
    assert 0.9 < time.monotonic() - started < 3


@pytest.mark.serial  # measures the machine: alone, after the parallel phase
def test_a_request_that_writes_waits_for_its_schema_before_the_write_lock(
        node_factory: NodeFactory, client: SchemaRegistryClient) -> None:
    subject = unique("awaited") + "-value"
    node = node_factory(schema_registry_url=client.url)
    node.execute(create_stream("FIRST", unique("t")))  # a new writer's first transaction waits
    answers_: list[list[dict[str, object]]] = []  # for the coordinator: not what is measured
    waiting = threading.Thread(target=lambda: answers_.append(node.execute(
        f"ASSERT SCHEMA SUBJECT '{subject}' TIMEOUT 10 SECONDS; "
        + create_stream("AWAITED", unique("t")))))
    waiting.start()
    time.sleep(0.3)
    started = time.monotonic()
    node.execute(create_stream("MEANWHILE", unique("t")))  # the write lock is free
    assert time.monotonic() - started < 2 and waiting.is_alive()
    client.register(subject, AVRO)
    waiting.join(10)
    [entities] = answers_
    assert [e["@type"] for e in entities] == ["assert_schema", "currentStatus"]
    assert node.replica.image.source("AWAITED") is not None


def test_only_an_unknown_subject_or_id_counts_as_absent(registry: SchemaRegistryState,
                                                         node_factory: NodeFactory) -> None:
    root = registry.url.removesuffix("/apis/ccompat/v7")
    wrong = SchemaRegistryClient(root)  # the registry, without its Confluent API's path
    try:
        with pytest.raises(SchemaRegistryError) as refused:
            wrong.latest("anything")
        assert not isinstance(refused.value, SchemaRegistryUnavailableError)
    finally:
        wrong.close()
    node = node_factory(schema_registry_url=root)
    with pytest.raises(AssertionFailedError, match="Cannot check schema existence"):
        node.execute("ASSERT NOT EXISTS SCHEMA SUBJECT 'anything' TIMEOUT 0 SECONDS;")


def test_credentials_in_the_url_are_sent_and_never_shown() -> None:
    client = SchemaRegistryClient("http://bob:s3cret@127.0.0.1:1/registry", timeout=1.0)
    try:
        assert client.url == "http://127.0.0.1:1/registry"
        with pytest.raises(SchemaRegistryUnavailableError) as failure:
            client.subjects()
        assert "s3cret" not in str(failure.value) and "bob" not in str(failure.value)
    finally:
        client.close()


def test_without_a_registry_assert_schema_fails_saying_why(node_factory: NodeFactory) -> None:
    node = node_factory()
    with pytest.raises(AssertionFailedError, match=r"Cannot check schema existence: .*"
                                                   r"--schema-registry-url") as failure:
        node.execute("ASSERT SCHEMA SUBJECT 'x';")
    assert classify(failure.value).http_status == 417


def test_a_registry_outage_fails_the_assertion_and_writes_nothing(
        node_factory: NodeFactory, consumer_factory: Callable[..., Consumer],
        tmp_path: Path) -> None:
    launcher = LocalSchemaRegistry(tmp_path / "outage")
    state = launcher.start(progress=None)
    try:
        node = node_factory(schema_registry_url=state.url)
        [entity] = node.execute("ASSERT NOT EXISTS SCHEMA SUBJECT 'nothing-here';")
        assert entity["@type"] == "assert_schema"
    finally:
        launcher.stop()
    assert not answers(state.url)
    request = create_stream("BEFORE_ASSERT", unique("t")) + \
        " ASSERT NOT EXISTS SCHEMA SUBJECT 'nothing-here';"
    with pytest.raises(AssertionFailedError, match=r"Cannot check schema existence: The Schema "
                                                   r"Registry at .* is not available"):
        node.execute(request)
    assert node.replica.image.source("BEFORE_ASSERT") is None
    with pytest.raises(SchemaRegistryUnavailableError) as failure:
        SchemaRegistryClient(state.url, timeout=1.0).subjects()
    assert classify(failure.value).http_status == 503
    assert committed_values(consumer_factory, node.config.topic) == []


def _at_once(register: Callable[[str], int], subjects: int, clients: int = 8) -> list[int]:
    """``clients`` first registrations of one schema under ``subjects`` new subjects, started
    together."""
    names = [unique("raced") + "-value" for _ in range(subjects)]
    start = threading.Barrier(clients)
    ids: list[int] = []

    def one(subject: str) -> None:
        start.wait()
        ids.append(register(subject))

    threads = [threading.Thread(target=one, args=(names[i % subjects],)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return ids


def test_registrations_at_once_all_get_their_ids(registry: SchemaRegistryState,
                                                 spark: Any) -> None:
    """The registry fails registrations that wait for each other (a 500, or a 409 "already
    exists" for the later of two first registrations of a subject): the node's client and the
    JVM's (a query's sink tasks) send theirs one at a time, and again after a 409."""
    def from_python(subject: str) -> int:
        client = SchemaRegistryClient(registry.url)  # each its own: no id remembered
        try:
            return client.register(subject, AVRO)
        finally:
            client.close()

    def from_the_jvm(subject: str) -> int:
        calls = spark.sparkContext._jvm.io.metastore.avro.RegistryCalls
        return int(calls.register(registry.url, subject, "AVRO", AVRO))

    for register in (from_python, from_the_jvm):
        for subjects in (1, 8):
            ids = _at_once(register, subjects)
            assert len(ids) == 8 and len(set(ids)) == 1, ids  # one schema: one id
