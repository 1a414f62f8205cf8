"""A record a query cannot read is skipped, never turned into a row of NULLs: the decoding every
reader shares (metastore.spark.views.decode_select), on a real Spark, with ksqlDB's JSON and
DELIMITED deserializers' rules: a value present that its column's type refuses makes the record
unreadable; an absent field or a JSON null is a NULL column."""

from __future__ import annotations

import math
import struct
from datetime import datetime
from decimal import Decimal
from typing import Any

from metastore.spark.types import string_literal
from metastore.spark.views import decode_select, nested_kinds_check
from metastore.sql import types as ty
from metastore.testing.check import run_script
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


def test_values_nested_in_arrays_maps_and_structs_are_read_by_their_json_kind(
        spark: Any) -> None:
    """ksqlDB's rules hold at every level of a column's type: an element, a map value or a
    struct field of the wrong JSON kind makes the record unreadable, where Spark's from_json
    reads it by its text ("41.5" as 41) or as NULL."""
    script = ("CREATE STREAM N (ID INT, A ARRAY<INT>, S STRUCT<F BOOLEAN, L ARRAY<BIGINT>, "
              "D DECIMAL(4, 2)>, M MAP<STRING, DOUBLE>) WITH (KAFKA_TOPIC='n', "
              "VALUE_FORMAT='JSON', PARTITIONS=1);")
    texts = [
        '{"ID": 1, "A": [1, "2", 3.7], "S": {"f": true, "L": ["5", 6], "D": "1.5"}, '
        '"M": {"x": "1.5", "y": 2}}',
        '{"ID": 2, "A": ["41.5"]}',
        '{"ID": 3, "S": {"F": "true"}}',
        '{"ID": 4, "S": {"L": [true]}}',
        '{"ID": 5, "M": {"x": "abc"}}',
        '{"ID": 6, "A": [[1]]}',
        '{"ID": 7, "S": {"D": 1.234}}',
        '{"ID": 8, "S": {"D": 123.4}}',
        '{"ID": 9, "A": [null, 2], "S": {"F": null, "L": null}, "M": {"x": null}}',
        '{"ID": 10, "S": {"L": {"a": 1}}}',
        '{"ID": 11, "M": {"x": [1]}}',
    ]
    assert _decoded(spark, script, texts) == [
        (1, [1, 2, 3], (True, [5, 6], Decimal("1.50")), {"x": 1.5, "y": 2.0}),
        (9, [None, 2], (None, None, None), {"x": None}),
    ]


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
    assert _decoded(spark, timed, ["1000,2000", "41.5,1", "1,1e3", "5,+6"]) == [
        (1000, datetime(1970, 1, 1, 0, 0, 2)), (5, datetime(1970, 1, 1, 0, 0, 0, 6000))]


def test_a_decimal_that_would_round_and_a_time_past_a_day_are_refused(spark: Any) -> None:
    """ksqlDB's JSON and DELIMITED deserializers take a DECIMAL only when it fits its precision
    and scale without rounding (DecimalUtil.ensureFit), and a TIME only within a day
    (SerdeUtils.returnTimeOrThrow), where Spark's cast would round or take any number."""
    script = ("CREATE STREAM F (ID INT, D DECIMAL(4, 2), T TIME) WITH (KAFKA_TOPIC='f', "
              "VALUE_FORMAT='JSON', PARTITIONS=1);")
    texts = ['{"ID": 1, "D": 1.5, "T": 86400000}', '{"ID": 2, "D": 1.005}',
             '{"ID": 3, "D": "12.340", "T": "0"}', '{"ID": 4, "D": 100}',
             '{"ID": 5, "T": 86400001}', '{"ID": 6, "T": -1}', '{"ID": 7, "D": "1.2e1"}',
             '{"ID": 8, "d": 99.999}', '{"ID": 9, "D": null, "T": null}']
    assert _decoded(spark, script, texts) == [
        (1, Decimal("1.50"), 86400000), (3, Decimal("12.34"), 0), (7, Decimal("12.00"), None),
        (9, None, None)]
    delimited = script.replace("'f', VALUE_FORMAT='JSON'", "'fd', VALUE_FORMAT='DELIMITED'")
    assert _decoded(spark, delimited, ["1,+1.50,5", "2,1.005,5", "3,,", "4,.5,-1",
                                       "5,100,5", "6,1,86400001"]) == [
        (1, Decimal("1.50"), 5), (3, None, None)]
    bare = ("CREATE STREAM B (D DECIMAL(4, 2)) WITH (KAFKA_TOPIC='bd', VALUE_FORMAT='JSON', "
            "WRAP_SINGLE_VALUE=false, PARTITIONS=1);")
    assert _decoded(spark, bare, ["1.25", "1.255", '"2.5"', "100", "null"]) == [
        (Decimal("1.25"),), (Decimal("2.50"),), (None,)]


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


