"""Avro's binary encoding of a value, by its schema: what INSERT VALUES writes into an AVRO
topic (after Confluent's header).

The value is ksqlDB's JSON representation of it (:func:`metastore.kafka.row_encoding`'s):
DECIMAL a :class:`~decimal.Decimal`, BYTES base64 text, TIMESTAMP and TIME milliseconds, DATE
days. A union is written as its first branch the value fits (``null`` for None); a record's
fields are looked up by name, a missing one written as its default. The schema is a parsed Avro
schema (JSON); named types may be referred to by name after their definition.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable, Mapping
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext
from functools import lru_cache
from typing import Any

MAX_DECIMAL_DIGITS = 1100
"""More digits than any DECIMAL holds (ksqlDB's precision is at most 1000)."""


class AvroEncodingError(ValueError):
    """A value that the schema cannot carry."""


@lru_cache(maxsize=256)
def parsed(schema_text: str) -> Any:
    """A schema's JSON, parsed once per text (every INSERT VALUES row of a source writes it;
    :func:`encode` never changes it)."""
    return json.loads(schema_text)


def encode(schema: Any, value: Any) -> bytes:
    out = bytearray()
    _write(out, schema, value, {}, 0)
    return bytes(out)


def _long(out: bytearray, number: int) -> None:
    encoded = (number << 1) ^ (number >> 63)
    while encoded > 0x7F:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)


def _write(out: bytearray, schema: Any, value: Any, named: dict[str, Any], depth: int) -> None:
    if depth > 128:
        raise AvroEncodingError("the schema nests too deeply")
    if isinstance(schema, list):
        _write_union(out, schema, value, named, depth)
        return
    if isinstance(schema, str):
        if schema in named:
            _write(out, named[schema], value, named, depth + 1)
            return
        schema = {"type": schema}
    kind = schema.get("type")
    if isinstance(kind, dict | list):
        _write(out, kind, value, named, depth + 1)
        return
    if kind == "null":
        if value is not None:
            raise AvroEncodingError(f"{value!r} is not null")
        return
    if value is None:
        raise AvroEncodingError(f"NULL where {kind} is not optional")
    writer = _WRITERS.get(kind) if isinstance(kind, str) else None
    if writer is not None:
        writer(out, schema, value, named, depth)
    elif isinstance(kind, str) and kind in named:
        _write(out, named[kind], value, named, depth + 1)
    else:
        raise AvroEncodingError(f"cannot write Avro type {kind!r}")


def _write_union(out: bytearray, schema: list[Any], value: Any, named: dict[str, Any],
                 depth: int) -> None:
    for index, branch in enumerate(schema):
        if _fits(branch, value, named):
            _long(out, index)
            _write(out, branch, value, named, depth + 1)
            return
    raise AvroEncodingError(f"{value!r} fits no branch of {schema}")


def _write_boolean(out: bytearray, _schema: Mapping[str, Any], value: Any,
                   _named: dict[str, Any], _depth: int) -> None:
    out.append(1 if value else 0)


def _write_long(out: bytearray, _schema: Mapping[str, Any], value: Any,
                _named: dict[str, Any], _depth: int) -> None:
    _long(out, int(value))


def _write_float(out: bytearray, _schema: Mapping[str, Any], value: Any,
                 _named: dict[str, Any], _depth: int) -> None:
    out += struct.pack("<f", float(value))


def _write_double(out: bytearray, _schema: Mapping[str, Any], value: Any,
                  _named: dict[str, Any], _depth: int) -> None:
    out += struct.pack("<d", float(value))


def _write_string(out: bytearray, _schema: Mapping[str, Any], value: Any,
                  _named: dict[str, Any], _depth: int) -> None:
    data = str(value).encode()
    _long(out, len(data))
    out += data


def _write_bytes(out: bytearray, schema: Mapping[str, Any], value: Any,
                 named: dict[str, Any], _depth: int) -> None:
    data = _bytes(schema, value)
    if schema.get("type") == "bytes":
        _long(out, len(data))
    named.setdefault(str(schema.get("name")), schema)
    out += data


