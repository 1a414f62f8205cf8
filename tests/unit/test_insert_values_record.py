"""The record INSERT VALUES builds: literals coerced as ksqlDB's strict coercer does, and the
key and value bytes in the source's formats (metastore.kafka.row_encoding)."""

from __future__ import annotations

import struct
from decimal import Decimal

import pytest

from metastore.catalog.exceptions import QueryError
from metastore.catalog.image import EMPTY_IMAGE, Image
from metastore.catalog.model import DataSource
from metastore.engine.insert_record import EncodedRecord, InsertValuesError, build, json_row
from metastore.engine.validation import Read, Validator
from metastore.kafka import row_encoding
from metastore.kafka.data_writer import DataWriter
from metastore.server.node import Node, NodeConfig
from metastore.sql.parser import parse
from metastore.sql.statements import InsertValues
from metastore.testing.check import run_script


class _Facts:
    def partitions(self, topic: str) -> int | None:
        return None

    def broker_count(self) -> int | None:
        return 1


def _image(ddl: str) -> Image:
    validator = Validator(EMPTY_IMAGE, _Facts())
    for statement in parse(ddl):
        validator.validate(statement)
    return validator.image


def _insert(sql: str) -> InsertValues:
    (statement,) = parse(sql)
    assert isinstance(statement, InsertValues)
    return statement


def _source(ddl: str) -> DataSource:
    (source,) = _image(ddl).sources.values()
    return source


ALL = _source("CREATE STREAM S (K STRING KEY, I INT, B BIGINT, D DECIMAL(4, 2), F DOUBLE, "
              "T TIMESTAMP, DT DATE, TM TIME, Y BYTES, A ARRAY<INT>, M MAP<STRING, INT>, "
              "ST STRUCT<X INT>) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON', PARTITIONS=1);")


def test_literals_are_coerced_to_the_column_types() -> None:
    record = build(_insert(
        "INSERT INTO S VALUES ('k', 1, 2, 1.5, 3, '2020-01-01T00:00:01.5', '1970-01-03', "
        "'00:00:02', 'AQI=', ARRAY[1, -2], MAP('a' := 1), STRUCT(X := 4));"), ALL, now_ms=99)
    assert record.timestamp_ms == 99
    assert record.row == {"K": "k", "I": 1, "B": 2, "D": Decimal("1.50"), "F": 3.0,
                          "T": 1577836801500, "DT": 2, "TM": 2000, "Y": b"\x01\x02",
                          "A": [1, -2], "M": {"a": 1}, "ST": {"X": 4}}
    encoded = row_encoding.encode_row(ALL, record.row)
    assert encoded.key == b"k"
    assert encoded.value is not None and encoded.value.startswith(
        b'{"I":1,"B":2,"D":1.50,"F":3.0,"T":1577836801500,"DT":2,"TM":2000,"Y":"AQI="')


def test_rowtime_sets_the_timestamp() -> None:
    record = build(_insert("INSERT INTO S (K, ROWTIME) VALUES ('k', 5);"), ALL, now_ms=99)
    assert record.timestamp_ms == 5 and "ROWTIME" not in record.row


@pytest.mark.parametrize(("sql", "message"), [
    ("INSERT INTO S (K, I) VALUES ('k', 'x');",
     "Expected type INTEGER for field `I` but got STRING(x)"),
    ("INSERT INTO S (K, I) VALUES ('k', 3000000000);",
     "Expected type INTEGER for field `I` but got BIGINT(3000000000)"),
    ("INSERT INTO S (K, I) VALUES ('k', 1.5);",
     "Expected type INTEGER for field `I` but got DECIMAL(1.5)"),
    ("INSERT INTO S (K, D) VALUES ('k', 1.234);",
     "Expected type DECIMAL(4, 2) for field `D` but got DECIMAL(1.234)"),
    ("INSERT INTO S (K, D) VALUES ('k', 123);",
     "Expected type DECIMAL(4, 2) for field `D` but got INTEGER(123)"),
    ("INSERT INTO S (K, T) VALUES ('k', 'soon');",
     "Expected type TIMESTAMP for field `T` but got STRING(soon). Timestamp format must be "
     "yyyy-mm-ddThh:mm:ss[.S]"),
    ("INSERT INTO S (K, DT) VALUES ('k', 'x');",
     "Expected type DATE for field `DT` but got STRING(x). Date format must be yyyy-mm-dd"),
    ("INSERT INTO S (K, A) VALUES ('k', 1);",
     "Expected type ARRAY<INTEGER> for field `A` but got INTEGER(1)"),
    ("INSERT INTO S (K, F) VALUES ('k', true);",
     "Expected type DOUBLE for field `F` but got BOOLEAN(true)"),
])
def test_ksqldb_messages_for_values_of_the_wrong_type(sql: str, message: str) -> None:
    with pytest.raises(QueryError) as raised:
        build(_insert(sql), ALL, now_ms=0)
    assert str(raised.value) == f"Failed to insert values into 'S'. {message}"


