"""The record an INSERT INTO ... VALUES writes (ksqlDB's ``GenericRecordFactory``).

Run after :mod:`metastore.engine.insert_values` accepted the statement. The columns are the
ones listed or, with none listed, the key columns then the value columns; each value is a
literal (a number, string, boolean, NULL, a negated number, ``ARRAY[...]``, ``MAP(k := v)``,
``STRUCT(F := v)``) evaluated as ksqlDB types it (an integer literal INTEGER when it fits 32 bits,
else BIGINT; one with a point DECIMAL; one with an exponent DOUBLE) and coerced to its column's
type by ksqlDB's strict coercer (``DefaultSqlValueCoercer.STRICT``): numbers widen
INTEGER -> BIGINT -> DECIMAL -> DOUBLE, a DECIMAL must fit its precision and scale, a string
may be a TIMESTAMP, TIME, DATE or base64 BYTES; no integer beyond BIGINT (a JSON row's number
that Java would read as a ``BigInteger``) and no number beyond DOUBLE is any column's value.
Anything else is ksqlDB's ``Expected type X for field `C` but got Y(v)``. ROWTIME sets the
record's timestamp, else the wall clock does.

:func:`json_row` builds the row of one JSON object of an ``/inserts-stream`` request the same
way, with the coercion messages of ksqlDB's ``KeyValueExtractor``.

Coerced values are Python values the row encoder writes: ``bool``, ``int`` (TIMESTAMP and TIME
in milliseconds, DATE in days), ``Decimal``, ``float``, ``str``, ``bytes``, lists, dicts.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from metastore.catalog.exceptions import QueryError, StatementError
from metastore.catalog.model import DataSource
from metastore.engine.pseudo_columns import PSEUDO_COLUMNS
from metastore.engine.typer import sql_type_of
from metastore.functions import operators
from metastore.sql import types as ty
from metastore.sql.statements import ColumnRole, InsertValues

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class InsertValuesError(StatementError):
    """A record INSERT VALUES could not write (its format, or Kafka refused or lost it):
    nothing was written, or the write's outcome is unknown, as the message says."""

    code = "insert_values_error"


@dataclass(frozen=True)
class InsertRecord:
    """The row (every column set, by name) and the record's timestamp in milliseconds."""

    row: dict[str, Any]
    timestamp_ms: int


@dataclass(frozen=True)
class EncodedRecord:
    """An INSERT VALUES record as Kafka bytes, ready to be produced into ``topic``."""

    topic: str
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


class StructValue(dict[str, Any]):
    """A STRUCT value (ksqlDB prints it ``Struct{F=v}``)."""


class _NotALiteralError(Exception):
    pass


def build(statement: InsertValues, source: DataSource, now_ms: int) -> InsertRecord:
    """The record of ``statement`` for ``source``; a value of the wrong type is a
    :class:`QueryError` with ksqlDB's message."""
    failed = f"Failed to insert values into '{statement.target}'. "
    names = statement.columns or tuple(
        c.name for c in source.columns if c.role not in (ColumnRole.HEADER, ColumnRole.HEADERS))
    row: dict[str, Any] = {}
    for name, expression in zip(names, statement.values, strict=True):
        column = source.column(name)
        sql_type = column.type if column is not None else PSEUDO_COLUMNS[name]
        try:
            value = evaluate(expression)
        except _NotALiteralError:
            raise QueryError(f"{failed}Only literal values can be inserted for now, not: "
                             f"{operators.ksql_text(expression)}", source.name) from None
        row[name] = coerce_field(value, sql_type, name, failed, source.name)
    timestamp = row.pop("ROWTIME", None)
    if timestamp is None:
        return InsertRecord(row, now_ms)
    if int(timestamp) < 0:  # Kafka's ProducerRecord refuses it
        raise InsertValuesError(f"{failed}Invalid timestamp: {int(timestamp)}. Timestamp "
                                "should always be non-negative or null.", source.name)
    if int(timestamp) == 0:  # librdkafka writes a timestamp of 0 as the wall clock
        raise InsertValuesError(f"{failed}A ROWTIME of 0 cannot be written: the Kafka client "
                                "of this metastore writes 0 as the current time. Use a "
                                "positive ROWTIME or none.", source.name)
    return InsertRecord(row, int(timestamp))


