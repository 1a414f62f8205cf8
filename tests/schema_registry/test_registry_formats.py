"""AVRO, PROTOBUF and JSON_SR on the real registry, broker and Spark: columns a CREATE infers
from the registry (kept in the command, so a node without a registry replays the same source),
ksqlDB's refusals when there is nothing to infer from, a registry outage that fails a CREATE
with nothing written, and each format through a CSAS record by record, its sink's schema
registered under its topic's subject."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from metastore.catalog.exceptions import SchemaError
from metastore.dev.schema_registry import LocalSchemaRegistry, SchemaRegistryState
from metastore.schema_registry.client import SchemaRegistryClient
from metastore.schema_registry.exceptions import SchemaRegistryUnavailableError
from metastore.server.http.error_codes import classify
from metastore.server.node import Node
from metastore.sql.statements import ColumnRole
from metastore.testing.cases import CaseRecord, QueryTest
from metastore.testing.session import run_tests
from tests.broker.test_command_log import committed_values
from tests.support.kafka import unique

NodeFactory = Callable[..., Node]
KEY, VALUE = ColumnRole.KEY, ColumnRole.VALUE

AVRO_VALUE = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6,
                               "scale": 2}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
        {"name": "city", "type": "string"}]}},
]}
INFERRED = [("ID", "BIGINT", VALUE), ("NOTE", "STRING", VALUE), ("PRICE", "DECIMAL(6, 2)", VALUE),
            ("AT", "TIMESTAMP", VALUE), ("TAGS", "ARRAY<STRING>", VALUE),
            ("ADDRESS", "STRUCT<CITY STRING>", VALUE)]
PROTOBUF_VALUE = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string note = 2;
  repeated string tags = 5;
  google.protobuf.Timestamp at = 4;
  Address address = 6;
  message Address { string city = 1; }
}
"""
JSON_VALUE = {"type": "object", "properties": {
    "id": {"type": "integer"}, "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
    "tags": {"type": "array", "items": {"type": "string"}},
    "address": {"type": "object", "properties": {"city": {"type": "string"}}}}}


def columns(node: Node, name: str) -> list[tuple[str, str, ColumnRole]]:
    source = node.replica.image.source(name)
    assert source is not None, name
    return [(c.name, c.type.sql(), c.role) for c in source.columns]


def test_a_create_without_columns_infers_them_from_the_registry(
        node_factory: NodeFactory, client: SchemaRegistryClient) -> None:
    topic = unique("orders")
    key_id = client.register(f"{topic}-key", json.dumps("int"))
    value_id = client.register(f"{topic}-value", json.dumps(AVRO_VALUE))
    node = node_factory(schema_registry_url=client.url)
    node.execute(f"CREATE STREAM ORDERS WITH (KAFKA_TOPIC='{topic}', FORMAT='AVRO', "
                 "PARTITIONS=1);")
    assert columns(node, "ORDERS") == [("ROWKEY", "INTEGER", KEY), *INFERRED]
    for subject, schema_id in ((f"{topic}-key", key_id), (f"{topic}-value", value_id)):
        latest = client.latest(subject)  # the user's schemas stay the subjects' latest
        assert latest is not None and latest.schema_id == schema_id and latest.version == 1
    node.execute("INSERT INTO ORDERS (ROWKEY, ID, PRICE, AT, TAGS, ADDRESS) VALUES (1, 2, 3.5, "
                 "'1970-01-01T00:00:00.004', ARRAY['t'], STRUCT(CITY := 'Oslo'));")
    latest = client.latest(f"{topic}-value")
    assert latest is not None and latest.schema_id == value_id
    replayed = node_factory(service_id=node.config.service_id, node_id="node-2")  # no registry
    assert replayed.replica.image.source("ORDERS") == node.replica.image.source("ORDERS")