def test_formats() -> None:
    delimited = _source("CREATE STREAM D (K INT KEY, A STRING, B BOOLEAN, C DECIMAL(3, 1)) WITH "
                        "(KAFKA_TOPIC='d', FORMAT='DELIMITED', VALUE_DELIMITER='TAB', "
                        "PARTITIONS=1);")
    assert row_encoding.encode_row(delimited, {"K": 3, "A": "a b", "B": False,
                                               "C": Decimal("1.0")}) == \
        row_encoding.KafkaBytes(b"3", b"a b\tfalse\t1.0")
    kafka = _source("CREATE STREAM K (K INT KEY, V BIGINT) WITH (KAFKA_TOPIC='k', "
                    "VALUE_FORMAT='KAFKA', PARTITIONS=1);")
    assert row_encoding.encode_row(kafka, {"K": 1, "V": None}) == \
        row_encoding.KafkaBytes(struct.pack(">i", 1), None)
    unwrapped = _source("CREATE STREAM U (K STRING KEY, V INT) WITH (KAFKA_TOPIC='u', "
                        "FORMAT='JSON', WRAP_SINGLE_VALUE=false, PARTITIONS=1);")
    assert row_encoding.encode_row(unwrapped, {"K": "a", "V": 2}) == \
        row_encoding.KafkaBytes(b'"a"', b"2")
    wrapped = _source("CREATE STREAM W (K STRING KEY, V INT) WITH (KAFKA_TOPIC='w', "
                      "FORMAT='JSON', PARTITIONS=1);")
    assert row_encoding.encode_row(wrapped, {"K": "a", "V": 2}) == \
        row_encoding.KafkaBytes(b'"a"', b'{"V":2}')
    none_key = _source("CREATE STREAM N (V INT) WITH (KAFKA_TOPIC='n', KEY_FORMAT='NONE', "
                       "VALUE_FORMAT='JSON', PARTITIONS=1);")
    assert row_encoding.encode_row(none_key, {"V": 1}).key is None
    avro = _source("CREATE STREAM A (V INT) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='AVRO', "
                   "PARTITIONS=1);")
    with pytest.raises(row_encoding.RowEncodingError, match="needs a Schema Registry"):
        row_encoding.encode_row(avro, {"V": 1})


def test_a_produce_kafka_does_not_acknowledge_is_a_typed_error() -> None:
    node = Node(NodeConfig(service_id="svc", bootstrap_servers="127.0.0.1:1"))
    node._data_writer = DataWriter(node.settings, timeout_ms=500)
    try:
        with pytest.raises(InsertValuesError, match=r"Failed to insert values into 'S'\. The "
                                                    r"record was not acknowledged by Kafka"):
            node.insert_values("S", EncodedRecord("t", b"k", b"v", 1))
    finally:
        node._data_writer.close()
    with pytest.raises(InsertValuesError, match="data writer is closed"):  # not a bare 500
        node.insert_values("S", EncodedRecord("t", b"k", b"v", 1))


def _validate(ddl: str, sql: str) -> Read:
    validator = Validator(EMPTY_IMAGE, _Facts(), encoder=row_encoding.encode_record)
    outcome = None
    for statement in parse(ddl + sql):
        outcome = validator.validate(statement)
    assert isinstance(outcome, Read)
    return outcome


def test_the_validator_types_and_encodes_the_record() -> None:
    ddl = ("CREATE STREAM S (K INT KEY, V INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON', "
           "PARTITIONS=1);")
    outcome = _validate(ddl, "INSERT INTO S (K, V, ROWTIME) VALUES (1, 2, 5);")
    assert outcome.record == EncodedRecord("t", struct.pack(">i", 1), b'{"V":2}', 5)
    with pytest.raises(QueryError, match="Expected type INTEGER for field `V`"):
        _validate(ddl, "INSERT INTO S (K, V) VALUES (1, 'x');")
    with pytest.raises(InsertValuesError, match="needs a Schema Registry"):
        _validate(ddl.replace("'JSON'", "'AVRO'"), "INSERT INTO S (K, V) VALUES (1, 2);")


@pytest.mark.parametrize(("number", "fits"), [
    (2**63 - 1, True), (-(2**63), True), (2**63, False), (-(2**63) - 1, False), (10**30, False)])
def test_insert_values_and_inserts_stream_rows_take_the_same_bigints(number: int,
                                                                     fits: bool) -> None:
    """A BIGINT holds a Java long: a literal beyond one is refused when the statement is
    prepared, a JSON row's number beyond one (a BigInteger to Java) when it is coerced."""
    results, _ = run_script(ALL.statement + f"INSERT INTO S (K, B) VALUES ('k', {number});",
                            runtime_check=False)
    assert results[-1].ok is fits, results[-1].message
    if fits:
        assert json_row({"K": "k", "B": number}, ALL)["B"] == number
        return
    assert results[-1].message.endswith(f"Invalid numeric literal: {number}")
    for column in ("B", "I", "F", "D"):
        with pytest.raises(QueryError, match=r"^Can't coerce a field of type class "
                                             r"java\.math\.BigInteger into type "):
            json_row({"K": "k", column: number}, ALL)
    with pytest.raises(QueryError, match=r"into type ARRAY<INTEGER>$"):
        json_row({"K": "k", "A": [1, number]}, ALL)


