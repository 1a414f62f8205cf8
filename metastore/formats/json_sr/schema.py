"""The JSON Schema ksqlDB registers for a JSON_SR key or value, from the columns.

ksqlDB (Confluent's JsonSchemaData over the columns' Connect schema, every field optional)
writes an ``object`` whose ``properties`` are the columns, each ``oneOf`` null and its type,
annotated with ``connect.index`` and ``connect.type``; a single key column, or a single value
column with ``WRAP_SINGLE_VALUE=false``, is that column's type alone. INTEGER is an ``integer``
of ``int32``, BIGINT of ``int64``, DOUBLE a ``number`` of ``float64``, BYTES a ``string`` of
``bytes``, DECIMAL a ``number`` titled ``org.apache.kafka.connect.data.Decimal`` with its scale
and precision, TIMESTAMP, DATE and TIME ``integer`` titled after Connect's logical types, an
ARRAY an ``array``, a MAP an ``object`` of ``additionalProperties``, a STRUCT an ``object``.
The text is a pure function of the columns: every node derives the same one. It names its
draft (``$schema``), so that a registry which tells a schema's type from its content (Apicurio's
Confluent-compatible API does, whatever ``schemaType`` says) takes it for a JSON Schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from metastore.catalog.model import Column, DataSource
from metastore.sql import types as ty

FORMAT = "JSON_SR"
SCHEMA_TYPE = "JSON"
"""The registry's name of the type of these schemas."""
HEADER_BYTES = 5
DRAFT = "http://json-schema.org/draft-07/schema#"


@dataclass(frozen=True)
class JsonSchema:
    text: str
    unwrapped: bool


def value_schema(source: DataSource) -> JsonSchema:
    columns = source.value_columns
    unwrapped = len(columns) == 1 and source.property("WRAP_SINGLE_VALUE") == "false"
    return _schema(columns, unwrapped)


def key_schema(source: DataSource) -> JsonSchema:
    columns = source.key_columns
    return _schema(columns, len(columns) == 1)


def properties_beyond(schema_text: str, columns: tuple[Column, ...]) -> list[str]:
    """The properties of a registered object schema that are none of ``columns``: a record
    written with that schema has each of them, NULL (Confluent's JsonSchemaData writes every
    field of the schema)."""
    try:
        schema = json.loads(schema_text)
    except ValueError:
        return []
    found = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(found, dict):
        return []
    names = {c.name for c in columns}
    return [str(name) for name in found if name not in names]


def _schema(columns: tuple[Column, ...], unwrapped: bool) -> JsonSchema:
    if unwrapped:
        return JsonSchema(_text(_optional(columns[0].type)), True)
    return JsonSchema(_text(_object([(c.name, c.type) for c in columns])), False)


def _text(schema: dict[str, Any]) -> str:
    return json.dumps(with_draft(schema), separators=(",", ":"))


def with_draft(schema: Any) -> Any:
    """A JSON Schema (an object) that names its draft; anything else as it is."""
    if isinstance(schema, dict) and "$schema" not in schema:
        return {"$schema": DRAFT, **schema}
    return schema


def _object(fields: list[tuple[str, ty.SqlType]]) -> dict[str, Any]:
    return {"type": "object", "properties": {
        name: {**_optional(sql_type), "connect.index": index}
        for index, (name, sql_type) in enumerate(fields)}}


def _optional(sql_type: ty.SqlType) -> dict[str, Any]:
    return {"oneOf": [{"type": "null"}, _json(sql_type)]}


_CONNECT = "org.apache.kafka.connect.data."


def _json(sql_type: ty.SqlType) -> dict[str, Any]:
    if isinstance(sql_type, ty.DecimalType):
        return {"type": "number", "title": _CONNECT + "Decimal", "connect.version": 1,
                "connect.type": "bytes", "connect.parameters": {
                    "scale": str(sql_type.scale),
                    "connect.decimal.precision": str(sql_type.precision)}}
    if isinstance(sql_type, ty.ArrayType):
        return {"type": "array", "items": _optional(sql_type.element)}
    if isinstance(sql_type, ty.MapType):
        return {"type": "object", "additionalProperties": _optional(sql_type.value),
                "connect.type": "map"}
    if isinstance(sql_type, ty.StructType):
        return _object(list(sql_type.fields))
    primitive = _PRIMITIVES.get(sql_type)
    if primitive is None:
        raise ValueError(f"JSON_SR cannot carry {sql_type.sql()}")
    return dict(primitive)


_PRIMITIVES: dict[ty.SqlType, dict[str, Any]] = {
    ty.BOOLEAN: {"type": "boolean"},
    ty.INTEGER: {"type": "integer", "connect.type": "int32"},
    ty.BIGINT: {"type": "integer", "connect.type": "int64"},
    ty.DOUBLE: {"type": "number", "connect.type": "float64"},
    ty.STRING: {"type": "string"},
    ty.BYTES: {"type": "string", "connect.type": "bytes"},
    ty.TIMESTAMP: {"type": "integer", "title": _CONNECT + "Timestamp", "connect.version": 1,
                   "connect.type": "int64"},
    ty.DATE: {"type": "integer", "title": _CONNECT + "Date", "connect.version": 1,
              "connect.type": "int32"},
    ty.TIME: {"type": "integer", "title": _CONNECT + "Time", "connect.version": 1,
              "connect.type": "int32"},
}