def test_each_registry_format_infers_with_ksqldbs_names(
        node_factory: NodeFactory, client: SchemaRegistryClient) -> None:
    node = node_factory(schema_registry_url=client.url)
    protobuf_topic, json_topic, by_id_topic = unique("pb"), unique("js"), unique("id")
    client.register(f"{protobuf_topic}-value", PROTOBUF_VALUE, "PROTOBUF")
    client.register(f"{json_topic}-value", json.dumps(
        {"$schema": "http://json-schema.org/draft-07/schema#", **JSON_VALUE}), "JSON")
    schema_id = client.register(f"{by_id_topic}-value", json.dumps(AVRO_VALUE))
    node.execute(f"CREATE STREAM PB (K STRING KEY) WITH (KAFKA_TOPIC='{protobuf_topic}', "
                 "VALUE_FORMAT='PROTOBUF', PARTITIONS=1);")
    node.execute(f"CREATE STREAM JS WITH (KAFKA_TOPIC='{json_topic}', VALUE_FORMAT='JSON_SR', "
                 "PARTITIONS=1);")
    node.execute(f"CREATE STREAM BY_ID WITH (KAFKA_TOPIC='{by_id_topic}', VALUE_FORMAT='AVRO', "
                 f"VALUE_SCHEMA_ID={schema_id}, PARTITIONS=1);")
    assert columns(node, "PB") == [
        ("K", "STRING", KEY), ("ID", "BIGINT", VALUE), ("NOTE", "STRING", VALUE),
        ("TAGS", "ARRAY<STRING>", VALUE), ("AT", "TIMESTAMP", VALUE),
        ("ADDRESS", "STRUCT<CITY STRING>", VALUE)]
    pb = node.replica.image.source("PB")
    assert pb is not None and pb.property("registry.valueSchema") == PROTOBUF_VALUE
    assert columns(node, "JS") == [
        ("ID", "BIGINT", VALUE), ("NOTE", "STRING", VALUE), ("TAGS", "ARRAY<STRING>", VALUE),
        ("ADDRESS", "STRUCT<CITY STRING>", VALUE)]
    assert [c[0] for c in columns(node, "BY_ID")] == ["id", "note", "price", "at", "tags",
                                                      "address"]  # named by id: as written


def test_nothing_to_infer_from_is_ksqldbs_error_with_nothing_written(
        node_factory: NodeFactory, client: SchemaRegistryClient,
        consumer_factory: Callable[..., Consumer]) -> None:
    node = node_factory(schema_registry_url=client.url)
    topic = unique("absent")
    with pytest.raises(SchemaError, match=re.escape(
            f"Schema for message values on topic '{topic}' does not exist in the Schema "
            f"Registry.\nSubject: {topic}-value")):
        node.execute(f"CREATE STREAM ABSENT WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='AVRO', "
                     "PARTITIONS=1);")
    anonymous = unique("anonymous")
    client.register(f"{anonymous}-value", json.dumps("string"))
    with pytest.raises(SchemaError, match="set 'WRAP_SINGLE_VALUE=false'"):
        node.execute(f"CREATE STREAM ANON WITH (KAFKA_TOPIC='{anonymous}', VALUE_FORMAT='AVRO', "
                     "PARTITIONS=1);")
    node.execute(f"CREATE STREAM ANON WITH (KAFKA_TOPIC='{anonymous}', VALUE_FORMAT='AVRO', "
                 "WRAP_SINGLE_VALUE=false, PARTITIONS=1);")
    assert columns(node, "ANON") == [("ROWVAL", "STRING", VALUE)]
    wrong_type = unique("wrong")
    client.register(f"{wrong_type}-value", json.dumps(AVRO_VALUE))
    with pytest.raises(SchemaError, match=re.escape(
            "Value schema is not in the expected format. You may want to set VALUE_FORMAT to "
            "'AVRO'")):
        node.execute(f"CREATE STREAM WRONG WITH (KAFKA_TOPIC='{wrong_type}', "
                     "VALUE_FORMAT='PROTOBUF', PARTITIONS=1);")
    assert len(committed_values(consumer_factory, node.config.topic)) == 1  # ANON's alone
    assert node.replica.image.source("ABSENT") is None


def test_a_registry_outage_fails_an_inferring_create_with_nothing_written(
        node_factory: NodeFactory, consumer_factory: Callable[..., Consumer],
        tmp_path: Path) -> None:
    launcher = LocalSchemaRegistry(tmp_path / "outage")
    state = launcher.start(progress=None)
    launcher.stop()
    node = node_factory(schema_registry_url=state.url)
    with pytest.raises(SchemaRegistryUnavailableError) as failure:
        node.execute(f"CREATE STREAM LATER WITH (KAFKA_TOPIC='{unique('t')}', "
                     "VALUE_FORMAT='AVRO', PARTITIONS=1);")
    assert classify(failure.value).http_status == 503
    assert committed_values(consumer_factory, node.config.topic) == []
    node.execute(f"CREATE STREAM DECLARED (ID INT KEY, V STRING) WITH (KAFKA_TOPIC="
                 f"'{unique('t')}', FORMAT='JSON', PARTITIONS=1);")  # no registry needed


FORMATS = ("AVRO", "PROTOBUF", "JSON_SR")
SCHEMA_TYPES = {"AVRO": "AVRO", "PROTOBUF": "PROTOBUF", "JSON_SR": "JSON"}