NESTED_KINDS = [  # (JSON text, type, whether ksqlDB's JSON deserializer takes it)
    ('[1, "2", 3.5]', ty.ArrayType(ty.INTEGER), True),  # a number's fraction is cut off
    ('["2.5"]', ty.ArrayType(ty.INTEGER), False),  # Integer.parseInt
    ('["99999999999"]', ty.ArrayType(ty.INTEGER), False),
    ('["99999999999"]', ty.ArrayType(ty.BIGINT), True),
    ("[true, null]", ty.ArrayType(ty.BOOLEAN), True),
    ('["true"]', ty.ArrayType(ty.BOOLEAN), False),
    ('["1e3", 2]', ty.ArrayType(ty.DOUBLE), True),
    ('["x"]', ty.ArrayType(ty.DOUBLE), False),
    ('["AQI="]', ty.ArrayType(ty.BYTES), True),
    ("[1]", ty.ArrayType(ty.BYTES), False),
    ('["@@"]', ty.ArrayType(ty.BYTES), False),
    ("[86400000]", ty.ArrayType(ty.TIME), True),  # a day's milliseconds, included
    ("[86400001]", ty.ArrayType(ty.TIME), False),
    ("[-1]", ty.ArrayType(ty.TIME), False),
    ('["1.50", 2]', ty.ArrayType(ty.DecimalType(3, 2)), True),
    ("[1.505]", ty.ArrayType(ty.DecimalType(3, 2)), False),  # only without rounding
    ("[10.5]", ty.ArrayType(ty.DecimalType(3, 2)), False),  # too many integer digits
    ('[0, "0", 0E+1, -0.99]', ty.ArrayType(ty.DecimalType(2, 2)), True),  # below 10^0
    ("[1]", ty.ArrayType(ty.DecimalType(2, 2)), False),
    ('{"a": {"b": 1}}', ty.MapType(ty.STRING, ty.StructType((("B", ty.INTEGER),))), True),
    ('{"a": {"B": "x"}}', ty.MapType(ty.STRING, ty.StructType((("B", ty.INTEGER),))), False),
    ('{"a": [1]}', ty.StructType((("B", ty.INTEGER),)), True),  # a field no column names
    ('"[1]"', ty.ArrayType(ty.INTEGER), False),  # never from a string holding an array
    ('[[1], {"a": 1}, "x", 2]', ty.ArrayType(ty.STRING), True),  # a STRING from anything
    ("[1", ty.ArrayType(ty.INTEGER), False),
    (None, ty.ArrayType(ty.INTEGER), True),
]


def test_the_jvm_check_of_nested_kinds_follows_ksqldbs_json_deserializer(spark: Any) -> None:
    checks = [_nested_check(text, sql_type) for text, sql_type, _ in NESTED_KINDS]
    [row] = spark.sql(f"SELECT array({', '.join(checks)})").collect()
    assert [not refused for refused in row[0]] == [taken for _, _, taken in NESTED_KINDS]


def _nested_check(text: str | None, sql_type: ty.SqlType) -> str:
    literal = "CAST(NULL AS STRING)" if text is None else string_literal(text)
    check = nested_kinds_check(literal, sql_type)
    assert check is not None, "a type that nests others is checked"
    return f"coalesce({check}, false)"


def _kafka_decoded(spark: Any, script: str, records: list[tuple[bytes | None, bytes | None]]
                   ) -> list[tuple[Any, ...]]:
    results, image = run_script(script)
    assert all(r.ok for r in results)
    [source] = image.sources.values()

    def literal(raw: bytes | None) -> str:
        return "CAST(NULL AS BINARY)" if raw is None else f"X'{raw.hex()}'"

    rows = ", ".join(f"({index}, {literal(key)}, {literal(value)})"
                     for index, (key, value) in enumerate(records))
    raw = f"(SELECT key, value FROM (SELECT * FROM VALUES {rows} AS v(i, key, value) ORDER BY i))"
    return [tuple(row) for row in spark.sql(decode_select(source, raw)).collect()]


def test_kafka_numbers_are_read_as_kafkas_deserializers_read_them(spark: Any) -> None:
    """Big-endian, signed, of exactly 4 (INT) or 8 (BIGINT, DOUBLE) bytes: a record of another
    size is skipped; a record without a key or value has a NULL column."""
    script = ("CREATE STREAM KN (K INT KEY, V BIGINT) WITH (KAFKA_TOPIC='kn', KEY_FORMAT='KAFKA', "
              "VALUE_FORMAT='KAFKA', PARTITIONS=1);")
    records = [(struct.pack(">i", -5), struct.pack(">q", -2**63)),
               (struct.pack(">i", 2**31 - 1), struct.pack(">q", 2**63 - 1)),
               (None, struct.pack(">q", 258)),
               (b"\x00\x01\x02", struct.pack(">q", 1)),
               (struct.pack(">i", 1), b"\x00" * 4)]
    assert _kafka_decoded(spark, script, records) == [(-5, -2**63), (2**31 - 1, 2**63 - 1),
                                                      (None, 258)]
    doubles = ("CREATE STREAM KD (V DOUBLE) WITH (KAFKA_TOPIC='kd', VALUE_FORMAT='KAFKA', "
               "PARTITIONS=1);")
    values = [-0.0, 1.5e308, -2.25, float("inf")]
    decoded = _kafka_decoded(spark, doubles, [(None, struct.pack(">d", v)) for v in values]
                             + [(None, b"\x00" * 7)])
    assert decoded == [(v,) for v in values]
    assert math.copysign(1, decoded[0][0]) == -1
