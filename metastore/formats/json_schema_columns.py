"""ksqlDB's columns of a JSON Schema: what a CREATE of a JSON_SR source without columns infers.

The rules of Confluent's JsonSchemaData (JSON Schema to Connect) under ksqlDB's translation, as
for Avro (:mod:`metastore.formats.avro_columns`: the record's fields, ``ROWKEY`` / ``ROWVAL``
for a key or an unwrapped value, upper-cased names unless named by id):

- an ``object`` with ``properties`` is a STRUCT of them, one with ``additionalProperties`` only
  (or ``connect.type`` ``map``) a MAP<STRING, _>;
- ``integer`` is BIGINT, INTEGER for ``connect.type`` int8, int16 or int32, and TIMESTAMP, DATE
  or TIME when titled after Connect's logical types; ``number`` DOUBLE, DECIMAL when titled
  ``org.apache.kafka.connect.data.Decimal``; ``string`` STRING, BYTES for ``connect.type``
  bytes; ``boolean`` BOOLEAN; ``array`` ARRAY of its ``items``;
- ``oneOf`` / ``anyOf`` of ``null`` and one schema, or a ``type`` list of ``null`` and one type,
  is that schema; what has no ksqlDB type is left out.
"""

from __future__ import annotations

import json
from typing import Any

from metastore.formats.avro_columns import AvroColumnsError, Budget
from metastore.sql import types as ty

JsonSchemaColumnsError = AvroColumnsError
_CONNECT = "org.apache.kafka.connect.data."


class _UnsupportedTypeError(Exception):
    pass


def columns_of(schema_text: str, is_key: bool, unwrapped: bool, original_names: bool
               ) -> list[tuple[str, ty.SqlType]]:
    try:
        schema = json.loads(schema_text)
    except ValueError as error:
        raise JsonSchemaColumnsError(f"not a JSON Schema: {error}") from error
    budget = Budget()
    if is_key or unwrapped:
        try:
            return [("ROWKEY" if is_key else "ROWVAL", _sql(schema, original_names, 0, budget))]
        except _UnsupportedTypeError as error:
            raise JsonSchemaColumnsError(f"Unsupported type at root of schema: {error}") from error
    schema = _non_null(schema)
    if not (isinstance(schema, dict) and isinstance(schema.get("properties"), dict)):
        raise JsonSchemaColumnsError(
            "Schema returned from schema registry is anonymous type. To use this schema with "
            "ksqlDB, set 'WRAP_SINGLE_VALUE=false' in the WITH clause properties.")
    columns = _fields(schema, original_names, 0, budget)
    if not columns:
        raise JsonSchemaColumnsError("Schema does not include any columns with types that "
                                     "ksqlDB supports.")
    return columns


def _fields(schema: dict[str, Any], original: bool, depth: int, budget: Budget
            ) -> list[tuple[str, ty.SqlType]]:
    properties = schema.get("properties") or {}
    ordered = sorted(properties.items(), key=lambda item: _index(item[1]))
    fields = []
    for name, field in ordered:
        try:
            sql_type = _sql(field, original, depth + 1, budget)
        except _UnsupportedTypeError:
            continue
        fields.append((name if original else name.upper(), sql_type))
    return fields


def _index(field: Any) -> int:
    index = field.get("connect.index") if isinstance(field, dict) else None
    return index if isinstance(index, int) else 1 << 30  # else in the order written


def _non_null(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    for combiner in ("oneOf", "anyOf"):
        branches = schema.get(combiner)
        if isinstance(branches, list):
            kept = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
            if len(kept) == 1:
                return _non_null(kept[0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kept = [k for k in kind if k != "null"]
        if len(kept) == 1:
            return {**schema, "type": kept[0]}
    return schema


def _sql(schema: Any, original: bool, depth: int, budget: Budget) -> ty.SqlType:
    budget.spend(depth)
    schema = _non_null(schema)
    if not isinstance(schema, dict):
        raise _UnsupportedTypeError(str(schema))
    kind = schema.get("type")
    connect = schema.get("connect.type")
    title = schema.get("title")
    if kind == "object" or (kind is None and "properties" in schema):
        if connect == "map" or ("properties" not in schema and "additionalProperties" in schema):
            values = schema.get("additionalProperties")
            return ty.MapType(ty.STRING, _sql(values if isinstance(values, dict) else {},
                                              original, depth + 1, budget))
        return ty.StructType(tuple(_fields(schema, original, depth, budget)))
    if kind == "array":
        return ty.ArrayType(_sql(schema.get("items"), original, depth + 1, budget))
    if kind == "integer":
        logical = {_CONNECT + "Timestamp": ty.TIMESTAMP, _CONNECT + "Date": ty.DATE,
                   _CONNECT + "Time": ty.TIME}.get(str(title))
        if logical is not None:
            return logical
        return ty.INTEGER if connect in ("int8", "int16", "int32") else ty.BIGINT
    if kind == "number":
        if title == _CONNECT + "Decimal":
            parameters = schema.get("connect.parameters") or {}
            return ty.DecimalType(int(parameters.get("connect.decimal.precision", 64)),
                                  int(parameters.get("scale", 0)))
        return ty.DOUBLE
    if kind == "string":
        return ty.BYTES if connect == "bytes" else ty.STRING
    if kind == "boolean":
        return ty.BOOLEAN
    raise _UnsupportedTypeError(f"Unsupported type: {kind}")
