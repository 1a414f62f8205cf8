"""The Protobuf schema ksqlDB derives for a PROTOBUF_NOSR key or value, from the columns alone.

ksqlDB (Confluent's ``ProtobufData.fromConnectSchema`` over the columns' Connect schema, every
field optional) builds a proto3 file without a package:

- the columns (the key columns for the key, the value columns for the value) are the fields of a
  message ``ConnectDefault1``, named as the columns and numbered 1, 2, ... in column order;
- a single *unwrapped* column (a single key column, or a single value column with
  ``WRAP_SINGLE_VALUE=false``) is the root itself: a primitive as its ``google.protobuf.*Value``
  wrapper, a STRUCT as its own message; an ARRAY or MAP cannot be a root;
- BOOLEAN is ``bool``, INTEGER ``int32``, BIGINT ``int64``, DOUBLE ``double``, STRING ``string``,
  BYTES ``bytes``, DECIMAL ``confluent.type.Decimal``, DATE ``google.type.Date``, TIME
  ``google.type.TimeOfDay``, TIMESTAMP ``google.protobuf.Timestamp``; an ARRAY is a repeated field
  of its element, a MAP<STRING, V> a map field whose entry is ``ConnectDefault<N>Entry``, a STRUCT
  a nested message ``ConnectDefault<N>`` (N counts the named types in the order they are met,
  depth first; ``Message`` is appended when the name equals its field's);
- NULLs, by ``KEY_`` / ``VALUE_PROTOBUF_NULLABLE_REPRESENTATION``: by default nothing marks them,
  a NULL is an absent field and reads back as the field's default (0, "", false, an empty list or
  map; NULL only for a message-typed field); ``OPTIONAL`` makes every non-repeated field proto3
  ``optional``; ``WRAPPER`` makes every primitive a ``google.protobuf.*Value`` message.

The schema is a pure function of the columns and the representation: every node derives the same
bytes. Names never reach the wire, field numbers and types do.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import TypeAlias

from google.protobuf import descriptor_pb2 as pb

from metastore.catalog.model import DataSource
from metastore.formats import proto_files
from metastore.formats.kept_schemas import KEPT_SCHEMA_PROPERTIES, kept_dependencies
from metastore.formats.protobuf_columns import ProtobufColumnsError, root_message
from metastore.sql import types as ty

FORMAT = "PROTOBUF_NOSR"
SR_FORMAT = "PROTOBUF"
"""PROTOBUF: the same messages behind Confluent's wire-format header, schemas in the registry;
a single key column is wrapped in a message too (ksqlDB's PROTOBUF cannot unwrap)."""
FORMATS = (FORMAT, SR_FORMAT)
NULLABLE_PROPERTIES = {"key": "KEY_PROTOBUF_NULLABLE_REPRESENTATION",
                       "value": "VALUE_PROTOBUF_NULLABLE_REPRESENTATION"}
ROOT = "ConnectDefault"
_F = pb.FieldDescriptorProto
_Kind: TypeAlias = "pb.FieldDescriptorProto.Type.ValueType"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Nullable(Enum):
    """How NULLs are represented: ksqlDB's ``*_PROTOBUF_NULLABLE_REPRESENTATION``."""

    DEFAULT = "DEFAULT"
    OPTIONAL = "OPTIONAL"
    WRAPPER = "WRAPPER"


@dataclass(frozen=True)
class ProtobufSchema:
    """A derived schema: the root message's full name and the files that define it."""

    message: str
    descriptor_set: bytes
    """A serialized ``google.protobuf.FileDescriptorSet``, each file after its dependencies."""
    unwrapped: bool
    """Whether the root carries one column's value (not an object of the columns)."""
    indexes: tuple[int, ...] = (0,)
    """The root message's place in its file (Confluent's message indexes): its index among the
    file's messages, then among its parent's nested ones."""

    @property
    def spec(self) -> str:
        """``<message>:<base64 descriptor set>``, the schema as the JVM codec takes it."""
        return f"{self.message}:{base64.b64encode(self.descriptor_set).decode()}"


Columns = tuple[tuple[str, ty.SqlType], ...]

# -- the well-known types ksqlDB uses -----------------------------------------------------------------
_WRAPPERS = "google/protobuf/wrappers.proto"
_FILES: dict[str, tuple[str, tuple[tuple[str, tuple[tuple[str, _Kind], ...]], ...]]] = {
    "confluent/type/decimal.proto": ("confluent.type", (
        ("Decimal", (("value", _F.TYPE_BYTES), ("precision", _F.TYPE_UINT32),
                     ("scale", _F.TYPE_INT32))),)),
    "google/protobuf/timestamp.proto": ("google.protobuf", (
        ("Timestamp", (("seconds", _F.TYPE_INT64), ("nanos", _F.TYPE_INT32))),)),
    _WRAPPERS: ("google.protobuf", tuple((name, (("value", kind),)) for name, kind in (
        ("DoubleValue", _F.TYPE_DOUBLE), ("FloatValue", _F.TYPE_FLOAT),
        ("Int64Value", _F.TYPE_INT64), ("UInt64Value", _F.TYPE_UINT64),
        ("Int32Value", _F.TYPE_INT32), ("UInt32Value", _F.TYPE_UINT32),
        ("BoolValue", _F.TYPE_BOOL), ("StringValue", _F.TYPE_STRING),
        ("BytesValue", _F.TYPE_BYTES)))),
    "google/type/date.proto": ("google.type", (
        ("Date", (("year", _F.TYPE_INT32), ("month", _F.TYPE_INT32), ("day", _F.TYPE_INT32))),)),
    "google/type/timeofday.proto": ("google.type", (
        ("TimeOfDay", (("hours", _F.TYPE_INT32), ("minutes", _F.TYPE_INT32),
                       ("seconds", _F.TYPE_INT32), ("nanos", _F.TYPE_INT32))),)),
}
_SCALARS: dict[ty.SqlType, tuple[_Kind, str]] = {
    ty.BOOLEAN: (_F.TYPE_BOOL, "BoolValue"), ty.INTEGER: (_F.TYPE_INT32, "Int32Value"),
    ty.BIGINT: (_F.TYPE_INT64, "Int64Value"), ty.DOUBLE: (_F.TYPE_DOUBLE, "DoubleValue"),
    ty.STRING: (_F.TYPE_STRING, "StringValue"), ty.BYTES: (_F.TYPE_BYTES, "BytesValue"),
}
_LOGICAL: dict[ty.SqlType, tuple[str, str]] = {
    ty.DATE: ("google/type/date.proto", "google.type.Date"),
    ty.TIME: ("google/type/timeofday.proto", "google.type.TimeOfDay"),
    ty.TIMESTAMP: ("google/protobuf/timestamp.proto", "google.protobuf.Timestamp"),
}
_DECIMAL = ("confluent/type/decimal.proto", "confluent.type.Decimal")


def _well_known_file(name: str) -> pb.FileDescriptorProto:
    package, messages = _FILES[name]
    file = pb.FileDescriptorProto(name=name, package=package, syntax="proto3")
    for message_name, fields in messages:
        message = file.message_type.add(name=message_name)
        for number, (field_name, kind) in enumerate(fields, 1):
            message.field.add(name=field_name, number=number, type=kind, label=_F.LABEL_OPTIONAL)
    return file


# -- a source's key and value -------------------------------------------------------------------------
def nullable(source: DataSource, side: str) -> Nullable:
    """The source's NULL representation of its key (``side='key'``) or value."""
    value = (source.property(NULLABLE_PROPERTIES[side]) or "").strip("'\"").upper()
    return Nullable(value) if value in Nullable.__members__ else Nullable.DEFAULT


def key_columns(source: DataSource) -> Columns:
    return tuple((c.name, c.type) for c in source.key_columns)


def value_columns(source: DataSource) -> Columns:
    return tuple((c.name, c.type) for c in source.value_columns)


def key_schema(source: DataSource) -> ProtobufSchema:
    """The schema of the source's keys: a single PROTOBUF_NOSR key column is unwrapped, as
    ksqlDB does; a PROTOBUF key inferred from the registry is read with the schema it was
    inferred from."""
    kept = source.property(KEPT_SCHEMA_PROPERTIES[True])
    if kept is not None and source.key_format == SR_FORMAT:
        return registered(kept, source.property("KEY_SCHEMA_FULL_NAME"), _imports(source, True))
    columns = key_columns(source)
    return derive(columns, unwrapped=_unwrapped_key(source, columns),
                  nullable=nullable(source, "key"))


def _unwrapped_key(source: DataSource, columns: Columns) -> bool:
    return len(columns) == 1 and source.key_format == FORMAT


def value_schema(source: DataSource) -> ProtobufSchema:
    """The schema of the source's values: wrapped unless ``WRAP_SINGLE_VALUE=false``; a
    PROTOBUF value inferred from the registry is read with the schema it was inferred from."""
    kept = source.property(KEPT_SCHEMA_PROPERTIES[False])
    if kept is not None and source.value_format == SR_FORMAT:
        return registered(kept, source.property("VALUE_SCHEMA_FULL_NAME"),
                          _imports(source, False))
    columns = value_columns(source)
    return derive(columns, unwrapped=_unwrapped_value(source, columns),
                  nullable=nullable(source, "value"))


def _imports(source: DataSource, is_key: bool) -> tuple[tuple[str, str], ...]:
    """The names and texts of the schemas the side's kept schema references."""
    return tuple((d.reference.name, d.schema)
                 for d in kept_dependencies(source.property, is_key))


def _unwrapped_value(source: DataSource, columns: Columns) -> bool:
    return len(columns) == 1 and source.property("WRAP_SINGLE_VALUE") == "false"


def source_problem(source: DataSource) -> str | None:
    """Why the source's PROTOBUF or PROTOBUF_NOSR key or value has no schema the runtime can use,
    or None."""
    if source.key_format in FORMATS and source.key_columns:
        columns = key_columns(source)
        problem = problem_of(columns, _unwrapped_key(source, columns), nullable(source, "key"))
        if problem is not None:
            return f"its {source.key_format} key: {problem}"
    if source.value_format in FORMATS:
        columns = value_columns(source)
        problem = problem_of(columns, _unwrapped_value(source, columns), nullable(source, "value"))
        if problem is not None:
            return f"its {source.value_format} value: {problem}"
    return None


@lru_cache(maxsize=256)
def registered(proto_text: str, full_name: str | None,
               imports: tuple[tuple[str, str], ...] = ()) -> ProtobufSchema:
    """The schema of a registered ``.proto`` text: its root message (``full_name``, else the
    first), after the well-known files and the referenced ones (``imports``: name and text,
    dependencies first) it imports. Raises ValueError for text that is not a schema this reader
    understands."""
    own = tuple((name, text) for name, text in imports if name not in _FILES)
    try:  # a well-known file some serializers register as a reference is the project's own
        *imported, main = proto_files.parse_with_imports(proto_text, own, "registered.proto")
        root = root_message(main, full_name).lstrip(".")
    except (proto_files.ProtoFileError, ProtobufColumnsError) as error:
        raise ValueError(str(error)) from error
    indexes = _indexes(main, root)
    files = pb.FileDescriptorSet()
    well_known = [name for name in dict.fromkeys(
        dependency for file in (*imported, main) for dependency in file.dependency)
        if name in _FILES]
    for dependency in well_known:
        files.file.append(_well_known_file(dependency))
    present = {*well_known}
    for file in (*imported, main):
        kept = [name for name in file.dependency if name in present]
        del file.dependency[:]
        file.dependency.extend(kept)
        files.file.append(file)
        present.add(file.name)
    return ProtobufSchema(root, files.SerializeToString(deterministic=True), False, indexes)


def _indexes(file: pb.FileDescriptorProto, root: str) -> tuple[int, ...]:
    """The message indexes of ``root`` (its full name without the leading dot) in ``file``."""
    prefix = f"{file.package}." if file.package else ""
    names = root.removeprefix(prefix).split(".")
    indexes: list[int] = []
    messages = list(file.message_type)
    for name in names:
        index = next(i for i, message in enumerate(messages) if message.name == name)
        indexes.append(index)
        messages = list(messages[index].nested_type)
    return tuple(indexes)


# -- the derivation -----------------------------------------------------------------------------------
def problem_of(columns: Sequence[tuple[str, ty.SqlType]], unwrapped: bool,
               nulls: Nullable = Nullable.DEFAULT) -> str | None:
    """Why ksqlDB's derivation cannot carry these columns, or None."""
    if unwrapped and len(columns) == 1:
        sql_type = columns[0][1]
        if isinstance(sql_type, ty.ArrayType | ty.MapType):
            return f"a single unwrapped {sql_type.base} cannot be a Protobuf message"
        if isinstance(sql_type, ty.DecimalType) or sql_type in _LOGICAL:
            return f"a single unwrapped {sql_type.base} is not supported"
    for name, sql_type in columns:
        problem = _type_problem(name, sql_type, nulls)
        if problem is not None:
            return problem
    return None


def _type_problem(name: str, sql_type: ty.SqlType, nulls: Nullable) -> str | None:
    if not _NAME.fullmatch(name):
        return f"{name!r} is not a Protobuf field name"
    if isinstance(sql_type, ty.ArrayType):
        if isinstance(sql_type.element, ty.ArrayType | ty.MapType):
            return f"an ARRAY of {sql_type.element.base} cannot be a Protobuf field ({name})"
        return _type_problem(name, sql_type.element, nulls)
    if isinstance(sql_type, ty.MapType):
        if sql_type.key != ty.STRING:
            return ("PROTOBUF format only supports MAP types with STRING keys. "
                    "See https://github.com/confluentinc/ksql/issues/6177.")
        if isinstance(sql_type.value, ty.ArrayType | ty.MapType):
            return f"a MAP of {sql_type.value.base} cannot be a Protobuf field ({name})"
        if nulls is Nullable.WRAPPER:
            return f"MAP columns are not supported with the WRAPPER NULL representation ({name})"
        return _type_problem(name, sql_type.value, nulls)
    if isinstance(sql_type, ty.StructType):
        for field_name, field_type in sql_type.fields:
            problem = _type_problem(field_name, field_type, nulls)
            if problem is not None:
                return problem
    return None


@lru_cache(maxsize=512)
def derive(columns: Columns, unwrapped: bool, nullable: Nullable = Nullable.DEFAULT) -> ProtobufSchema:
    """ksqlDB's schema for ``columns`` (see the module's docstring); raises ValueError when
    :func:`problem_of` has a reason."""
    problem = problem_of(columns, unwrapped, nullable)
    if problem is not None:
        raise ValueError(problem)
    builder = _Builder(nullable)
    unwrapped = unwrapped and len(columns) == 1
    if unwrapped and not isinstance(columns[0][1], ty.StructType):
        builder.files.add(_WRAPPERS)
        return builder.schema(None, f"google.protobuf.{_SCALARS[columns[0][1]][1]}", unwrapped)
    name = builder.name()
    fields: Sequence[tuple[str, ty.SqlType]] = columns
    if unwrapped:
        struct = columns[0][1]
        assert isinstance(struct, ty.StructType)
        fields = struct.fields
    return builder.schema(builder.message(name, fields, ""), name, unwrapped)


class _Builder:
    """One derivation: the counter of default names, the well-known files used."""

    def __init__(self, nulls: Nullable) -> None:
        self.nulls = nulls
        self.names = 0
        self.files: set[str] = set()

    def name(self) -> str:
        self.names += 1
        return f"{ROOT}{self.names}"

    def schema(self, root: pb.DescriptorProto | None, message: str, unwrapped: bool
               ) -> ProtobufSchema:
        files = pb.FileDescriptorSet()
        for dependency in sorted(self.files):
            files.file.append(_well_known_file(dependency))
        if root is not None:
            main = files.file.add(name=f"{message}.proto", syntax="proto3")
            main.dependency.extend(sorted(self.files))
            main.message_type.append(root)
        return ProtobufSchema(message, files.SerializeToString(deterministic=True), unwrapped)

    def message(self, name: str, fields: Sequence[tuple[str, ty.SqlType]], scope: str
                ) -> pb.DescriptorProto:
        message = pb.DescriptorProto(name=name)
        full_name = f"{scope}.{name}" if scope else name
        for number, (field_name, sql_type) in enumerate(fields, 1):
            field = self.field(message, full_name, field_name, number, sql_type)
            if self.nulls is Nullable.OPTIONAL and field.label != _F.LABEL_REPEATED:
                field.proto3_optional = True  # in a synthetic oneof of its own, as protoc does
                field.oneof_index = len(message.oneof_decl)
                message.oneof_decl.add(name=f"_{field_name}")
        return message

    def field(self, container: pb.DescriptorProto, scope: str, name: str, number: int,
              sql_type: ty.SqlType) -> pb.FieldDescriptorProto:
        field = container.field.add(name=name, number=number, label=_F.LABEL_OPTIONAL)
        if isinstance(sql_type, ty.ArrayType | ty.MapType):
            field.label = _F.LABEL_REPEATED
        if isinstance(sql_type, ty.ArrayType):
            sql_type = sql_type.element
        if isinstance(sql_type, ty.DecimalType):
            self.reference(field, *_DECIMAL)
        elif sql_type in _LOGICAL:
            self.reference(field, *_LOGICAL[sql_type])
        elif sql_type in _SCALARS:
            kind, wrapper = _SCALARS[sql_type]
            if self.nulls is Nullable.WRAPPER:  # never in a map entry: problem_of refuses it
                self.reference(field, _WRAPPERS, f"google.protobuf.{wrapper}")
            else:
                field.type = kind
        elif isinstance(sql_type, ty.StructType):
            type_name = self.name()
            if type_name == name:
                type_name += "Message"
            container.nested_type.append(self.message(type_name, sql_type.fields, scope))
            field.type = _F.TYPE_MESSAGE
            field.type_name = f".{scope}.{type_name}"
        elif isinstance(sql_type, ty.MapType):
            entry_name = self.name() + "Entry"
            entry = pb.DescriptorProto(name=entry_name)
            entry.options.map_entry = True
            entry_scope = f"{scope}.{entry_name}"
            self.field(entry, entry_scope, "key", 1, sql_type.key)
            self.field(entry, entry_scope, "value", 2, sql_type.value)
            container.nested_type.append(entry)
            field.type = _F.TYPE_MESSAGE
            field.type_name = f".{entry_scope}"
        else:
            raise ValueError(f"{FORMAT} cannot carry {sql_type.sql()}")
        return field

    def reference(self, field: pb.FieldDescriptorProto, file: str, message: str) -> None:
        self.files.add(file)
        field.type = _F.TYPE_MESSAGE
        field.type_name = f".{message}"
