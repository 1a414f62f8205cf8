"""ksqlDB's CAST: which casts it allows and what each gives, as Spark SQL.

:data:`SUPPORTED` is ksqlDB's table of casts by base type (``CastEvaluator``): a cast of a type to
itself is always allowed, collections cast element by element. :func:`check_cast` refuses the
others in ksqlDB's words. :func:`cast` is the Spark SQL of an allowed cast with ksqlDB's values:

- to STRING, Java's ``String.valueOf``: DECIMAL plain (``toPlainString``), DOUBLE as Java prints
  it, ARRAY ``[1, 2]``, MAP ``{k=v}``, STRUCT ``Struct{F0=1,f1=3}`` (NULL fields left out),
  TIMESTAMP ``yyyy-MM-dd'T'HH:mm:ss.SSS``, TIME ``HH:mm:ss`` (``HH:mm`` on a whole minute, as
  Java's ``LocalTime`` prints whole seconds), DATE ``yyyy-MM-dd``;
- from STRING: trimmed; BOOLEAN true for a prefix of ``true`` or ``yes`` (any case), else
  false; INTEGER and BIGINT only from whole numbers (Java's ``parseInt``), BYTES from base64;
- STRUCT to STRUCT by field name (a target field the source lacks is NULL), MAP and ARRAY
  element by element;
- a value that does not convert (overflowing DECIMAL, unparseable STRING) is NULL, as ksqlDB
  turns the error of the cast into NULL.
"""

from __future__ import annotations

from sqlglot import exp

from metastore.functions import sparksql as sql
from metastore.functions.registry import FunctionError
from metastore.sql import types as ty

_NUMBERS = ("INTEGER", "BIGINT", "DECIMAL", "DOUBLE")

SUPPORTED: frozenset[tuple[str, str]] = frozenset({
    ("BOOLEAN", "STRING"),
    *((source, target) for source in _NUMBERS for target in (*_NUMBERS, "STRING")),
    *(("STRING", target) for target in ("BOOLEAN", *_NUMBERS, "TIMESTAMP", "TIME", "DATE",
                                        "BYTES")),
    ("ARRAY", "ARRAY"), ("ARRAY", "STRING"), ("MAP", "MAP"), ("MAP", "STRING"),
    ("STRUCT", "STRUCT"), ("STRUCT", "STRING"),
    ("TIMESTAMP", "STRING"), ("TIMESTAMP", "TIME"), ("TIMESTAMP", "DATE"),
    ("DATE", "TIMESTAMP"), ("TIME", "STRING"), ("DATE", "STRING"),
})
"""(source base type, target base type) pairs ksqlDB casts."""


class CastError(FunctionError):
    """A cast ksqlDB does not support."""

    def __init__(self, source: ty.SqlType, target: ty.SqlType) -> None:
        super().__init__(f"Cast of {ty.backticked(source)} to {ty.backticked(target)} "
                         "is not supported")


def check_cast(source: ty.SqlType | None, target: ty.SqlType) -> None:
    """Raise :class:`CastError` unless ksqlDB casts ``source`` (None: the NULL literal) to
    ``target``."""
    if source is None or source == target:
        return
    if (source.base, target.base) not in SUPPORTED:
        raise CastError(source, target)
    try:
        for inner_source, inner_target in _element_pairs(source, target):
            check_cast(inner_source, inner_target)
    except CastError:
        raise CastError(source, target) from None


def _element_pairs(source: ty.SqlType,
                   target: ty.SqlType) -> list[tuple[ty.SqlType, ty.SqlType]]:
    if isinstance(source, ty.ArrayType) and isinstance(target, ty.ArrayType):
        return [(source.element, target.element)]
    if isinstance(source, ty.MapType) and isinstance(target, ty.MapType):
        return [(source.key, target.key), (source.value, target.value)]
    if isinstance(source, ty.StructType) and isinstance(target, ty.StructType):
        return [(t, found) for name, t in source.fields
                if (found := target.field(name)) is not None]
    return []


def cast(value: exp.Expr, source: ty.SqlType | None, target: ty.SqlType) -> exp.Expr:
    """``CAST(value AS target)`` with ksqlDB's meaning, ``value`` being of type ``source``."""
    if source is None:
        return sql.cast(value, target)
    if source == target:
        return value
    if target == ty.STRING:
        return to_text(value, source)
    if isinstance(source, ty.ArrayType) and isinstance(target, ty.ArrayType):
        return sql.fn("transform", value, sql.lam(cast(sql.var("e"), source.element,
                                                       target.element), "e"))
    if isinstance(source, ty.MapType) and isinstance(target, ty.MapType):
        entries = sql.fn("transform", sql.fn("map_entries", value), sql.lam(
            sql.fn("struct", exp.alias_(cast(_field(sql.var("e"), "key"), source.key,
                                             target.key), "key"),
                   exp.alias_(cast(_field(sql.var("e"), "value"), source.value, target.value),
                              "value")), "e"))
        # a key that does not convert fails ksqlDB's whole CAST; Spark's map fails on it
        unconverted = sql.fn("exists", sql.fn("map_keys", value.copy()), sql.lam(
            sql.is_null(cast(sql.var("k"), source.key, target.key)), "k"))
        return sql.if_(exp.or_(sql.is_null(value.copy()), unconverted),
                       sql.cast(sql.null(), target),
                       sql.fn("map_from_entries", entries))
    if isinstance(source, ty.StructType) and isinstance(target, ty.StructType):
        return _struct_to_struct(value, source, target)
    if source == ty.STRING:
        return _from_text(sql.fn("trim", value), target)
    if source == ty.TIMESTAMP and target == ty.TIME:
        return sql.cast(sql.fn("pmod", sql.fn("unix_millis", value), sql.lit(86_400_000)), "INT")
    return sql.cast(value, target)


