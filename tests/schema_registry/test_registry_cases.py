"""`metastore test` over a slice of ksqlDB's own query tests in the Schema Registry formats (one
case per family: each format's inference of key and value columns, schema ids, schema names,
decimals, times, a join, schema references), on the real registry, broker and Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from metastore.dev.schema_registry import SchemaRegistryState
from tests.query_tests.test_metastore_test import DEV_RECORDS

pytestmark = pytest.mark.usefixtures("own_spark")  # `metastore test` starts a session of its own

REGISTRY_SLICE = (
    "qtt/avro.json::deserialize anonymous primitive - value - with coercion",
    "qtt/avro.json::INT - key - inference",
    "qtt/avro.json::should support arrays",  # value columns inferred
    "qtt/avro.json::VALUE_SCHEMA_ID with compound types",
    "qtt/decimal.json::AVRO should not trim trailing zeros",
    "qtt/time.json::time schema inference",
    "qtt/json_sr.json::BOOLEAN - key - inference",
    "qtt/elements.json::validate schema id without key value elements OK - JSON_SR SCHEMA",
    "qtt/protobuf.json::protobuf inference - primitives",
    "qtt/protobuf.json::specify a protobuf schema from multiple protobuf schema definitions",
    "qtt/elements.json::validate schema id without elements OK - PROTOBUF",
    "qtt/multi-joins.json::table-table-table - SR-enabled key format",
    # a Protobuf schema that imports a registered one, read, written under a schema id, inserted
    "qtt/protobuf.json::deserialize and serialize schema using internal references using schema id",
    "qtt/insert-into.json::PROTOBUF insert query with schema references",
)


@pytest.mark.timeout(900)
def test_metastore_test_passes_a_slice_of_the_registry_cases(
        kafka_bootstrap: str, registry: SchemaRegistryState, tmp_path: Path) -> None:
    wanted = {case["id"]: case for case in map(json.loads, DEV_RECORDS.read_text().splitlines())
              if case["id"] in REGISTRY_SLICE}
    assert sorted(wanted) == sorted(REGISTRY_SLICE), "the slice names cases of the dev file"
    assert all(case["needs_schema_registry"] or set(case["formats"]) & {
        "AVRO", "PROTOBUF", "JSON_SR"} for case in wanted.values())
    cases = tmp_path / "registry.jsonl"
    cases.write_text("".join(json.dumps(wanted[i]) + "\n" for i in REGISTRY_SLICE))
    result = CliRunner().invoke(app, [
        "test", str(cases), "--json", "--bootstrap-servers", kafka_bootstrap,
        "--schema-registry-url", registry.url])
    report = json.loads(result.stdout)
    assert [(c["id"], c["status"], c["reason"][:300]) for c in report["cases"]] == [
        (i, "passed", "") for i in REGISTRY_SLICE]
    assert result.exit_code == 0


FLOAT_WIDENED = {  # a Protobuf float reads as the DOUBLE Java widens it to, as ksqlDB's FLOAT32
    "name": "float widened", "statements": [
        "CREATE STREAM INPUT WITH (kafka_topic='input', value_format='PROTOBUF');",
        "CREATE STREAM OUTPUT AS SELECT * FROM INPUT;"],
    "topics": [{"name": "input", "valueFormat": "PROTOBUF",
                "valueSchema": 'syntax = "proto3"; message R { float c1 = 1; }'}],
    "inputs": [{"topic": "input", "value": {"c1": 1.1234}}],
    "outputs": [{"topic": "OUTPUT", "value": {"C1": 1.1233999729156494}}],
}


@pytest.mark.timeout(300)
def test_a_protobuf_float_reads_as_ksqldb_widens_it(
        kafka_bootstrap: str, registry: SchemaRegistryState, tmp_path: Path) -> None:
    cases = tmp_path / "float.json"
    cases.write_text(json.dumps({"tests": [FLOAT_WIDENED]}))
    result = CliRunner().invoke(app, [
        "test", str(cases), "--json", "--bootstrap-servers", kafka_bootstrap,
        "--schema-registry-url", registry.url])
    [case] = json.loads(result.stdout)["cases"]
    assert (case["status"], case["reason"]) == ("passed", "")


REGISTERED_SINK = {  # a C*AS written with the schema VALUE_SCHEMA_ID names: its extra fields
    # take their defaults (a NULL one too, as Connect's Struct gives it) or NULL; the ids are
    # those ksqlDB's test driver gives: INPUT's derived value schema first (Java's HashMap
    # puts `input` before `sink`), then the declared one
    "name": "registered sink schema", "statements": [
        "CREATE STREAM INPUT (ID INT KEY, A INT, B INT) WITH (kafka_topic='input', "
        "value_format='AVRO');",
        "CREATE STREAM OUTPUT WITH (kafka_topic='sink', value_schema_id=2) AS "
        "SELECT ID, A AS `a`, B AS `b` FROM INPUT;"],
    "topics": [{"name": "sink", "valueFormat": "AVRO", "valueSchema": {
        "type": "record", "name": "Out", "fields": [
            {"name": "a", "type": ["null", "int"], "default": None},
            {"name": "b", "type": "int", "default": 7},
            {"name": "c", "type": ["null", "string"], "default": None},
            {"name": "d", "type": "long", "default": 100}]}}],
    "inputs": [{"topic": "input", "key": 1, "value": {"A": 1, "B": 2}},
               {"topic": "input", "key": 2, "value": {"A": 3, "B": None}}],
    "outputs": [{"topic": "sink", "key": 1, "value": {"a": 1, "b": 2, "c": None, "d": 100}},
                {"topic": "sink", "key": 2, "value": {"a": 3, "b": 7, "c": None, "d": 100}}],
}
REGISTERED_JSON_SR_SINK = {  # a JSON_SR record of a registered schema has each of its properties
    "name": "registered JSON_SR sink schema", "statements": [
        "CREATE STREAM INPUT (ID INT KEY, A INT) WITH (kafka_topic='input', value_format='JSON');",
        "CREATE STREAM OUTPUT WITH (kafka_topic='sink', value_format='JSON_SR', "
        "value_schema_id=5) AS SELECT ID, CAST(A AS BIGINT) AS `a` FROM INPUT;"],
    "topics": [{"name": "sink", "valueFormat": "JSON_SR", "valueSchemaId": 5, "valueSchema": {
        "type": "object", "properties": {"a": {"type": "integer"}, "z": {"type": "string"}}}}],
    "inputs": [{"topic": "input", "key": 1, "value": {"A": 4}}],
    "outputs": [{"topic": "sink", "key": 1, "value": {"a": 4, "z": None}}],
}
REORDERED_SINK = {  # the query's columns must begin the registered schema's, in order
    "name": "reordered sink schema", "statements": [
        "CREATE STREAM INPUT (ID INT KEY, A INT) WITH (kafka_topic='input', value_format='JSON');",
        "CREATE STREAM OUTPUT WITH (kafka_topic='sink', value_format='AVRO', "
        "value_schema_id=9) AS SELECT ID, A AS `a` FROM INPUT;"],
    "topics": [{"name": "sink", "valueFormat": "AVRO", "valueSchemaId": 9, "valueSchema": {
        "type": "record", "name": "Out", "fields": [
            {"name": "z", "type": "double"}, {"name": "a", "type": "int"}]}}],
    "inputs": [], "outputs": [],
    "expectedException": {"message": "The following value columns are changed, missing or "
                                     "reordered: [`a` INTEGER]. Schema from schema registry is "
                                     "[`z` DOUBLE, `a` INTEGER]"},
}


@pytest.mark.timeout(300)
def test_a_query_writes_the_registered_schema_its_schema_id_names(
        kafka_bootstrap: str, registry: SchemaRegistryState, tmp_path: Path) -> None:
    cases = tmp_path / "registered.json"
    cases.write_text(json.dumps({"tests": [REGISTERED_SINK, REGISTERED_JSON_SR_SINK,
                                           REORDERED_SINK]}))
    result = CliRunner().invoke(app, [
        "test", str(cases), "--json", "--bootstrap-servers", kafka_bootstrap,
        "--schema-registry-url", registry.url])
    report = json.loads(result.stdout)
    assert [(c["name"], c["status"], c["reason"][:300]) for c in report["cases"]] == [
        (case["name"], "passed", "") for case in (REGISTERED_SINK, REGISTERED_JSON_SR_SINK,
                                                  REORDERED_SINK)]
