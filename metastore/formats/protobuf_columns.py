"""ksqlDB's columns of a Protobuf schema: what a CREATE of a PROTOBUF source without columns
infers from the registry.

The rules of Confluent's ProtobufData (Protobuf to Connect) under ksqlDB's translation:

- the root is the message ``<SIDE>_SCHEMA_FULL_NAME`` names, else the file's first message; its
  fields, in order, are the columns (PROTOBUF never unwraps, so a key is its message's fields: a
  key of more than one is refused);
- field names are upper-cased, at every depth, unless the schema was named by its id;
- ``int32``, ``sint32``, ``sfixed32`` are INTEGER; ``int64``, ``uint32``, ``uint64`` and the other
  64-bit and unsigned kinds BIGINT; ``float``, ``double`` DOUBLE; ``bool`` BOOLEAN; ``string`` and
  enums STRING; ``bytes`` BYTES; ``google.protobuf.Timestamp`` TIMESTAMP, ``google.type.Date``
  DATE, ``google.type.TimeOfDay`` TIME, ``confluent.type.Decimal`` DECIMAL (of the
  precision and scale its ``confluent.field_meta`` option gives, else 64 and 0), a
  ``google.protobuf.*Value`` wrapper its value's type; another message a STRUCT of its fields;
  ``repeated`` an ARRAY, a map a MAP<STRING, _>; a ``oneof`` a STRUCT of its fields, named
  ``<oneof>_<index>``;
- a message that contains itself cannot be a column.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf import descriptor_pb2 as pb

from metastore.formats import proto_files
from metastore.formats.avro_columns import AvroColumnsError, Budget
from metastore.sql import types as ty

_F = pb.FieldDescriptorProto


class ProtobufColumnsError(ValueError):
    """A Protobuf schema that cannot be the columns of a source; ksqlDB's reason."""


_SCALARS: dict[int, ty.SqlType] = {
    _F.TYPE_INT32: ty.INTEGER, _F.TYPE_SINT32: ty.INTEGER, _F.TYPE_SFIXED32: ty.INTEGER,
    _F.TYPE_INT64: ty.BIGINT, _F.TYPE_SINT64: ty.BIGINT, _F.TYPE_SFIXED64: ty.BIGINT,
    _F.TYPE_UINT32: ty.BIGINT, _F.TYPE_FIXED32: ty.BIGINT, _F.TYPE_UINT64: ty.BIGINT,
    _F.TYPE_FIXED64: ty.BIGINT, _F.TYPE_FLOAT: ty.DOUBLE, _F.TYPE_DOUBLE: ty.DOUBLE,
    _F.TYPE_BOOL: ty.BOOLEAN, _F.TYPE_STRING: ty.STRING, _F.TYPE_BYTES: ty.BYTES,
    _F.TYPE_ENUM: ty.STRING,
}
_WELL_KNOWN: dict[str, ty.SqlType] = {
    ".google.protobuf.Timestamp": ty.TIMESTAMP, ".google.type.Date": ty.DATE,
    ".google.type.TimeOfDay": ty.TIME, ".confluent.type.Decimal": ty.DecimalType(64, 0),
    ".google.protobuf.DoubleValue": ty.DOUBLE, ".google.protobuf.FloatValue": ty.DOUBLE,
    ".google.protobuf.Int64Value": ty.BIGINT, ".google.protobuf.UInt64Value": ty.BIGINT,
    ".google.protobuf.Int32Value": ty.INTEGER, ".google.protobuf.UInt32Value": ty.BIGINT,
    ".google.protobuf.BoolValue": ty.BOOLEAN, ".google.protobuf.StringValue": ty.STRING,
    ".google.protobuf.BytesValue": ty.BYTES,
}


def root_message(file: pb.FileDescriptorProto, full_name: str | None) -> str:
    """The full name (``.package.Message``) of the schema's root message."""
    package = f".{file.package}" if file.package else ""
    if full_name:
        wanted = full_name if full_name.startswith(".") else f".{full_name}"
        for scope, message in _messages(file):
            if f"{scope}.{message.name}" in (wanted, f"{package}.{full_name}"):
                return f"{scope}.{message.name}"
        raise ProtobufColumnsError(f"Schema with name {full_name} not found in the schema")
    if not file.message_type:
        raise ProtobufColumnsError("the schema defines no message")
    return f"{package}.{file.message_type[0].name}"


