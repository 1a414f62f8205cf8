"""The processing log's entries for the records a query cannot read, on a real Spark: one
DESERIALIZATION_ERROR per unreadable record, in ksqlDB's JSON layout, whose target is the key
when the key alone is unreadable, holding the record only when ``rows.include`` says so."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from metastore.runtime.processing_log import batch_offsets, entries_select
from metastore.runtime.processing_log_settings import (
    ProcessingLogSettingError,
    ProcessingLogSettings,
)
from metastore.spark.types import string_literal
from metastore.testing.check import run_script

SCRIPT = ("CREATE STREAM S (K INT KEY, ID INT, F BOOLEAN) WITH (KAFKA_TOPIC='s_topic', "
          "KEY_FORMAT='JSON', VALUE_FORMAT='JSON', PARTITIONS=1);")
RECORDS = [  # key, value
    ("1", '{"ID": 1, "F": true}'),
    ("x", '{"ID": 2, "F": true}'),  # the key is no INT
    ("3", '{"ID": 3, "F": "yes"}'),  # the value's F is no BOOLEAN
    ("y", "not json"),  # both: the key is found first
    ("5", None),  # a tombstone: no value, nothing to read
]


def _entries(spark: Any, rows_include: bool) -> list[dict[str, Any]]:
    results, image = run_script(SCRIPT)
    assert all(r.ok for r in results)
    source = image.sources["S"]
    rows = ", ".join(
        f"({offset}, CAST({string_literal(key)} AS BINARY), "
        f"CAST({'NULL' if value is None else string_literal(value)} AS BINARY))"
        for offset, (key, value) in enumerate(RECORDS))
    raw = (f"(SELECT key, value, 's_topic' AS topic, 0 AS partition, CAST(o AS BIGINT) AS offset, "
           "timestamp_millis(o) AS timestamp, 0 AS timestampType, "
           "CAST(array() AS ARRAY<STRUCT<key: STRING, value: BINARY>>) AS headers "
           f"FROM VALUES {rows} AS v(o, key, value))")
    select = entries_select(source, raw, "CSAS_OUT_1", rows_include)
    return [json.loads(row.value) for row in spark.sql(select).collect()]


def test_each_unreadable_record_is_one_deserialization_error(spark: Any) -> None:
    entries = _entries(spark, rows_include=False)
    errors = [entry["message"]["deserializationError"] for entry in entries]
    assert [(e["target"], e["topic"], e["recordB64"], e["cause"]) for e in errors] == [
        ("key", "s_topic", None, []), ("value", "s_topic", None, []),
        ("key", "s_topic", None, [])]
    assert {entry["logger"] for entry in entries} == {
        "processing.CSAS_OUT_1.KsqlTopic.Source.deserializer"}
    assert {(entry["level"], entry["message"]["type"]) for entry in entries} == {("ERROR", 0)}
    assert errors[1]["errorMessage"] == (
        "Failed to deserialize value from topic: s_topic. It is no JSON value the columns of S "
        "can read (partition 0, offset 2).")
    assert all(isinstance(entry["time"], int) and entry["time"] > 0 for entry in entries)


def test_an_entry_holds_its_record_when_rows_are_included(spark: Any) -> None:
    errors = [entry["message"]["deserializationError"]
              for entry in _entries(spark, rows_include=True)]
    assert [base64.b64decode(e["recordB64"]).decode() for e in errors] == [
        "x", '{"ID": 3, "F": "yes"}', "y"]


def test_a_micro_batchs_offsets_of_a_topic_span_every_source_that_read_it() -> None:
    sources = [('{"t": {"0": 5, "1": 7}}', '{"t": {"0": 9, "1": 8}}'),
               ('{"u": {"0": 1}}', '{"u": {"0": 4}}'),
               ('{"t": {"0": 3}}', '{"t": {"0": 9, "1": 10, "2": 4}}')]
    assert batch_offsets(sources, "t", None, False) == ({0: 3, 1: 7, 2: -2}, {0: 9, 1: 10, 2: 4})
    assert batch_offsets(sources, "v", None, True) is None


def test_a_first_micro_batch_reads_from_the_start_only_when_its_query_does() -> None:
    """Spark's progress gives a query's first micro-batch no start: the earliest offsets for
    a query that reads from the start; else only from its first unreadable record on."""
    first_batch = [(None, '{"t": {"0": 6, "1": 9}}')]
    assert batch_offsets(first_batch, "t", (1, 4), True) == ({0: -2, 1: -2}, {0: 6, 1: 9})
    assert batch_offsets(first_batch, "t", (1, 4), False) == ({1: 4}, {1: 9})
    assert batch_offsets(first_batch, "t", None, False) is None


def test_the_settings_are_ksqldbs_properties() -> None:
    settings = ProcessingLogSettings.of({"ksql.logging.processing.rows.include": "TRUE",
                                         "ksql.logging.processing.stream.name": "errors"})
    assert settings.rows_include and settings.stream_name == "ERRORS"
    assert settings.topic("svc_") == "svc_ksql_processing_log"
    assert settings.stream_statement("svc_").startswith(
        "CREATE STREAM IF NOT EXISTS ERRORS (LOGGER STRING, LEVEL STRING, TIME BIGINT, ")
    with pytest.raises(ProcessingLogSettingError, match="unknown property"):
        ProcessingLogSettings.of({"ksql.logging.processing.nope": "1"})
    with pytest.raises(ProcessingLogSettingError, match="not a positive integer"):
        ProcessingLogSettings.of({"ksql.logging.processing.topic.partitions": "0"})
