"""The Avro schema ksqlDB derives for an AVRO key or value from the columns.

ksqlDB (its Avro schema translator over the columns' Connect schema, every field optional)
builds:

- for several columns, or a single value column that is wrapped (``WRAP_SINGLE_VALUE`` not
  false), a record ``io.confluent.ksql.avro_schemas.KsqlDataSourceSchema`` (or the
  ``KEY_SCHEMA_FULL_NAME`` / ``VALUE_SCHEMA_FULL_NAME`` given) whose fields are the columns, in
  order, each a union of ``null`` and its type with a ``null`` default;
- for a single key column, or a single unwrapped value column, the column's type alone, as a
  union with ``null``;
- BOOLEAN ``boolean``, INTEGER ``int``, BIGINT ``long``, DOUBLE ``double``, STRING ``string``,
  BYTES ``bytes``, DECIMAL ``bytes`` of logical type ``decimal``, DATE ``int`` of logical type
  ``date``, TIME ``int`` of ``time-millis``, TIMESTAMP ``long`` of ``timestamp-millis``; an ARRAY
  an ``array`` of optional elements, a MAP (STRING keys only) a ``map`` of optional values, a
  STRUCT a record named after its path (``<parent>_<FIELD>``), its fields optional.

Records are registered under Kafka's topic-name strategy (``<topic>-key``, ``<topic>-value``:
:func:`metastore.formats.kept_schemas.subject_of`).
The schema is a pure function of the columns and properties: every node derives the same text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from metastore.catalog.model import Column, DataSource
from metastore.sql import types as ty

FORMAT = "AVRO"
DEFAULT_FULL_NAME = "io.confluent.ksql.avro_schemas.KsqlDataSourceSchema"


@dataclass(frozen=True)
class AvroSchema:
    """A derived schema: its JSON text, and whether it is a single column's bare type."""

    text: str
    unwrapped: bool


def value_schema(source: DataSource) -> AvroSchema:
    columns = source.value_columns
    unwrapped = len(columns) == 1 and source.property("WRAP_SINGLE_VALUE") == "false"
    return _schema(columns, unwrapped, source.property("VALUE_SCHEMA_FULL_NAME")
                   or source.property("VALUE_AVRO_SCHEMA_FULL_NAME"))


def key_schema(source: DataSource) -> AvroSchema:
    columns = source.key_columns
    return _schema(columns, len(columns) == 1, source.property("KEY_SCHEMA_FULL_NAME"))


def _schema(columns: tuple[Column, ...], unwrapped: bool, full_name: str | None) -> AvroSchema:
    name = full_name or DEFAULT_FULL_NAME
    if unwrapped:
        return AvroSchema(json.dumps(_optional(columns[0].type, name), separators=(",", ":")),
                          True)
    record = _record(name, [(c.name, c.type) for c in columns])
    return AvroSchema(json.dumps(record, separators=(",", ":")), False)


def _record(full_name: str, fields: list[tuple[str, ty.SqlType]]) -> dict[str, Any]:
    namespace, _, name = full_name.rpartition(".")
    record: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        record["namespace"] = namespace
    record["fields"] = [{"name": field, "type": _optional(sql_type, f"{full_name}_{field}"),
                         "default": None} for field, sql_type in fields]
    return record


def _optional(sql_type: ty.SqlType, path: str) -> list[Any]:
    return ["null", _avro(sql_type, path)]


def _avro(sql_type: ty.SqlType, path: str) -> Any:
    if isinstance(sql_type, ty.DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": sql_type.precision,
                "scale": sql_type.scale}
    if isinstance(sql_type, ty.ArrayType):
        return {"type": "array", "items": _optional(sql_type.element, path)}
    if isinstance(sql_type, ty.MapType):
        return {"type": "map", "values": _optional(sql_type.value, path)}
    if isinstance(sql_type, ty.StructType):
        return _record(path, list(sql_type.fields))
    primitive = _PRIMITIVES.get(sql_type)
    if primitive is None:
        raise ValueError(f"AVRO cannot carry {sql_type.sql()}")
    return primitive


_PRIMITIVES: dict[ty.SqlType, Any] = {
    ty.BOOLEAN: "boolean", ty.INTEGER: "int", ty.BIGINT: "long", ty.DOUBLE: "double",
    ty.STRING: "string", ty.BYTES: "bytes",
    ty.DATE: {"type": "int", "logicalType": "date"},
    ty.TIME: {"type": "int", "logicalType": "time-millis"},
    ty.TIMESTAMP: {"type": "long", "logicalType": "timestamp-millis"},
}
