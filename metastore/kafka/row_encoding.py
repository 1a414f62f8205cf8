"""Keys and values as Kafka bytes in a source's formats: the one encoder of the records
metastore writes into data topics (``INSERT INTO ... VALUES`` and the inputs of
``metastore test``).

Two shapes of value come in: a *row* (column name to a value already coerced to the column's
SQL type, what INSERT VALUES builds) through :func:`encode_row`, and a test record's key and
value as ksqlDB's test files write them (JSON objects, DELIMITED text) through
:func:`encode_key` / :func:`encode_value`. Both end in the same per-format writers:

- KAFKA: INTEGER 4 bytes and BIGINT / DOUBLE 8 bytes big-endian, STRING UTF-8, BYTES raw;
- JSON: an object of the columns (a single key column, or a single value column with
  ``WRAP_SINGLE_VALUE=false``, bare); DECIMAL a JSON number, BYTES base64, TIMESTAMP and TIME
  milliseconds, DATE days (ksqlDB's JSON serializer);
- DELIMITED: the columns joined by the delimiter (``KEY_DELIMITER`` / ``VALUE_DELIMITER``,
  ``TAB`` and ``SPACE`` by name), NULL as an empty field, quoted where needed;
- NONE: no bytes; PROTOBUF_NOSR: the message of the schema derived from the columns.

AVRO, PROTOBUF and JSON_SR rows need a Schema Registry (without one: :class:`RowEncodingError`):
Confluent's header of the schema the runtime writes (derived from the columns, or a PROTOBUF
source's registered one), registered under the topic's subject, then the Avro binary, the
Protobuf message (after the message index 0) or the JSON text.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from metastore.catalog.model import Column, DataSource
from metastore.formats.avro import binary as avro_binary
from metastore.formats.protobuf import schema as protobuf
from metastore.formats.protobuf import values as protobuf_values
from metastore.formats.written_schemas import REGISTRY_FORMATS as SCHEMA_REGISTRY_FORMATS
from metastore.formats.written_schemas import SchemaIds, written_schema
from metastore.sql import types as ty


class RowEncodingError(ValueError):
    """A key or value that cannot be written in its topic's format."""




@dataclass(frozen=True)
class KafkaBytes:
    key: bytes | None
    value: bytes | None


# -- rows (INSERT VALUES) --------------------------------------------------------------------------
def encode_row(source: DataSource, row: Mapping[str, Any],
               registry: SchemaIds | None = None) -> KafkaBytes:
    """The record of ``row`` (every key and value column of ``source``; a missing one is NULL)
    in the source's key and value formats (``registry``: for AVRO, PROTOBUF and JSON_SR)."""
    for fmt in (source.key_format, source.value_format):
        if fmt in SCHEMA_REGISTRY_FORMATS and registry is None:
            raise RowEncodingError(
                f"The {fmt} format needs a Schema Registry, and this metastore has none: "
                f"records of {source.name} cannot be written.")
    keys = source.key_columns
    values = source.value_columns
    key: bytes | None
    if not keys or source.key_format == "NONE":
        key = None
    elif registry is not None and source.key_format in SCHEMA_REGISTRY_FORMATS:
        key = _registry_bytes(source, True, row, registry)
    else:
        key = _row_bytes(source.key_format, keys, row, source.property("KEY_DELIMITER"),
                         wrapped=False, schema=lambda: protobuf.key_schema(source))
    if source.value_format == "NONE":
        return KafkaBytes(key, None)
    if registry is not None and source.value_format in SCHEMA_REGISTRY_FORMATS:
        return KafkaBytes(key, _registry_bytes(source, False, row, registry))
    value = _row_bytes(source.value_format, values, row, source.property("VALUE_DELIMITER"),
                       wrapped=source.property("WRAP_SINGLE_VALUE") != "false",
                       schema=lambda: protobuf.value_schema(source))
    return KafkaBytes(key, value)


def encode_record(source: DataSource, row: Mapping[str, Any], registry: SchemaIds | None = None
                  ) -> tuple[bytes | None, bytes | None]:
    """:func:`encode_row` as a (key, value) pair: the validator's record encoder."""
    encoded = encode_row(source, row, registry)
    return encoded.key, encoded.value


def _registry_bytes(source: DataSource, is_key: bool, row: Mapping[str, Any],
                    registry: SchemaIds) -> bytes | None:
    columns = source.key_columns if is_key else source.value_columns
    schema = written_schema(source, is_key)
    assert schema is not None, "a side in a registry format, with columns"
    fields = {c.name: _json_value(row.get(c.name), c.type) for c in columns}
    if is_key and all(v is None for v in fields.values()):
        return None
    if schema.schema_type == "PROTOBUF":
        shape = protobuf.key_schema(source) if is_key else protobuf.value_schema(source)
        message = protobuf_bytes(shape, fields)
        return None if message is None else protobuf_values.framed(
            registry.register(schema.subject, schema.text, schema.schema_type,
                              schema.references), message,
            shape.indexes)
    unwrapped = len(columns) == 1 and (is_key or source.property("WRAP_SINGLE_VALUE") == "false")
    value: Any = fields[columns[0].name] if unwrapped else fields
    if value is None:
        return None
    if schema.schema_type == "AVRO":
        try:
            body = avro_binary.encode(avro_binary.parsed(schema.text), value)
        except avro_binary.AvroEncodingError as error:
            raise RowEncodingError(f"{value!r} cannot be written as AVRO: {error}") from error
    else:
        body = _json_dumps(value)
    schema_id = registry.register(schema.subject, schema.text, schema.schema_type,
                                  schema.references)
    return b"\0" + struct.pack(">i", schema_id) + body