def _write_enum(out: bytearray, schema: Mapping[str, Any], value: Any,
                named: dict[str, Any], _depth: int) -> None:
    named.setdefault(str(schema.get("name")), schema)
    _long(out, list(schema.get("symbols") or []).index(str(value)))


def _write_array(out: bytearray, schema: Mapping[str, Any], value: Any,
                 named: dict[str, Any], depth: int) -> None:
    items = list(value)
    if items:
        _long(out, len(items))
        for item in items:
            _write(out, schema.get("items"), item, named, depth + 1)
    _long(out, 0)


def _write_map(out: bytearray, schema: Mapping[str, Any], value: Any,
               named: dict[str, Any], depth: int) -> None:
    entries: Mapping[str, Any] = value
    if entries:
        _long(out, len(entries))
        for key, item in entries.items():
            _write(out, "string", key, named, depth + 1)
            _write(out, schema.get("values"), item, named, depth + 1)
    _long(out, 0)


def _write_record(out: bytearray, schema: Mapping[str, Any], value: Any,
                  named: dict[str, Any], depth: int) -> None:
    _remember(schema, named)
    fields: Mapping[str, Any] = value
    upper = {str(key).upper(): item for key, item in fields.items()}
    for field in schema.get("fields") or []:
        name = str(field.get("name"))
        item = fields[name] if name in fields else upper.get(name.upper(), field.get("default"))
        _write(out, field.get("type"), item, named, depth + 1)


_Writer = Callable[[bytearray, Mapping[str, Any], Any, dict[str, Any], int], None]
_WRITERS: dict[str, _Writer] = {
    "boolean": _write_boolean, "int": _write_long, "long": _write_long, "float": _write_float,
    "double": _write_double, "string": _write_string, "bytes": _write_bytes,
    "fixed": _write_bytes, "enum": _write_enum, "array": _write_array, "map": _write_map,
    "record": _write_record}
"""How a value of each Avro type is written, by the type's name."""


def _bytes(schema: Mapping[str, Any], value: Any) -> bytes:
    if schema.get("logicalType") == "decimal":
        scale = int(schema.get("scale", 0))
        with localcontext(Context(prec=MAX_DECIMAL_DIGITS)):  # not the default 28 digits
            unscaled = int(Decimal(str(value)).scaleb(scale).to_integral_value(ROUND_HALF_UP))
        size = max(1, (unscaled.bit_length() + 8) // 8)
        data = unscaled.to_bytes(size, "big", signed=True)
        if schema.get("type") == "fixed":
            width = int(schema.get("size", size))
            data = data.rjust(width, b"\xff" if unscaled < 0 else b"\0")
        return data
    if isinstance(value, bytes):
        return value
    return base64.b64decode(str(value))


def _fits(schema: Any, value: Any, named: dict[str, Any]) -> bool:
    if isinstance(schema, str):
        schema = named.get(schema, {"type": schema})
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if value is None or kind == "null":
        return value is None and kind == "null"
    fits = _FITS.get(kind) if isinstance(kind, str) else None
    return True if fits is None else fits(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


_FITS: dict[str, Callable[[Any], bool]] = {
    "boolean": lambda value: isinstance(value, bool),
    "int": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "long": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "float": _is_number, "double": _is_number,
    "bytes": lambda value: isinstance(value, bytes | str | Decimal | int | float),
    "fixed": lambda value: isinstance(value, bytes | str | Decimal | int | float),
    "string": lambda value: isinstance(value, str), "enum": lambda value: isinstance(value, str),
    "array": lambda value: isinstance(value, list),
    "map": lambda value: isinstance(value, dict), "record": lambda value: isinstance(value, dict)}
"""Whether a value fits a union's branch of each Avro type, by the type's name."""


def _remember(schema: Mapping[str, Any], named: dict[str, Any]) -> None:
    name = schema.get("name")
    if isinstance(name, str):
        named.setdefault(name, schema)
        namespace = schema.get("namespace")
        if isinstance(namespace, str) and namespace:
            named.setdefault(f"{namespace}.{name}", schema)
