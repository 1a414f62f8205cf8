"""`metastore test` over a slice of ksqlDB's own query tests in the Schema Registry formats (one
case per family: each format's inference of key and value columns, schema ids, schema names,
decimals, times, a join), on the real registry, broker and Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from metastore.local.schema_registry import SchemaRegistryState
from tests.query_tests.test_metastore_test import DEV_RECORDS

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