def _field(struct: exp.Expr, name: str) -> exp.Expr:
    return exp.Dot(this=struct, expression=exp.to_identifier(name, quoted=True))


def _struct_to_struct(value: exp.Expr, source: ty.StructType,
                      target: ty.StructType) -> exp.Expr:
    fields: list[exp.Expr] = []
    for name, target_type in target.fields:
        source_type = source.field(name)
        field = (sql.cast(sql.null(), target_type) if source_type is None
                 else cast(_field(value, name), source_type, target_type))
        fields += [sql.lit(name), field]
    return sql.if_(sql.is_null(value), sql.cast(sql.null(), target),
                   sql.fn("named_struct", *fields))


_WHOLE_NUMBER = r"^[+-]?[0-9]+$"
_TRUE_PREFIXES = ("t", "tr", "tru", "true", "y", "ye", "yes")


def _from_text(trimmed: exp.Expr, target: ty.SqlType) -> exp.Expr:
    if target == ty.BOOLEAN:
        return exp.In(this=sql.fn("lower", trimmed),
                      expressions=[sql.lit(p) for p in _TRUE_PREFIXES])
    if target in (ty.INTEGER, ty.BIGINT):
        whole = exp.RegexpLike(this=trimmed, expression=sql.lit(_WHOLE_NUMBER))
        return sql.if_(whole, sql.cast(trimmed, target), sql.cast(sql.null(), target))
    if target == ty.BYTES:
        return sql.fn("unbase64", trimmed)
    if target == ty.TIME:
        parsed = sql.fn("to_timestamp", sql.fn("concat", sql.lit("1970-01-01 "), trimmed))
        return sql.cast(sql.fn("unix_millis", parsed), "INT")
    return sql.cast(trimmed, target)


_DATETIME_PATTERNS = {"TIMESTAMP": "yyyy-MM-dd'T'HH:mm:ss.SSS", "DATE": "yyyy-MM-dd"}


def to_text(value: exp.Expr, source: ty.SqlType) -> exp.Expr:
    """``value`` as Java's ``String.valueOf`` writes it (NULL stays NULL)."""
    if isinstance(source, ty.DecimalType):
        return _plain_decimal(value, source.scale)
    if source == ty.TIME:  # LocalTime.ofSecondOfDay(...).toString(): no zero seconds
        seconds = sql.fn("floor", exp.Div(this=sql.cast(value, "BIGINT"), expression=sql.lit(1000)))
        moment = sql.fn("timestamp_seconds", seconds)
        return exp.If(this=exp.EQ(this=exp.Mod(this=seconds, expression=sql.lit(60)),
                                  expression=sql.lit(0)),
                      true=sql.fn("date_format", moment, sql.lit("HH:mm")),
                      false=sql.fn("date_format", moment, sql.lit("HH:mm:ss")))
    if source.base in _DATETIME_PATTERNS:
        return sql.fn("date_format", value, sql.lit(_DATETIME_PATTERNS[source.base]))
    if isinstance(source, ty.ArrayType):
        elements = sql.fn("transform", value, sql.lam(_nested_text(sql.var("e"), source.element),
                                                      "e"))
        return _enclosed("[", sql.fn("array_join", elements, sql.lit(", ")), "]")
    if isinstance(source, ty.MapType):
        entry = sql.var("e")
        pairs = sql.fn("transform", sql.fn("map_entries", value), sql.lam(sql.fn(
            "concat", _nested_text(_field(entry, "key"), source.key), sql.lit("="),
            _nested_text(_field(entry, "value"), source.value)), "e"))
        return _enclosed("{", sql.fn("array_join", pairs, sql.lit(", ")), "}")
    if isinstance(source, ty.StructType):
        present = [sql.fn("concat", sql.lit(f"{name}="), to_text(_field(value, name), t))
                   for name, t in source.fields]
        joined = sql.fn("concat_ws", sql.lit(","), *present) if present else sql.lit("")
        return sql.if_(sql.is_null(value), sql.cast(sql.null(), ty.STRING),
                       sql.fn("concat", sql.lit("Struct{"), joined, sql.lit("}")))
    return sql.cast(value, ty.STRING)


def _nested_text(value: exp.Expr, source: ty.SqlType) -> exp.Expr:
    """An element inside a collection's text: Java writes a NULL element as ``null``."""
    return sql.fn("coalesce", to_text(value, source), sql.lit("null"))


def _enclosed(opening: str, inner: exp.Expr, closing: str) -> exp.Expr:
    return sql.fn("concat", sql.lit(opening), inner, sql.lit(closing))


def _plain_decimal(value: exp.Expr, scale: int) -> exp.Expr:
    """Java's ``BigDecimal.toPlainString``: Spark writes values below 1E-6 in E notation
    (``1.0E-7``, ``0E-8``), whose mantissa digits are the fraction's last digits."""
    text = sql.cast(value, ty.STRING)
    mantissa_digits = sql.fn("regexp_replace", sql.fn("substring_index", text, sql.lit("E"),
                                                      sql.lit(1)), sql.lit("[-.]"), sql.lit(""))
    sign = sql.if_(sql.fn("startswith", text, sql.lit("-")), sql.lit("-"), sql.lit(""))
    plain = sql.fn("concat", sign, sql.lit("0."),
                   sql.fn("lpad", mantissa_digits, sql.lit(scale), sql.lit("0")))
    return sql.if_(sql.fn("contains", text, sql.lit("E")), plain, text)
