"""How `metastore test` encodes inputs, decodes sink records and compares them with expectations."""

from __future__ import annotations

import json
import struct
from decimal import Decimal
from pathlib import Path

import pytest

from metastore.catalog.model import DataSource, WindowInfo
from metastore.testing import cases, records, verdict
from metastore.testing.cases import CaseRecord, Window
from metastore.testing.check import run_script
from metastore.testing.post import normalise_schema


def source(script: str, name: str) -> DataSource:
    results, image = run_script(script, runtime_check=False)
    assert all(r.ok for r in results), results
    return image.sources[name]


def actual(key: object, value: object, timestamp: int = 0, offset: int = 0,
           window: Window | None = None) -> verdict.ActualRecord:
    return verdict.ActualRecord("OUT", key, value, timestamp, (), window, 0, offset)


def test_inputs_are_encoded_in_the_formats_of_the_source_on_their_topic() -> None:
    kafka = source("CREATE STREAM S (K INT KEY, V BIGINT) WITH (KAFKA_TOPIC='t', "
                   "VALUE_FORMAT='KAFKA');", "S")
    encoded = records.encode(CaseRecord("t", 7, 9), kafka)
    assert encoded == records.KafkaBytes(struct.pack(">i", 7), struct.pack(">q", 9))
    as_json = source("CREATE STREAM S (K STRING KEY, V INT) WITH (KAFKA_TOPIC='t', "
                     "KEY_FORMAT='JSON', VALUE_FORMAT='JSON');", "S")
    encoded = records.encode(CaseRecord("t", "a", {"V": 1}), as_json)
    assert encoded == records.KafkaBytes(b'"a"', b'{"V": 1}')
    assert records.encode(CaseRecord("t", "a", None), as_json).value is None  # a tombstone


def test_a_value_that_is_not_of_the_kafka_type_is_a_clear_error() -> None:
    kafka = source("CREATE STREAM S (K INT KEY, V INT) WITH (KAFKA_TOPIC='t', "
                   "VALUE_FORMAT='KAFKA');", "S")
    with pytest.raises(records.RecordCodecError, match="not a KAFKA INTEGER"):
        records.encode(CaseRecord("t", "seven", 1), kafka)


def test_windowed_sink_keys_are_split_into_key_and_window() -> None:
    sink = DataSource("W", source("CREATE TABLE T (K STRING PRIMARY KEY, V INT) WITH ("
                                  "KAFKA_TOPIC='t', VALUE_FORMAT='JSON');", "T").kind, (
        source("CREATE TABLE T (K STRING PRIMARY KEY, V INT) WITH (KAFKA_TOPIC='t', "
               "VALUE_FORMAT='JSON');", "T").columns), "t", "KAFKA", "JSON", 1, "",
        window=WindowInfo("TUMBLING", 1000))
    decoded = records.decode_key(b"k" + struct.pack(">q", 3000), sink)
    assert decoded == records.DecodedKey("k", Window(3000, 4000, "TIME"))


def test_numbers_compare_by_value_and_text_fields_by_the_number_they_spell() -> None:
    assert verdict.same_value({"A": 1, "B": [1.5]}, {"A": 1.0, "B": [1.5]})
    assert verdict.same_value(1, "1")
    assert not verdict.same_value({"A": 1}, {"A": 1, "B": None})
    assert not verdict.same_value(None, 0)
    assert not verdict.same_value(True, 1)


def test_a_stream_must_match_record_by_record_with_timestamps_where_given() -> None:
    expected = [CaseRecord("OUT", "a", {"V": 1}, timestamp=10), CaseRecord("OUT", "a", {"V": 2})]
    assert verdict.stream_difference(expected, [actual("a", {"V": 1}, 10, 0),
                                                actual("a", {"V": 2}, 99, 1)]) is None
    wrong_time = verdict.stream_difference(expected, [actual("a", {"V": 1}, 11, 0),
                                                      actual("a", {"V": 2}, 99, 1)])
    assert wrong_time is not None and "expected but not produced" in wrong_time
    out_of_order = verdict.stream_difference(expected, [actual("a", {"V": 2}, 99, 0),
                                                        actual("a", {"V": 1}, 10, 1)])
    assert out_of_order is not None and "out of order" in out_of_order
    extra = verdict.stream_difference(expected[:1], [actual("a", {"V": 1}, 10, 0),
                                                     actual("b", {"V": 3}, 0, 1)])
    assert extra is not None and 'produced but not expected: "b"' in extra