def coerce_field(value: Any, sql_type: ty.SqlType, name: str, failed: str = "",
                 source: str | None = None) -> Any:
    """``value`` as ``sql_type``, or ksqlDB's ``Expected type`` error for column ``name``."""
    ok, coerced = coerce(value, sql_type)
    if ok:
        return coerced
    base = value_type(value)
    hint = ""
    if base == "STRING":
        hint = {"TIMESTAMP": ". Timestamp format must be yyyy-mm-ddThh:mm:ss[.S]",
                "TIME": ". Time format must be hh:mm:ss[.S]",
                "DATE": ". Date format must be yyyy-mm-dd"}.get(sql_type.sql(), "")
    raise QueryError(f"{failed}Expected type {sql_type.sql()} for field `{name}` but got "
                     f"{base}({java_text(value)}){hint}", source)


# -- rows of an inserts stream -------------------------------------------------------------------
def json_row(fields: Mapping[str, Any], source: DataSource) -> dict[str, Any]:
    """The row one ``/inserts-stream`` JSON object sets (ksqlDB's ``KeyValueExtractor``): field
    names are identifiers (upper-cased unless in backticks), every key column is given, each
    value is coerced to its column's type (BYTES as base64 text); other fields are ignored.
    JSON numbers with a fraction are expected as :class:`Decimal` (exact until coerced)."""
    given: dict[str, Any] = {}
    for name, value in fields.items():
        text = identifier_text(name)
        if text in given:
            raise QueryError(f"Found duplicate column / struct field name: {text}", source.name)
        given[text] = value
    row: dict[str, Any] = {}
    for column in source.key_columns:
        value = given.get(column.name)
        if value is None:
            raise QueryError(f"Key field must be specified: {column.name}", source.name)
        row[column.name] = _coerce_json(value, column.type, source.name)
    for column in source.value_columns:
        value = given.get(column.name)
        row[column.name] = None if value is None else _coerce_json(value, column.type,
                                                                   source.name)
    return row


def identifier_text(name: str) -> str:
    """A name as ksqlDB's ``Identifiers.getIdentifierText`` reads it: upper-cased, or exactly
    as written between backticks."""
    if name.startswith("`"):
        if len(name) < 2 or not name.endswith("`"):
            raise QueryError(f"Invalid column / struct field name. Name: {name}. Reason: "
                             "unterminated backtick quote.")
        return name[1:-1].replace("``", "`")
    return name.upper()


def _coerce_json(value: Any, to: ty.SqlType, source: str) -> Any:
    ok, coerced = coerce(_from_json(value, to), to)
    if not ok:
        raise QueryError(f"Can't coerce a field of type {_java_class(value)} into type "
                         f"{to.sql()}", source)
    return coerced


def _from_json(value: Any, to: ty.SqlType) -> Any:
    """A decoded JSON value as the values :func:`coerce` takes: objects become a STRUCT where
    ``to`` is one (else a MAP), through arrays and maps."""
    if isinstance(value, dict):
        if isinstance(to, ty.StructType):
            fields = dict(to.fields)
            return StructValue({k: _from_json(v, fields.get(k.upper(), to)) for k, v in
                                value.items()})
        item = to.value if isinstance(to, ty.MapType) else to
        return {k: _from_json(v, item) for k, v in value.items()}
    if isinstance(value, list):
        element = to.element if isinstance(to, ty.ArrayType) else to
        return [_from_json(v, element) for v in value]
    return value


def _java_class(value: Any) -> str:
    """The class ksqlDB's JSON decoder gives ``value`` (in its coercion error)."""
    if isinstance(value, bool):
        return "class java.lang.Boolean"
    if isinstance(value, int):
        if not _LONG_MIN <= value <= _LONG_MAX:
            return "class java.math.BigInteger"
        return f"class java.lang.{'Integer' if _INT_MIN <= value <= _INT_MAX else 'Long'}"
    if isinstance(value, Decimal | float):
        return "class java.lang.Double"
    if isinstance(value, str):
        return "class java.lang.String"
    if isinstance(value, list):
        return "class io.vertx.core.json.JsonArray"
    return "class io.vertx.core.json.JsonObject"