def test_no_column_takes_a_number_beyond_double() -> None:
    """A JSON row's number (read exactly, as a Decimal) that no DOUBLE holds is refused, as
    ksqlDB refuses such a literal, rather than written as Infinity (which is not JSON)."""
    assert json_row({"K": "k", "F": Decimal("1e308")}, ALL)["F"] == 1e308
    with pytest.raises(QueryError, match="into type DOUBLE"):
        json_row({"K": "k", "F": Decimal("1e999")}, ALL)
    results, _ = run_script(ALL.statement + "INSERT INTO S (K, F) VALUES ('k', 1e999);",
                            runtime_check=False)
    assert results[-1].message.endswith("Number overflows DOUBLE: 1e999")


def test_check_refuses_what_the_node_refuses() -> None:
    results, _ = run_script(
        "CREATE STREAM S (K INT KEY, V INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON', "
        "PARTITIONS=1); INSERT INTO S (K,V) VALUES (1,'x');", runtime_check=False)
    assert [r.ok for r in results] == [True, False]


@pytest.mark.parametrize("rowtime", ["0", "-1"])
def test_a_rowtime_kafka_cannot_hold_is_refused(rowtime: str) -> None:
    with pytest.raises(InsertValuesError, match=r"ROWTIME of 0|non-negative"):
        build(_insert(f"INSERT INTO S (K, ROWTIME) VALUES ('k', {rowtime});"), ALL, now_ms=99)


def test_a_string_that_looks_like_a_decimal_marker_stays_a_string() -> None:
    source = _source("CREATE STREAM S (K STRING KEY, V STRING, D DECIMAL(3, 1)) WITH "
                     "(KAFKA_TOPIC='t', VALUE_FORMAT='JSON', PARTITIONS=1);")
    encoded = row_encoding.encode_row(source, {"K": "k", "V": "\u0000D1.5", "D": Decimal("1.0")})
    assert encoded.value == b'{"V":"\\u0000D1.5","D":1.0}'


def test_a_single_null_delimited_value_is_an_empty_field_not_a_tombstone() -> None:
    source = _source("CREATE STREAM S (K STRING KEY, V STRING) WITH "
                     "(KAFKA_TOPIC='t', VALUE_FORMAT='DELIMITED', PARTITIONS=1);")
    assert row_encoding.encode_row(source, {"K": "k", "V": None}).value == b""
    assert row_encoding.encode_value(None, source) is None  # a test input's null row


def test_constant_expressions_are_evaluated_as_ksqldb_evaluates_them() -> None:
    record = build(_insert(
        "INSERT INTO S (K, I, B, D, A, M, ST) VALUES ('k', 2147483646 + 1, 3 * (4 - 6), "
        "1.25 + 1, ARRAY[1, (1 + 1), CAST(NULL AS INT)], MAP(CAST(NULL AS STRING) := 1), "
        "STRUCT(X := CAST(NULL AS INT)));"), ALL, now_ms=99)
    assert record.row == {"K": "k", "I": 2147483647, "B": -6, "D": Decimal("2.25"),
                          "A": [1, 2, None], "M": {None: 1}, "ST": {"X": None}}
    with pytest.raises(QueryError, match="Only literal values can be inserted for now, not: "):
        build(_insert("INSERT INTO S (K, I) VALUES ('k', ABS(-1));"), ALL, now_ms=99)
    # exact: a sum an INTEGER cannot hold is refused, never written wrapped
    with pytest.raises(QueryError, match="Expected type INTEGER for field `I`"):
        build(_insert("INSERT INTO S (K, I) VALUES ('k', 2147483647 + 1);"), ALL, now_ms=99)
    big = build(_insert("INSERT INTO S (K, B) VALUES ('k', CAST(1 AS BIGINT) + 2147483647);"),
                ALL, now_ms=99)
    assert big.row["B"] == 2147483648


def test_a_null_map_key_and_a_null_struct_field_are_written_as_ksqldb_writes_them() -> None:
    source = _source("CREATE STREAM S (ID INT KEY, V0 MAP<STRING, INT>, V1 STRUCT<f0 INT>) WITH "
                     "(KAFKA_TOPIC='t', VALUE_FORMAT='JSON', PARTITIONS=1);")
    record = build(_insert("INSERT INTO S (ID, V0, V1) VALUES (1, MAP(CAST(NULL AS STRING) := 1), "
                           "STRUCT(f0 := CAST(null AS INT)));"), source, now_ms=5)
    assert row_encoding.encode_row(source, record.row).value == b'{"V0":{"null":1},"V1":{"F0":null}}'
