"""The Schema Registry formats' pure parts: Avro's binary encoding, the columns inferred from
Avro, JSON and Protobuf schemas (ksqlDB's rules, bounded work, malformed schemas as statement
errors), the ``.proto`` reader and writer, PROTOBUF framing, and the schema a source writes."""

from __future__ import annotations

import json
import time
from decimal import Decimal

import pytest
from google.protobuf import descriptor_pb2 as pb

from metastore.catalog.exceptions import SchemaError
from metastore.catalog.model import Column, DataSource
from metastore.engine.inference import PrefetchedSchemas, infer_columns
from metastore.formats import avro_columns, json_schema_columns, proto_files, protobuf_columns
from metastore.formats.avro import binary
from metastore.formats.protobuf import proto_text, values
from metastore.formats.protobuf.schema import derive, registered
from metastore.formats.written_schemas import written_schema
from metastore.schema_registry.client import RegisteredSchema
from metastore.sql import statements as st
from metastore.sql import types as ty
from metastore.sql.parser import parse


def zigzag(number: int) -> bytes:
    encoded, out = (number << 1) ^ (number >> 63), bytearray()
    while encoded > 0x7F:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)


def test_avro_binary_follows_the_specification() -> None:
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "ID", "type": "long"}, {"name": "NAME", "type": ["null", "string"]},
        {"name": "TAGS", "type": {"type": "array", "items": "string"}},
        {"name": "M", "type": {"type": "map", "values": "int"}},
        {"name": "D", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4,
                               "scale": 2}}]}
    encoded = binary.encode(schema, {"id": -3, "NAME": None, "TAGS": ["a"], "M": {},
                                     "D": Decimal("-1.5")})
    assert encoded == (zigzag(-3) + zigzag(0) + zigzag(1) + zigzag(1) + b"a" + zigzag(0)
                       + zigzag(0) + zigzag(2) + (-150).to_bytes(2, "big", signed=True))
    with pytest.raises(binary.AvroEncodingError):
        binary.encode(schema, {"ID": None})


def test_avro_decimals_keep_every_digit() -> None:
    schema = {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}
    value = Decimal("123456789012345678901234567890123456.78")
    data = binary.encode(schema, value)
    unscaled = int.from_bytes(data[len(zigzag(len(data) - 1)):], "big", signed=True)
    assert unscaled == 12345678901234567890123456789012345678


def test_avro_columns_follow_ksqldbs_rules() -> None:
    record = json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A"]}},
        {"name": "nothing", "type": "null"},  # no ksqlDB type: left out
        {"name": "inner", "type": {"type": "record", "name": "I", "fields": [
            {"name": "x", "type": "K"}]}}]})
    assert avro_columns.columns_of(record, False, False, False) == [
        ("ID", ty.BIGINT), ("AT", ty.TIMESTAMP), ("KIND", ty.STRING),
        ("INNER", ty.StructType((("X", ty.STRING),)))]
    assert [n for n, _ in avro_columns.columns_of(record, False, False, True)] == [
        "id", "at", "kind", "inner"]
    assert avro_columns.columns_of('"int"', True, False, False) == [("ROWKEY", ty.INTEGER)]
    with pytest.raises(avro_columns.AvroColumnsError, match="WRAP_SINGLE_VALUE=false"):
        avro_columns.columns_of('"int"', False, False, False)


def doubling(levels: int) -> str:
    """A record whose types reuse each other: 2^levels nodes once expanded."""
    schema: object = "string"
    for level in range(levels):
        schema = {"type": "record", "name": f"R{level}", "fields": [
            {"name": "a", "type": schema}, {"name": "b", "type": f"R{level - 1}"
                                            if level else "string"}]}
    return json.dumps(schema)


@pytest.mark.serial  # measures the machine: alone, after the parallel phase
def test_a_schema_that_expands_exponentially_is_refused_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(avro_columns.AvroColumnsError, match="more than 10000 types"):
        avro_columns.columns_of(doubling(24), False, False, False)
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("schema", [
    '{"type": "record", "name": "R", "fields": [{"name": "d", "type": {"type": "bytes", '
    '"logicalType": "decimal", "precision": "x"}}]}',
    '{"type": "record", "name": "R", "fields": ["a"]}',
    "[" * 5000 + "]" * 5000,
    '{"type": "record", "name": "R", "fields": [{"name": "d", "type": {"type": "bytes", '
    '"logicalType": "decimal", "precision": 100, "scale": 2}}]}',
    '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, '
    '{"name": "a", "type": "int"}]}',
])
def test_a_malformed_registered_schema_is_the_statements_error(schema: str) -> None:
    statement = parse("CREATE STREAM S WITH (KAFKA_TOPIC='t', VALUE_FORMAT='AVRO');")[0]
    assert isinstance(statement, st.CreateSource)
    registry = PrefetchedSchemas({"t-value": RegisteredSchema(1, schema)})
    with pytest.raises(SchemaError):
        infer_columns(statement, [], "KAFKA", "AVRO", registry)