# -- evaluating literals -------------------------------------------------------------------------
def evaluate(expression: exp.Expr) -> Any:
    """The value of a literal expression, typed as ksqlDB types literals."""
    if isinstance(expression, exp.Paren):
        return evaluate(expression.this)
    if isinstance(expression, exp.Null):
        return None
    if isinstance(expression, exp.Boolean):
        return bool(expression.this)
    if isinstance(expression, exp.Literal):
        return expression.this if expression.is_string else _number(str(expression.this))
    if isinstance(expression, exp.Neg):
        inner = evaluate(expression.this)
        if isinstance(inner, bool) or not isinstance(inner, int | float | Decimal):
            raise _NotALiteralError
        return -inner
    if isinstance(expression, exp.Array):
        return [evaluate(e) for e in expression.expressions]
    if isinstance(expression, exp.Cast):
        return _cast(evaluate(expression.this), expression.to)
    if isinstance(expression, exp.Add | exp.Sub | exp.Mul):
        return _arithmetic(expression, evaluate(expression.left), evaluate(expression.right))
    if isinstance(expression, exp.Anonymous) and str(expression.this).upper() in ("MAP",
                                                                                   "STRUCT"):
        pairs = []
        for item in expression.expressions:
            if not isinstance(item, exp.PropertyEQ):
                raise _NotALiteralError
            pairs.append((item.this, evaluate(item.expression)))
        if str(expression.this).upper() == "MAP":
            return {evaluate(k): v for k, v in pairs}
        return StructValue({(k.name if isinstance(k, exp.Identifier) else str(evaluate(k))): v
                            for k, v in pairs})
    raise _NotALiteralError


def _cast(value: Any, to: exp.DataType) -> Any:
    """``CAST(value AS to)`` of a constant: NULL stays NULL (of that type), any other value
    is converted as a column of that type takes it."""
    if value is None:
        return None
    try:
        target = sql_type_of(to, {})
    except QueryError:
        raise _NotALiteralError from None
    ok, converted = coerce(value, target)
    if not ok:
        raise _NotALiteralError
    return converted


def _arithmetic(expression: exp.Expr, left: Any, right: Any) -> Any:
    """``+``, ``-`` or ``*`` of two constant numbers (NULL if either is NULL), exact: a result
    its column cannot hold is refused as a value of the wrong type (ksqlDB would wrap an
    INTEGER or BIGINT overflow as Java does, which needs the operands' types, not their
    values)."""
    if left is None or right is None:
        return None
    numbers = (int, Decimal, float)
    if isinstance(left, bool) or isinstance(right, bool) or not (
            isinstance(left, numbers) and isinstance(right, numbers)):
        raise _NotALiteralError
    if isinstance(left, float) or isinstance(right, float):
        left, right = float(left), float(right)
    elif isinstance(left, Decimal) or isinstance(right, Decimal):
        left, right = Decimal(left), Decimal(right)
    if isinstance(expression, exp.Add):
        result = left + right
    elif isinstance(expression, exp.Sub):
        result = left - right
    else:
        result = left * right
    return result


def _number(text: str) -> int | Decimal | float:
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if "e" in text.lower():
        return float(text)
    return Decimal(text)


def value_type(value: Any) -> str:
    """ksqlDB's SQL base type of an evaluated value (its ``javaToSqlConverter``)."""
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "INTEGER" if _INT_MIN <= value <= _INT_MAX else "BIGINT"
    if isinstance(value, Decimal):
        return "DECIMAL"
    if isinstance(value, float):
        return "DOUBLE"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, bytes):
        return "BYTES"
    if isinstance(value, list):
        return "ARRAY"
    if isinstance(value, StructValue):
        return "STRUCT"
    if isinstance(value, dict):
        return "MAP"
    return type(value).__name__.upper()