def test_a_table_is_compared_on_its_final_value_per_key() -> None:
    expected = [CaseRecord("OUT", "a", {"C": 1}), CaseRecord("OUT", "a", {"C": 2}),
                CaseRecord("OUT", "b", {"C": 1}), CaseRecord("OUT", "b", None)]
    assert verdict.table_difference(expected, [actual("a", {"C": 2})]) is None
    assert verdict.table_difference(expected, [actual("a", {"C": 2}), actual("b", {"C": 1}, 0, 1),
                                               actual("b", None, 0, 2)]) is None
    stale = verdict.table_difference(expected, [actual("a", {"C": 1})])
    assert stale is not None and "final value per key differs" in stale
    assert verdict.table_difference(expected, [actual("a", {"C": 2}), actual("b", {"C": 1})])


def test_a_session_is_keyed_by_its_start_and_end() -> None:
    merged, replaced = Window(0, 1500, "SESSION"), Window(0, 0, "SESSION")
    expected = [CaseRecord("OUT", 0, {"C": 1}, window=replaced),
                CaseRecord("OUT", 0, None, window=replaced),
                CaseRecord("OUT", 0, {"C": 2}, window=merged)]
    # the merged session may be written before the tombstone of the one it replaced
    produced = [actual(0, {"C": 1}, window=replaced), actual(0, {"C": 2}, 0, 1, window=merged),
                actual(0, None, 0, 2, window=replaced)]
    assert verdict.table_difference(expected, produced) is None
    deleted = verdict.table_difference(expected, produced[:1] + produced[2:])
    assert deleted is not None and "window=0..1500" in deleted


def test_test_files_load_in_every_shape(tmp_path: Path) -> None:
    test = {"name": "t", "statements": ["CREATE STREAM S (V INT) WITH (KAFKA_TOPIC='s', "
                                        "VALUE_FORMAT='JSON');"],
            "inputs": [{"topic": "s", "key": None, "value": {"V": 1}, "timestamp": 5,
                        "headers": [{"KEY": "h", "VALUE": "AQ=="}]}],
            "outputs": []}
    disabled = {**test, "name": "off", "enabled": False}  # ksqlDB's driver skips it
    (tmp_path / "file.json").write_text(json.dumps({"tests": [test, disabled]}))
    (tmp_path / "lines.jsonl").write_text(json.dumps({**test, "id": "x"}) + "\n"
                                          + json.dumps({**disabled, "id": "y"}) + "\n")
    loaded = cases.load([tmp_path / "file.json", tmp_path / "lines.jsonl"])
    assert [t.test_id for t in loaded] == [f"{tmp_path / 'file.json'}::t", "x"]
    assert loaded[0].inputs[0].headers == (("h", b"\x01"),)
    assert loaded[0].inputs[0].timestamp == 5
    matrix = {**test, "config": ["true", "false"],
              "properties": {"ksql.new.query.planner.enabled": "{CONFIG}", "other": "x"}}
    (tmp_path / "matrix.json").write_text(json.dumps({"tests": [matrix]}))
    expanded = cases.load([tmp_path / "matrix.json"])  # as ksqlDB's loader names the variants
    assert [(t.name, dict(t.properties)) for t in expanded] == [
        ("t - ksql.new.query.planner.enabled=true",
         {"ksql.new.query.planner.enabled": "true", "other": "x"}),
        ("t - ksql.new.query.planner.enabled=false",
         {"ksql.new.query.planner.enabled": "false", "other": "x"})]
    (tmp_path / "bad.json").write_text('{"tests": [{"name": "no statements"}]}')
    with pytest.raises(cases.CaseFileError, match="statements"):
        cases.load([tmp_path / "bad.json"])


