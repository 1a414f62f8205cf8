"""PROTOBUF_NOSR: the schema derived from a source's columns, and values through it."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pb2 as pb

from metastore.catalog.model import Column, DataSource
from metastore.formats.protobuf import schema, values
from metastore.formats.protobuf.schema import Nullable, derive
from metastore.sql import types as ty
from metastore.sql.statements import ColumnRole, SourceKind

F = pb.FieldDescriptorProto


def files(derived: schema.ProtobufSchema) -> list[pb.FileDescriptorProto]:
    return list(pb.FileDescriptorSet.FromString(derived.descriptor_set).file)


def root(derived: schema.ProtobufSchema) -> pb.DescriptorProto:
    main = files(derived)[-1]
    assert [m.name for m in main.message_type] == [derived.message]
    return main.message_type[0]


def fields(message: pb.DescriptorProto) -> list[tuple[str, int, int, int, str]]:
    return [(f.name, f.number, f.label, f.type, f.type_name) for f in message.field]


def source(columns: list[Column], **properties: str) -> DataSource:
    return DataSource("S", SourceKind.STREAM, tuple(columns), "t", "PROTOBUF_NOSR",
                      "PROTOBUF_NOSR", 1, "", properties=tuple(sorted(properties.items())))


def test_columns_are_fields_of_connect_default_1_in_column_order() -> None:
    derived = derive((("ID", ty.BIGINT), ("NAME", ty.STRING), ("N", ty.INTEGER),
                      ("D", ty.DOUBLE), ("B", ty.BOOLEAN), ("RAW", ty.BYTES)), unwrapped=False)
    assert derived.message == "ConnectDefault1"
    assert not derived.unwrapped
    assert [f.name for f in files(derived)] == ["ConnectDefault1.proto"]
    assert files(derived)[0].syntax == "proto3"
    optional = F.LABEL_OPTIONAL
    assert fields(root(derived)) == [
        ("ID", 1, optional, F.TYPE_INT64, ""), ("NAME", 2, optional, F.TYPE_STRING, ""),
        ("N", 3, optional, F.TYPE_INT32, ""), ("D", 4, optional, F.TYPE_DOUBLE, ""),
        ("B", 5, optional, F.TYPE_BOOL, ""), ("RAW", 6, optional, F.TYPE_BYTES, "")]


def test_nested_types_are_named_depth_first_and_logical_types_are_well_known_messages() -> None:
    inner = ty.StructType((("X", ty.DATE), ("Y", ty.DecimalType(6, 2))))
    derived = derive((("M", ty.MapType(ty.STRING, inner)),
                      ("L", ty.ArrayType(ty.StructType((("Q", ty.TIME),)))),
                      ("TS", ty.TIMESTAMP), ("A", ty.ArrayType(ty.BIGINT))), unwrapped=False)
    assert [f.name for f in files(derived)] == [
        "confluent/type/decimal.proto", "google/protobuf/timestamp.proto",
        "google/type/date.proto", "google/type/timeofday.proto", "ConnectDefault1.proto"]
    message = root(derived)
    repeated, optional, message_type = F.LABEL_REPEATED, F.LABEL_OPTIONAL, F.TYPE_MESSAGE
    assert fields(message) == [
        ("M", 1, repeated, message_type, ".ConnectDefault1.ConnectDefault2Entry"),
        ("L", 2, repeated, message_type, ".ConnectDefault1.ConnectDefault4"),
        ("TS", 3, optional, message_type, ".google.protobuf.Timestamp"),
        ("A", 4, repeated, F.TYPE_INT64, "")]
    entry, struct = message.nested_type
    assert entry.options.map_entry
    assert fields(entry) == [
        ("key", 1, optional, F.TYPE_STRING, ""),
        ("value", 2, optional, message_type,
         ".ConnectDefault1.ConnectDefault2Entry.ConnectDefault3")]
    assert fields(entry.nested_type[0]) == [
        ("X", 1, optional, message_type, ".google.type.Date"),
        ("Y", 2, optional, message_type, ".confluent.type.Decimal")]
    assert fields(struct) == [("Q", 1, optional, message_type, ".google.type.TimeOfDay")]


def test_a_struct_named_as_its_field_gets_the_message_suffix() -> None:
    message = root(derive((("ConnectDefault2", ty.StructType((("A", ty.INTEGER),))),),
                          unwrapped=False))
    assert message.field[0].type_name == ".ConnectDefault1.ConnectDefault2Message"


def test_a_single_unwrapped_column_is_the_root() -> None:
    primitive = derive((("K", ty.BIGINT),), unwrapped=True)
    assert (primitive.message, primitive.unwrapped) == ("google.protobuf.Int64Value", True)
    assert [f.name for f in files(primitive)] == ["google/protobuf/wrappers.proto"]
    struct = derive((("K", ty.StructType((("A", ty.STRING), ("B", ty.INTEGER)))),),
                    unwrapped=True)
    assert struct.message == "ConnectDefault1"
    assert [f[:2] for f in fields(root(struct))] == [("A", 1), ("B", 2)]


def test_key_and_value_schemas_of_a_source() -> None:
    key = Column("K", ty.STRING, ColumnRole.KEY)
    value = Column("V", ty.INTEGER)
    assert schema.key_schema(source([key, value])).message == "google.protobuf.StringValue"
    assert schema.value_schema(source([key, value])).message == "ConnectDefault1"
    unwrapped = source([key, value], WRAP_SINGLE_VALUE="false")
    assert schema.value_schema(unwrapped).message == "google.protobuf.Int32Value"
    two_keys = source([key, Column("K2", ty.INTEGER, ColumnRole.KEY), value])
    assert [f[:2] for f in fields(root(schema.key_schema(two_keys)))] == [("K", 1), ("K2", 2)]


def test_nullable_representations() -> None:
    columns = (("I", ty.INTEGER), ("S", ty.StructType((("A", ty.STRING),))),
               ("L", ty.ArrayType(ty.BIGINT)))
    optional = root(derive(columns, unwrapped=False, nullable=Nullable.OPTIONAL))
    assert [(f.name, f.proto3_optional, f.oneof_index if f.HasField("oneof_index") else None)
            for f in optional.field] == [("I", True, 0), ("S", True, 1), ("L", False, None)]
    assert [o.name for o in optional.oneof_decl] == ["_I", "_S"]
    assert optional.nested_type[0].field[0].proto3_optional
    wrapper = derive(columns, unwrapped=False, nullable=Nullable.WRAPPER)
    assert [f.type_name for f in root(wrapper).field] == [
        ".google.protobuf.Int32Value", ".ConnectDefault1.ConnectDefault2",
        ".google.protobuf.Int64Value"]
    assert schema.nullable(source([], VALUE_PROTOBUF_NULLABLE_REPRESENTATION="WRAPPER"),
                           "value") is Nullable.WRAPPER
    assert schema.nullable(source([]), "key") is Nullable.DEFAULT


def test_the_derivation_is_a_pure_function_of_the_columns() -> None:
    columns = (("A", ty.MapType(ty.STRING, ty.StructType((("B", ty.DATE),)))),
               ("C", ty.DecimalType(4, 1)))
    first = derive(columns, unwrapped=False)
    derive.cache_clear()
    second = derive(tuple((name, sql_type) for name, sql_type in columns), unwrapped=False)
    assert first is not second
    assert first == second
    assert first.spec.startswith("ConnectDefault1:")


@pytest.mark.parametrize(("columns", "unwrapped", "reason"), [
    ((("M", ty.MapType(ty.INTEGER, ty.STRING)),), False, "only supports MAP types with STRING keys"),
    ((("A", ty.ArrayType(ty.ArrayType(ty.INTEGER))),), False, "an ARRAY of ARRAY"),
    ((("A", ty.ArrayType(ty.INTEGER)),), True, "a single unwrapped ARRAY"),
    ((("D", ty.DATE),), True, "a single unwrapped DATE"),
    ((("my col", ty.INTEGER),), False, "not a Protobuf field name"),
])
def test_what_cannot_be_derived(columns: schema.Columns, unwrapped: bool, reason: str) -> None:
    problem = schema.problem_of(columns, unwrapped)
    assert problem is not None and reason in problem
    with pytest.raises(ValueError, match=reason):
        derive(columns, unwrapped)


def test_values_on_the_wire() -> None:
    derived = derive((("ID", ty.BIGINT), ("N", ty.INTEGER), ("S", ty.STRING)), unwrapped=False)
    assert values.encode(derived, {"id": 5, "n": None, "s": "x", "other": 1}) == b"\x08\x05\x1a\x01x"
    assert values.decode(derived, b"\x08\x05") == {"ID": 5, "N": 0, "S": ""}  # NULLs read as defaults
    assert values.encode(derived, {}) == b""
    assert values.encode(derived, None) is None
    optional = derive((("N", ty.INTEGER),), unwrapped=False, nullable=Nullable.OPTIONAL)
    assert values.encode(optional, {"N": 0}) == b"\x08\x00"
    assert values.decode(optional, b"") == {"N": None}
    key = derive((("K", ty.BIGINT),), unwrapped=True)
    assert values.encode(key, 7) == b"\x08\x07"  # the bytes of a message whose field 1 is 7
    assert values.decode(key, b"") == 0


def test_values_of_nested_and_logical_types_round_trip() -> None:
    derived = derive((("M", ty.MapType(ty.STRING, ty.DATE)), ("DEC", ty.DecimalType(6, 3)),
                      ("TS", ty.TIMESTAMP), ("T", ty.TIME), ("B", ty.BYTES),
                      ("S", ty.StructType((("A", ty.ArrayType(ty.STRING)),))),
                      ("E", ty.StructType((("A", ty.INTEGER),)))), unwrapped=False)
    value = {"M": {"a": 10, "b": -1}, "DEC": -12.345, "TS": 1700000000123, "T": 3723004,
             "B": "AQID", "S": {"A": ["x", "y"]}, "E": None}
    encoded = values.encode(derived, value)
    assert encoded is not None
    assert values.decode(derived, encoded) == value
    decimal = derive((("DEC", ty.DecimalType(6, 3)),), unwrapped=False)
    # confluent.type.Decimal: the unscaled value big-endian two's complement, precision, scale
    assert values.encode(decimal, {"DEC": -12.345}) == b"\x0a\x08\x0a\x02\xcf\xc7\x10\x05\x18\x03"