def java_text(value: Any) -> str:
    """A value as Java's ``toString`` prints it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(java_text(v) for v in value) + "]"
    if isinstance(value, StructValue):
        return "Struct{" + ",".join(f"{k}={java_text(v)}" for k, v in value.items()
                                    if v is not None) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{java_text(k)}={java_text(v)}" for k, v in value.items()) + "}"
    return str(value)


# -- coercion (DefaultSqlValueCoercer.STRICT) ----------------------------------------------------
def coerce(value: Any, to: ty.SqlType) -> tuple[bool, Any]:
    """(True, the value as ``to``) or (False, None) where the strict coercer refuses it."""
    if value is None:
        return True, None
    source = value_type(value)
    target = to.base
    if source == "BOOLEAN":
        return (True, value) if target == "BOOLEAN" else (False, None)
    if isinstance(value, int) and not _LONG_MIN <= value <= _LONG_MAX:
        return False, None  # beyond BIGINT: Java has no number type for it
    if source in ("INTEGER", "BIGINT", "DECIMAL"):
        return _from_number(value, source, to)
    if source == "DOUBLE":
        return _double(value) if target == "DOUBLE" else (False, None)
    if source == "STRING":
        return _from_string(value, target)
    return _from_container(value, source, to)


_REFUSED: tuple[bool, Any] = (False, None)


def _from_number(value: int | Decimal, source: str, to: ty.SqlType) -> tuple[bool, Any]:
    """An INTEGER, BIGINT or DECIMAL as ``to``: widened, never narrowed."""
    target = to.base
    if target == "DECIMAL" and isinstance(to, ty.DecimalType):
        return _fit(Decimal(value), to)
    if target == source or (target == "BIGINT" and source == "INTEGER"):
        return True, value
    if target == "DOUBLE":
        return _double(float(value))
    return _REFUSED


def _from_container(value: Any, source: str, to: ty.SqlType) -> tuple[bool, Any]:
    """An ARRAY, MAP or STRUCT as ``to``, each element coerced."""
    if source == "ARRAY" and isinstance(to, ty.ArrayType):
        items = [coerce(v, to.element) for v in value]
        return (True, [v for _, v in items]) if all(ok for ok, _ in items) else _REFUSED
    if source == "MAP" and isinstance(to, ty.MapType):
        coerced: dict[Any, Any] = {}
        for key, item in value.items():
            key_ok, key_value = coerce(key, to.key)
            item_ok, item_value = coerce(item, to.value)
            if not (key_ok and item_ok):
                return _REFUSED
            coerced[key_value] = item_value
        return True, coerced
    if source == "STRUCT" and isinstance(to, ty.StructType):
        given = {k.upper(): v for k, v in value.items()}
        struct = StructValue()
        for name, field_type in to.fields:
            ok, field_value = coerce(given.get(name.upper()), field_type)
            if not ok:
                return _REFUSED
            struct[name] = field_value
        return True, struct
    return _REFUSED


def _double(value: float) -> tuple[bool, Any]:
    """A DOUBLE's value: finite (NaN and infinities are not JSON, nor a literal ksqlDB reads)."""
    return (True, value) if math.isfinite(value) else (False, None)


def _fit(value: Decimal, to: ty.DecimalType) -> tuple[bool, Any]:
    """ksqlDB's ``DecimalUtil.ensureFit``: no digit lost, none beyond the precision."""
    try:
        scaled = value.quantize(Decimal(1).scaleb(-to.scale))
    except InvalidOperation:
        return False, None
    if scaled != value or (len(scaled.as_tuple().digits) > to.precision and scaled != 0):
        return False, None
    integer_digits = len(str(abs(int(scaled)))) if int(scaled) != 0 else 0
    if integer_digits > to.precision - to.scale:
        return False, None
    return True, scaled


def _from_string(value: str, target: str) -> tuple[bool, Any]:
    text = value.strip()
    try:
        if target == "STRING":
            return True, value
        if target == "TIMESTAMP":
            return True, parse_timestamp(text)
        if target == "TIME":
            return True, parse_time(text)
        if target == "DATE":
            return True, (dt.date.fromisoformat(text) - _EPOCH.date()).days
        if target == "BYTES":
            return True, base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        return False, None
    return False, None


_TIMESTAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?")
_TIME = re.compile(r"(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?")


def parse_timestamp(text: str) -> int:
    """``yyyy-mm-ddThh:mm[:ss[.S]]`` (UTC) in epoch milliseconds (ksqlDB's SqlTimeTypes)."""
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        raise ValueError(text)
    year, month, day, hour, minute = (int(match.group(i)) for i in range(1, 6))
    moment = dt.datetime(year, month, day, hour, minute, int(match.group(6) or 0), tzinfo=dt.UTC)
    millis = int((match.group(7) or "0").ljust(3, "0")[:3])
    return int((moment - _EPOCH).total_seconds()) * 1000 + millis


def parse_time(text: str) -> int:
    """``hh:mm[:ss[.S]]`` in milliseconds of the day."""
    match = _TIME.fullmatch(text)
    if match is None:
        raise ValueError(text)
    hour, minute, second = int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError(text)
    millis = int((match.group(4) or "0").ljust(3, "0")[:3])
    return ((hour * 60 + minute) * 60 + second) * 1000 + millis