def _row_bytes(fmt: str, columns: tuple[Column, ...], row: Mapping[str, Any],
               delimiter: str | None, wrapped: bool,
               schema: Any) -> bytes | None:
    cells = [row.get(c.name) for c in columns]
    if fmt == "KAFKA":
        if len(columns) != 1:
            raise RowEncodingError(f"The KAFKA format holds one column, not {len(columns)}")
        return None if cells[0] is None else kafka_bytes(cells[0], columns[0].type)
    if fmt == "JSON":
        if len(columns) == 1 and not wrapped:
            return None if cells[0] is None else _json_dumps(
                _json_value(cells[0], columns[0].type))
        return _json_dumps({c.name: _json_value(v, c.type) for c, v in zip(columns, cells,
                                                                            strict=True)})
    if fmt == "DELIMITED":
        if len(columns) == 1 and cells[0] is None:
            return b""  # ksqlDB's KsqlDelimitedSerializer: only a null row is a tombstone
        separator = {"TAB": "\t", "SPACE": " "}.get((delimiter or ",").upper(), delimiter or ",")
        out = io.StringIO()
        csv.writer(out, delimiter=separator, lineterminator="").writerow(
            ["" if v is None else _cell(_json_value(v, c.type))
             for c, v in zip(columns, cells, strict=True)])
        return out.getvalue().encode()
    if fmt == protobuf.FORMAT:
        shape = schema()
        value: Any = ({c.name: _json_value(v, c.type) for c, v in zip(columns, cells, strict=True)}
                      if not shape.unwrapped else _json_value(cells[0], columns[0].type))
        return protobuf_bytes(shape, value)
    raise RowEncodingError(f"Records in the {fmt} format cannot be written")


def _json_value(value: Any, sql_type: ty.SqlType) -> Any:
    """A coerced value as ksqlDB's JSON serializer writes it."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(sql_type, ty.ArrayType):
        return [_json_value(v, sql_type.element) for v in value]
    if isinstance(sql_type, ty.MapType):
        # a NULL key (MAP(CAST(NULL AS STRING) := 1)) is written as Jackson writes it
        return {"null" if k is None else str(k): _json_value(v, sql_type.value)
                for k, v in value.items()}
    if isinstance(sql_type, ty.StructType):
        types = dict(sql_type.fields)
        return {k: _json_value(v, types.get(k, ty.STRING)) for k, v in value.items()}
    return value


def _json_dumps(value: Any) -> bytes:
    """JSON text; a DECIMAL is written as the number of its exact text (1.50, not 1.5)."""
    return _json_text(value).encode()


def _json_text(value: Any) -> str:
    """``value`` as compact JSON, a :class:`Decimal` (out of band) as its plain number text."""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{_json_text(v)}"
                              for k, v in value.items()) + "}"
    return json.dumps(value)


# -- test records (metastore test) ----------------------------------------------------------------
def generic(value: Any) -> bytes | None:
    """A value written as text (a string) or JSON, for a topic no source declares."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value).encode()


def encode_key(key: Any, source: DataSource) -> bytes | None:
    """A test record's key, as ksqlDB's test files write it, in the source's key format."""
    columns = source.key_columns
    if key is None or source.key_format == "NONE":
        return None
    if not columns:
        return generic(key)
    if source.key_format == "KAFKA":
        return kafka_bytes(key, columns[0].type)
    if source.key_format == "JSON":
        return json.dumps(key).encode()
    if source.key_format == protobuf.FORMAT:
        return protobuf_bytes(protobuf.key_schema(source), key)
    return _text(key)


def encode_value(value: Any, source: DataSource) -> bytes | None:
    """A test record's value, as ksqlDB's test files write it, in the source's value format."""
    if value is None:
        return None
    if source.value_format == "KAFKA":
        columns = source.value_columns
        return kafka_bytes(value, columns[0].type) if columns else generic(value)
    if source.value_format == "JSON":
        return json.dumps(value).encode()
    if source.value_format == protobuf.FORMAT:
        return protobuf_bytes(protobuf.value_schema(source), value)
    return _text(value)


# -- the formats ------------------------------------------------------------------------------------
def protobuf_bytes(schema: protobuf.ProtobufSchema, value: Any) -> bytes | None:
    """``value`` as a PROTOBUF_NOSR record of the schema the runtime reads (for a single
    primitive key the same bytes as ksqlDB's test driver, which writes the message of the key
    columns)."""
    try:
        return protobuf_values.encode(schema, value)
    except protobuf_values.ProtobufValueError as error:
        raise RowEncodingError(str(error)) from error


def _text(value: Any) -> bytes:
    return (value if isinstance(value, str) else json.dumps(value)).encode()


def _cell(value: Any) -> str:
    """One DELIMITED field: booleans lower case, DECIMAL as its plain text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f")
    return value if isinstance(value, str) else json.dumps(value)


def kafka_bytes(value: Any, sql_type: ty.SqlType) -> bytes:
    """One value in the KAFKA format."""
    try:
        if sql_type == ty.INTEGER:
            return struct.pack(">i", int(value))
        if sql_type == ty.BIGINT:
            return struct.pack(">q", int(value))
        if sql_type == ty.DOUBLE:
            return struct.pack(">d", float(value))
        if sql_type == ty.BYTES:
            return value if isinstance(value, bytes) else base64.b64decode(str(value))
    except (ValueError, TypeError, struct.error) as error:
        raise RowEncodingError(f"{value!r} is not a KAFKA {sql_type.sql()}: {error}") from error
    return _text(value)