def columns_of(schema_text: str, full_name: str | None, original_names: bool,
               imports: Sequence[tuple[str, str]] = ()) -> list[tuple[str, ty.SqlType]]:
    """The (name, type) columns of the root message of the ``.proto`` text, whose messages may
    be those of the files it ``imports`` (name and text, as its references give them)."""
    try:
        files = proto_files.parse_with_imports(schema_text, imports)
    except proto_files.ProtoFileError as error:
        raise ProtobufColumnsError(f"not a Protobuf schema: {error}") from error
    messages = {f"{scope}.{message.name}": message
                for file in files for scope, message in _messages(file)}
    root = root_message(files[-1], full_name)
    columns = _fields(messages[root], messages, original_names, (root,), Budget())
    if not columns:
        raise ProtobufColumnsError("Schema does not include any columns with types that ksqlDB "
                                   "supports.")
    return columns


def _messages(file: pb.FileDescriptorProto) -> list[tuple[str, pb.DescriptorProto]]:
    found: list[tuple[str, pb.DescriptorProto]] = []

    def walk(scope: str, messages: list[pb.DescriptorProto]) -> None:
        for message in messages:
            found.append((scope, message))
            walk(f"{scope}.{message.name}", list(message.nested_type))

    walk(f".{file.package}" if file.package else "", list(file.message_type))
    return found


def _fields(message: pb.DescriptorProto, messages: dict[str, pb.DescriptorProto],
            original: bool, path: tuple[str, ...], budget: Budget
            ) -> list[tuple[str, ty.SqlType]]:
    fields: list[tuple[str, ty.SqlType]] = []
    oneofs: dict[int, list[tuple[str, ty.SqlType]]] = {}
    for field in message.field:
        try:
            budget.spend(len(path))
        except AvroColumnsError as error:
            raise ProtobufColumnsError(str(error)) from error
        sql_type = _field_type(field, messages, original, path, budget)
        name = field.name if original else field.name.upper()
        if field.HasField("oneof_index") and not field.proto3_optional:
            members = oneofs.setdefault(field.oneof_index, [])
            if not members:
                group = message.oneof_decl[field.oneof_index].name
                group_name = f"{group}_{field.oneof_index}"
                fields.append((group_name if original else group_name.upper(),
                               ty.StructType(())))
            members.append((name, sql_type))
            continue
        fields.append((name, sql_type))
    for index, members in oneofs.items():
        group = f"{message.oneof_decl[index].name}_{index}"
        shown = group if original else group.upper()
        fields = [(n, ty.StructType(tuple(members)) if n == shown else t) for n, t in fields]
    return fields


def _field_type(field: pb.FieldDescriptorProto, messages: dict[str, pb.DescriptorProto],
                original: bool, path: tuple[str, ...], budget: Budget) -> ty.SqlType:
    if field.type != _F.TYPE_MESSAGE:
        scalar = _SCALARS.get(field.type)
        if scalar is None:
            raise ProtobufColumnsError(f"field {field.name}: unsupported type")
        return ty.ArrayType(scalar) if field.label == _F.LABEL_REPEATED else scalar
    target = messages.get(field.type_name)
    if target is not None and target.options.map_entry:
        value = target.field[1]
        return ty.MapType(ty.STRING, _field_type(_single(value), messages, original, path,
                                                 budget))
    if field.type_name == ".confluent.type.Decimal":  # its precision and scale: field options
        element: ty.SqlType = _decimal(field)
    else:
        element = _message_type(field.type_name, messages, original, path, budget)
    return ty.ArrayType(element) if field.label == _F.LABEL_REPEATED else element


def _decimal(field: pb.FieldDescriptorProto) -> ty.SqlType:
    """A ``confluent.type.Decimal`` field's DECIMAL: the ``precision`` and ``scale`` of its
    ``(confluent.field_meta)`` params (ProtobufData's rule), 64 and 0 without them."""
    params = proto_files.field_meta(field)
    try:
        precision = int(params.get("precision", "64"))
        scale = int(params.get("scale", "0"))
    except ValueError as error:
        raise ProtobufColumnsError(f"field {field.name}: a decimal's precision and scale are "
                                   f"numbers") from error
    return ty.DecimalType(precision, scale)


def _single(field: pb.FieldDescriptorProto) -> pb.FieldDescriptorProto:
    single = pb.FieldDescriptorProto()
    single.CopyFrom(field)
    single.label = _F.LABEL_OPTIONAL
    return single


def _message_type(name: str, messages: dict[str, pb.DescriptorProto], original: bool,
                  path: tuple[str, ...], budget: Budget) -> ty.SqlType:
    if name in _WELL_KNOWN:
        return _WELL_KNOWN[name]
    if name in path:
        raise ProtobufColumnsError(f"{name.lstrip('.')} contains itself")
    if len(path) > proto_files.MAX_DEPTH:
        raise ProtobufColumnsError("messages nested too deeply")
    message = messages.get(name)
    if message is None:
        raise ProtobufColumnsError(f"{name.lstrip('.')} is not defined in the schema")
    return ty.StructType(tuple(_fields(message, messages, original, (*path, name), budget)))