def test_a_ksqldb_test_with_formats_is_one_test_per_format(tmp_path: Path) -> None:
    test = {"name": "t", "format": ["JSON", "DELIMITED"],
            "statements": ["CREATE STREAM S (V INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='{FORMAT}');"],
            "inputs": [], "outputs": []}
    (tmp_path / "file.json").write_text(json.dumps({"tests": [test]}))
    loaded = cases.load([tmp_path / "file.json"])
    assert [t.name for t in loaded] == ["t - JSON", "t - DELIMITED"]
    assert "VALUE_FORMAT='DELIMITED'" in loaded[1].statements[0]


def test_an_expected_object_is_read_field_by_field_as_ksqldb_reads_it() -> None:
    # ksqlDB's ExpectedRecordComparator: as many fields; each read by name, else upper-cased,
    # a field the record lacks reading as null (qtt/encode.json expects a HEX the sink lacks)
    produced = {"ASCII": None, "UTF8": None, "BASE64": None}
    assert verdict.same_value({"HEX": None, "UTF8": None, "BASE64": None}, produced)
    assert verdict.same_value({"ascii": None, "utf8": None, "base64": None}, produced)
    assert not verdict.same_value({"HEX": "x", "UTF8": None, "BASE64": None}, produced)
    assert not verdict.same_value({"HEX": None, "UTF8": None}, produced)  # field count differs
    assert not verdict.same_value({"UTF8": None, "BASE64": None, "ASCII": "A"}, produced)
    assert not verdict.same_value({"A": 1}, {"a": 1})  # a produced lower-case name is not A


def test_a_decimal_is_read_exactly_and_text_must_spell_its_value_and_scale() -> None:
    sink = source("CREATE TABLE T (ID BIGINT PRIMARY KEY, L0 DECIMAL(3,2)) WITH ("
                  "KAFKA_TOPIC='t', VALUE_FORMAT='JSON');", "T")
    value = records.decode_value(b'{"L0":3.40}', sink)
    assert verdict.same_value({"L0": "3.40"}, value)
    assert verdict.same_value({"L0": 3.4}, value)  # a number by value, as before
    assert not verdict.same_value({"L0": "3.4"}, value)  # BigDecimal.equals: the scale counts
    assert not verdict.same_value({"L0": "3.41"}, value)
    assert not verdict.same_value({"L0": "3.40x"}, value)
    assert not verdict.same_value({"L0": 3.41}, value)
    expected = [CaseRecord("OUT", 0, {"L0": "3.40"}), CaseRecord("OUT", 0, {"L0": "3.40"})]
    assert verdict.table_difference(expected, [actual(0, value)]) is None
    wrong = verdict.table_difference(expected, [actual(0, records.decode_value(
        b'{"L0":8.90}', sink))])
    assert wrong is not None and "-> {\"L0\": 8.90}" in wrong
    assert verdict.same_value(1, records.decode_value(b"1", sink))  # integers stay integers
    assert verdict.same_value(1e20, records.decode_value(b"1.0E20", sink))


def test_keys_spelled_as_text_find_their_decimal_key_in_a_table() -> None:
    expected = [CaseRecord("OUT", "1.50", {"C": 1})]
    assert verdict.table_difference(expected, [actual(Decimal("1.50"), {"C": 1})]) is None
    assert verdict.table_difference(expected, [actual(Decimal("1.5"), {"C": 1})]) is not None
    assert verdict.table_difference(expected, [actual(Decimal("1.50"), {"C": 2})]) is not None


@pytest.mark.parametrize(("expected", "actual"), [
    ("ID STRING KEY, S STRUCT< >", "ID STRING KEY, S STRUCT<>"),
    ("`K` INT PRIMARY KEY,V VARCHAR", "K INTEGER KEY, V STRING"),
    ("V DECIMAL(4, 2), M MAP<STRING, STRUCT< A INT >>", "V DECIMAL(4,2), M MAP<STRING, STRUCT<A INTEGER>>"),
])
def test_post_condition_schemas_compare_as_ksqldb_parses_them(expected: str, actual: str) -> None:
    assert normalise_schema(expected) == normalise_schema(actual)
    assert normalise_schema(expected) != normalise_schema(actual.replace(" S", " T").replace(" V", " W"))