def format_test(fmt: str) -> QueryTest:
    """A CSAS over every kind of column, in ``fmt`` for key and value."""
    row = {"NAME": "ann", "PRICE": 12.5, "TAGS": ["a", "b"], "ADDRESS": {"CITY": "Oslo"},
           "AT": 1_700_000_000_123}
    return QueryTest(
        test_id=f"formats::{fmt}", name=fmt,
        statements=(
            "CREATE STREAM INPUT (ID INT KEY, NAME STRING, PRICE DECIMAL(6, 2), TAGS ARRAY<STRING>, "
            f"ADDRESS STRUCT<CITY STRING>, AT TIMESTAMP) WITH (KAFKA_TOPIC='input', FORMAT='{fmt}');",
            "CREATE STREAM OUTPUT AS SELECT ID, UCASE(NAME) AS NAME, PRICE * 2 AS DOUBLED, TAGS, "
            "ADDRESS->CITY AS CITY, AT FROM INPUT WHERE ID > 1;"),
        inputs=(CaseRecord("input", {"ID": 1} if fmt == "PROTOBUF" else 1, row),
                CaseRecord("input", {"ID": 2} if fmt == "PROTOBUF" else 2, row),
                CaseRecord("input", {"ID": 3} if fmt == "PROTOBUF" else 3,
                           {**row, "NAME": None, "TAGS": None})),
        outputs=tuple(CaseRecord("OUTPUT", {"ID": key} if fmt == "PROTOBUF" else key, value)
                      for key, value in (
            (2, {"NAME": "ANN", "DOUBLED": 25.0, "TAGS": ["a", "b"], "CITY": "Oslo",
                 "AT": 1_700_000_000_123}),
            (3, {"NAME": "" if fmt == "PROTOBUF" else None, "DOUBLED": 25.0,
                 "TAGS": [] if fmt == "PROTOBUF" else None, "CITY": "Oslo",
                 "AT": 1_700_000_000_123}))))


def test_each_format_through_a_csas_record_by_record(
        kafka_bootstrap: str, registry: SchemaRegistryState, client: SchemaRegistryClient,
        tmp_path: Path, own_spark: None) -> None:
    before = set(client.subjects())
    report = run_tests([format_test(fmt) for fmt in FORMATS], kafka_bootstrap,
                       registry_url=registry.url, work_dir=tmp_path)
    assert [(r.test_id, r.status, r.reason) for r in report.results] == [
        (f"formats::{fmt}", "passed", "") for fmt in FORMATS]
    registered = sorted(set(client.subjects()) - before)
    for position, fmt in enumerate(FORMATS, start=1):  # the run's n-th test's own topics
        sink = [s for s in registered if s.endswith(f"-{position}-OUTPUT-value")]
        assert len(sink) == 1, registered
        schema = client.latest(sink[0])
        assert schema is not None and schema.schema_type == SCHEMA_TYPES[fmt]
        assert all(name in schema.schema for name in ("NAME", "DOUBLED", "TAGS", "CITY", "AT"))
        assert any(s.endswith(f"-{position}-OUTPUT-key") for s in registered)


def test_a_new_source_registers_its_schemas_once_written(
        node_factory: NodeFactory, client: SchemaRegistryClient) -> None:
    node = node_factory(schema_registry_url=client.url)
    source, sink = unique("declared"), unique("derived")
    node.execute(f"CREATE STREAM DECLARED (ID INT KEY, NAME STRING) WITH (KAFKA_TOPIC="
                 f"'{source}', FORMAT='AVRO', PARTITIONS=1);")
    key, value = client.latest(f"{source}-key"), client.latest(f"{source}-value")
    assert key is not None and json.loads(key.schema) == ["null", "int"]
    assert value is not None and [f["name"] for f in json.loads(value.schema)["fields"]] == [
        "NAME"]
    node.execute(f"CREATE STREAM DERIVED WITH (KAFKA_TOPIC='{sink}', VALUE_FORMAT='JSON_SR') AS "
                 "SELECT ID, UCASE(NAME) AS UPPER_NAME FROM DECLARED;")
    derived = client.latest(f"{sink}-value")
    assert derived is not None and derived.schema_type == "JSON"
    assert list(json.loads(derived.schema)["properties"]) == ["UPPER_NAME"]
    assert client.latest(f"{sink}-key") is not None  # the key stays AVRO, as the source's


def test_a_create_that_declares_its_columns_needs_no_registry_to_be_written(
        node_factory: NodeFactory, tmp_path: Path) -> None:
    launcher = LocalSchemaRegistry(tmp_path / "down")
    state = launcher.start(progress=None)
    launcher.stop()
    node = node_factory(schema_registry_url=state.url)
    node.execute(f"CREATE STREAM DECLARED (ID INT KEY, V STRING) WITH (KAFKA_TOPIC="
                 f"'{unique('t')}', FORMAT='AVRO', PARTITIONS=1);")  # registration only logged
    assert node.replica.image.source("DECLARED") is not None
