"""A record a query cannot read is skipped, never turned into a row of NULLs: the decoding every
reader shares (metastore.spark.views.decode_select), on a real Spark, with ksqlDB's JSON and
DELIMITED deserializers' rules: a value present that its column's type refuses makes the record
unreadable; an absent field or a JSON null is a NULL column."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tests.spark.test_json_fields import _decoded

JSON_STREAM = ("CREATE STREAM S (ID INT, FLAG BOOLEAN, N BIGINT, L ARRAY<INT>) "
               "WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=1);")


def test_json_records_whose_values_their_columns_refuse_are_skipped(spark: Any) -> None:
    texts = [
        '{"ID": 1, "FLAG": true, "N": 5, "L": [1]}',
        "\u0000not json{",
        '{"ID": "abc"}',
        '{"ID": 2, "FLAG": "yes"}',
        '{"ID": 3, "FLAG": 1}',
        '{"ID": 4, "L": [1, "x"]}',
        '{"ID": 5, "FLAG": null, "N": null}',
        '{"ID": "6", "flag": false}',
        "[1, 2]",
        '{"ID": 7, "L": {"a": 1}}',
        '{"ID": 8, "N": 41.9, "L": [null, 2]}',
        "null",
    ]
    assert _decoded(spark, JSON_STREAM, texts) == [
        (1, True, 5, [1]),
        (5, None, None, None),
        (6, False, None, None),
        (8, None, 41, [None, 2]),  # a number's fraction is cut off; a JSON null is NULL
        (None, None, None, None),  # JSON null: a null value, which a stream passes on
    ]


def test_json_fields_are_read_by_their_json_kind_not_only_their_text(spark: Any) -> None:
    """ksqlDB's JsonSerdeUtils: a BOOLEAN only from true or false (never the string "true"),
    an integer from a number (its fraction cut off) or a string of digits only, an array never
    from a string holding one; whatever the case of the field's name."""
    texts = [
        '{"ID": 1, "FLAG": "true"}',
        '{"id": 2, "flag": "false"}',
        '{"ID": "3.5"}',
        '{"ID": "+4", "N": "-5", "FLAG": false}',
        '{"ID": 6.7, "n": 8e1}',
        '{"ID": 9, "L": "[1, 2]"}',
        '{"ID": 10, "l": [3], "Flag": true, "N": " 11"}',
        '{"ID": 12, "FLAG": true, "N": "13"}',
    ]
    assert _decoded(spark, JSON_STREAM, texts) == [
        (4, False, -5, None), (6, None, 80, None), (12, True, 13, None)]


def test_reading_kinds_keeps_each_fields_text_and_takes_repeated_keys(spark: Any) -> None:
    """An array's elements keep their own text (a variant would sort an object's keys); a
    repeated key inside a field is the last one, as Jackson reads it, not an unreadable kind."""
    script = ("CREATE STREAM K (ID INT, L ARRAY<STRING>, F BOOLEAN) WITH (KAFKA_TOPIC='k', "
              "VALUE_FORMAT='JSON', PARTITIONS=1);")
    texts = ['{"ID": 1, "L": [{"b": 1, "a": 2}], "F": true}',
             '{"ID": "4.5", "L": [{"x": 1, "x": 2}]}',
             '{"id": 5, "l": "[\\"x\\"]"}',
             '{"ID": 6, "L": [{"x": 1, "x": 2}], "f": false}',
             '{"ID": 7}']
    assert _decoded(spark, script, texts) == [
        (1, ['{"b":1,"a":2}'], True), (6, ['{"x":1,"x":2}'], False), (7, None, None)]


def test_a_bare_integer_is_a_number_or_a_string_of_digits(spark: Any) -> None:
    script = ("CREATE STREAM I (N BIGINT) WITH (KAFKA_TOPIC='i', VALUE_FORMAT='JSON', "
              "WRAP_SINGLE_VALUE=false, PARTITIONS=1);")
    assert _decoded(spark, script, ["41.5", '"44.5"', '"42"', "true", '"x"', "43"]) == [
        (41,), (42,), (43,)]


def test_a_bare_boolean_is_a_json_boolean_not_a_string(spark: Any) -> None:
    script = ("CREATE STREAM B (FLAG BOOLEAN) WITH (KAFKA_TOPIC='b', VALUE_FORMAT='JSON', "
              "WRAP_SINGLE_VALUE=false, PARTITIONS=1);")
    assert _decoded(spark, script, ["true", '"true"', "false", "1", "null"]) == [
        (True,), (False,), (None,)]


def test_delimited_fields_their_columns_refuse_are_skipped(spark: Any) -> None:
    """ksqlDB's DELIMITED deserializer: integers are digits only, a BOOLEAN is true for 'true'
    in any case and false for anything else."""
    script = ("CREATE STREAM D (ID INT, V STRING, F BOOLEAN) WITH (KAFKA_TOPIC='d', "
              "VALUE_FORMAT='DELIMITED', PARTITIONS=1);")
    texts = ["1,a,true", "x,b,false", ",c,", "2,d,maybe", "3.5,e,TRUE", "4,f,True", " 5,g,true"]
    assert _decoded(spark, script, texts) == [
        (1, "a", True), (None, "c", None), (2, "d", False), (4, "f", True)]
    timed = ("CREATE STREAM DT (T TIME, S TIMESTAMP) WITH (KAFKA_TOPIC='dt', "
             "VALUE_FORMAT='DELIMITED', PARTITIONS=1);")
    assert _decoded(spark, timed, ["1000,2000", "41.5,1", "1,1e3", "-5,+6"]) == [
        (1000, datetime(1970, 1, 1, 0, 0, 2)), (-5, datetime(1970, 1, 1, 0, 0, 0, 6000))]


def test_delimited_records_with_too_few_or_too_many_fields_are_skipped(spark: Any) -> None:
    """ksqlDB's DELIMITED deserializer refuses a record whose field count is not its columns'
    ("Unexpected field count"); an empty field is a field (NULL), a quoted delimiter is text."""
    script = ("CREATE STREAM C (ID INT, V STRING, F BOOLEAN) WITH (KAFKA_TOPIC='c', "
              "VALUE_FORMAT='DELIMITED', PARTITIONS=1);")
    texts = ["1,a,true", "2,b", "3,c,true,extra", "4", ",,", '5,"x,y",false', "6,,",
             "7,a,true,"]
    assert _decoded(spark, script, texts) == [
        (1, "a", True), (None, None, None), (5, "x,y", False), (6, None, None)]
    single = ("CREATE STREAM ONE (V STRING) WITH (KAFKA_TOPIC='one', VALUE_FORMAT='DELIMITED', "
              "PARTITIONS=1);")
    assert _decoded(spark, single, ["a", "a,b", ""]) == [("a",), (None,)]
