"""ksqlDB's columns of an Avro schema: what a CREATE without columns infers from the registry.

The rules of ksqlDB's schema inference (Connect's Avro data over ksqlDB's Connect-to-SQL
translation), read in its source:

- a record's fields are the columns, in order; a key (always unwrapped) or a value with
  ``WRAP_SINGLE_VALUE=false`` is one column, ``ROWKEY`` or ``ROWVAL``, of the whole schema's type;
  a value schema that is not a record needs ``WRAP_SINGLE_VALUE=false``;
- field names are upper-cased, at every depth, unless the schema was named by its id
  (``KEY_SCHEMA_ID`` / ``VALUE_SCHEMA_ID``), which keeps them as written;
- ``boolean`` BOOLEAN, ``int`` INTEGER (``date`` DATE, ``time-millis`` TIME), ``long`` BIGINT
  (``timestamp-millis`` TIMESTAMP), ``float`` and ``double`` DOUBLE, ``string`` and enums STRING,
  ``bytes`` and ``fixed`` BYTES (``decimal`` DECIMAL), ``array`` ARRAY, ``map`` MAP<STRING, _>,
  a record STRUCT; a union of ``null`` and one type is that type;
- a field of a type ksqlDB cannot carry (``null``, a union of several types) is left out; a
  schema with no column left is an error.
"""

from __future__ import annotations

import json
from typing import Any

from metastore.core.limits import MAX_TYPE_DEPTH
from metastore.sql import types as ty


class AvroColumnsError(ValueError):
    """An Avro schema that cannot be the columns of a source; ksqlDB's reason."""


class _UnsupportedTypeError(Exception):
    pass


MAX_TRANSLATED_TYPES = 10_000
"""The most types one schema's translation visits: a schema whose types reuse each other would
otherwise expand exponentially."""
MAX_SCHEMA_DEPTH = 3 * MAX_TYPE_DEPTH
"""How deep a schema's own nesting (unions, references) may go; the columns' SQL types are held
to ``MAX_TYPE_DEPTH`` as declared ones are."""


class Budget:
    """What one translation may still visit."""

    def __init__(self, limit: int = MAX_TRANSLATED_TYPES) -> None:
        self.left = limit

    def spend(self, depth: int) -> None:
        if depth > MAX_SCHEMA_DEPTH:
            raise AvroColumnsError(f"the schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
        self.left -= 1
        if self.left < 0:
            raise AvroColumnsError(f"the schema expands to more than {MAX_TRANSLATED_TYPES} "
                                   "types")


def columns_of(schema_text: str, is_key: bool, unwrapped: bool, original_names: bool
               ) -> list[tuple[str, ty.SqlType]]:
    """The (name, type) columns of the key or value schema ``schema_text``."""
    try:
        schema = json.loads(schema_text)
    except ValueError as error:
        raise AvroColumnsError(f"not an Avro schema: {error}") from error
    named: dict[str, Any] = {}
    budget = Budget()
    if is_key or unwrapped:
        try:
            return [("ROWKEY" if is_key else "ROWVAL",
                     _sql(schema, named, original_names, 0, budget))]
        except _UnsupportedTypeError as error:
            raise AvroColumnsError(f"Unsupported type at root of schema: {error}") from error
    schema = _non_null(schema, named)
    if not (isinstance(schema, dict) and schema.get("type") == "record"):
        raise AvroColumnsError(
            "Schema returned from schema registry is anonymous type. To use this schema with "
            "ksqlDB, set 'WRAP_SINGLE_VALUE=false' in the WITH clause properties.")
    columns = _fields(schema, named, original_names, 0, budget)
    if not columns:
        raise AvroColumnsError("Schema does not include any columns with types that ksqlDB "
                               "supports.")
    return columns


def _fields(record: dict[str, Any], named: dict[str, Any], original: bool, depth: int,
            budget: Budget) -> list[tuple[str, ty.SqlType]]:
    _remember(record, named)
    fields = []
    for field in record.get("fields") or []:
        try:
            sql_type = _sql(field.get("type"), named, original, depth + 1, budget)
        except _UnsupportedTypeError:
            continue  # ksqlDB logs and leaves the field out
        name = str(field.get("name"))
        fields.append((name if original else name.upper(), sql_type))
    return fields


def _sql(schema: Any, named: dict[str, Any], original: bool, depth: int, budget: Budget
         ) -> ty.SqlType:
    budget.spend(depth)
    schema = _non_null(schema, named)
    if isinstance(schema, list):
        raise _UnsupportedTypeError("union")
    if isinstance(schema, str):
        if schema in named:
            return _sql(named[schema], named, original, depth + 1, budget)
        schema = {"type": schema}
    if not isinstance(schema, dict):
        raise _UnsupportedTypeError(str(schema))
    kind = schema.get("type")
    if isinstance(kind, dict | list):
        return _sql(kind, named, original, depth + 1, budget)
    primitive = _primitive(schema, named)
    if primitive is not None:
        return primitive
    if kind == "array":
        return ty.ArrayType(_sql(schema.get("items"), named, original, depth + 1, budget))
    if kind == "map":
        return ty.MapType(ty.STRING, _sql(schema.get("values"), named, original, depth + 1, budget))
    if kind == "record":
        fields = _fields(schema, named, original, depth, budget)
        return ty.StructType(tuple(fields))
    if isinstance(kind, str) and kind in named:
        return _sql(named[kind], named, original, depth + 1, budget)
    raise _UnsupportedTypeError(f"Unsupported type: {kind}")


_PRIMITIVES = {"float": ty.DOUBLE, "double": ty.DOUBLE, "boolean": ty.BOOLEAN,
               "string": ty.STRING}


def _primitive(schema: dict[str, Any], named: dict[str, Any]) -> ty.SqlType | None:
    """The SQL type of a primitive Avro type with its logical type; None for other types."""
    kind, logical = schema.get("type"), schema.get("logicalType")
    if kind in ("bytes", "fixed"):
        _remember(schema, named)
        if logical == "decimal":
            return ty.DecimalType(int(schema.get("precision", 64)), int(schema.get("scale", 0)))
        return ty.BYTES
    if kind == "int":
        return {"date": ty.DATE, "time-millis": ty.TIME}.get(str(logical), ty.INTEGER)
    if kind == "long":
        return ty.TIMESTAMP if logical == "timestamp-millis" else ty.BIGINT
    if kind == "enum":
        _remember(schema, named)
        return ty.STRING
    return _PRIMITIVES.get(str(kind))


def _non_null(schema: Any, named: dict[str, Any]) -> Any:
    """A union of ``null`` and one type as that type."""
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null" and not (
            isinstance(b, dict) and b.get("type") == "null")]
        if len(branches) == 1:
            return branches[0]
    return schema


def _remember(schema: dict[str, Any], named: dict[str, Any]) -> None:
    """A named type (record, enum, fixed), so a later reference by name resolves."""
    name = schema.get("name")
    if not isinstance(name, str):
        return
    namespace = schema.get("namespace")
    named[name] = schema
    if isinstance(namespace, str) and namespace and "." not in name:
        named[f"{namespace}.{name}"] = schema