def test_json_schema_columns() -> None:
    schema = json.dumps({"type": "object", "properties": {
        "b": {"type": "integer", "connect.index": 1, "connect.type": "int32"},
        "a": {"oneOf": [{"type": "null"}, {"type": "number"}], "connect.index": 0},
        "m": {"type": "object", "additionalProperties": {"type": "string"}},
        "t": {"type": "integer", "title": "org.apache.kafka.connect.data.Timestamp"}}})
    assert json_schema_columns.columns_of(schema, False, False, False) == [
        ("A", ty.DOUBLE), ("B", ty.INTEGER), ("M", ty.MapType(ty.STRING, ty.STRING)),
        ("T", ty.TIMESTAMP)]


PROTO = """syntax = "proto3";
package shop;
// a comment
message First { int32 unused = 1; }
message Order {
  optional string note = 7;
  oneof choice { int64 a = 3 [(confluent.field_meta) = { params: [{ key: "k", value: "v" }] }];
                 string b = 4; }
  map<string, Item> items = 2;
  uint32 count = 9;
  message Item { repeated double prices = 1; }
}
"""


def test_the_proto_reader_keeps_numbers_and_protocs_oneof_order() -> None:
    file = proto_files.parse(PROTO)
    order = file.message_type[1]
    assert [(f.name, f.number) for f in order.field] == [
        ("note", 7), ("a", 3), ("b", 4), ("items", 2), ("count", 9)]
    assert [o.name for o in order.oneof_decl] == ["choice", "_note"]
    assert order.field[3].type_name == ".shop.Order.ItemsEntry"
    assert protobuf_columns.columns_of(PROTO, "shop.Order", False) == [
        ("NOTE", ty.STRING), ("CHOICE_0", ty.StructType((("A", ty.BIGINT), ("B", ty.STRING)))),
        ("ITEMS", ty.MapType(ty.STRING, ty.StructType((("PRICES", ty.ArrayType(ty.DOUBLE)),)))),
        ("COUNT", ty.BIGINT)]
    with pytest.raises(proto_files.ProtoFileError, match="line 2"):
        proto_files.parse('syntax = "proto3";\nmessage M { int32 x = ; }')
    with pytest.raises(protobuf_columns.ProtobufColumnsError, match="contains itself"):
        protobuf_columns.columns_of("message M { M m = 1; }", None, False)


def test_a_decimal_field_has_the_precision_and_scale_of_its_field_meta() -> None:
    proto = ('syntax = "proto3"; import "confluent/type/decimal.proto"; message M {\n'
             'confluent.type.Decimal d = 1 [(confluent.field_meta) = { params: [{ value: "4", '
             'key: "precision" }, { key: "scale", value: "2" }]}];\n'
             'confluent.type.Decimal plain = 2;\n'
             'repeated confluent.type.Decimal many = 3 [deprecated = true, (confluent.field_meta)'
             ' = { params: [{ key: "precision", value: "10" }] }];\n}')
    assert protobuf_columns.columns_of(proto, None, False) == [
        ("D", ty.DecimalType(4, 2)), ("PLAIN", ty.DecimalType(64, 0)),
        ("MANY", ty.ArrayType(ty.DecimalType(10, 0)))]


def test_a_registered_root_is_framed_with_its_message_index() -> None:
    schema = registered(PROTO, "shop.Order")
    assert schema.message == "shop.Order" and schema.indexes == (1,)
    message = values.encode(schema, {"COUNT": 5})
    assert message is not None
    record = values.framed(7, message, schema.indexes)
    assert record[:5] == b"\0\0\0\0\x07" and record[5:7] == bytes([2, 2])  # [1], zig-zag
    assert values.unframed(record) == message
    assert values.framed(7, message)[5] == 0 and values.unframed(values.framed(7, message)) == \
        message


def test_a_derived_schema_renders_as_proto_text_that_reads_back() -> None:
    columns = (("ID", ty.INTEGER), ("TAGS", ty.ArrayType(ty.STRING)),
               ("M", ty.MapType(ty.STRING, ty.DOUBLE)),
               ("S", ty.StructType((("X", ty.STRING), ("T", ty.TIMESTAMP)))))
    derived = derive(columns, False)
    text = proto_text.render(derived)
    read = proto_files.parse(text).message_type[0]
    built = pb.FileDescriptorSet.FromString(derived.descriptor_set).file[-1].message_type[0]
    assert [(f.name, f.number, f.type, f.label) for f in read.field] == [
        (f.name, f.number, f.type, f.label) for f in built.field]
    assert 'import "google/protobuf/timestamp.proto";' in text


def source(properties: tuple[tuple[str, str], ...] = ()) -> DataSource:
    return DataSource("S", st.SourceKind.STREAM, (
        Column("ID", ty.INTEGER, st.ColumnRole.KEY), Column("V", ty.STRING, st.ColumnRole.VALUE)),
        "orders", "AVRO", "JSON_SR", 1, "", properties=properties)


def test_a_source_writes_its_inferred_schema_else_the_derived_one() -> None:
    key = written_schema(source(), True)
    value = written_schema(source(), False)
    assert key is not None and key.subject == "orders-key" and key.schema_type == "AVRO"
    assert json.loads(key.text) == ["null", "int"]
    assert value is not None and value.schema_type == "JSON"
    assert list(json.loads(value.text)["properties"]) == ["V"]
    kept = written_schema(source((("registry.valueSchema", '{"type": "object"}'),)), False)
    assert kept is not None and kept.text == '{"type": "object"}' and kept.schema_type == "JSON"
