"""JSON functions over STRING values: EXTRACTJSONFIELD, IS_JSON_STRING, JSON_ARRAY_LENGTH,
JSON_KEYS, TO_JSON_STRING, ... (their inputs and outputs are JSON text)."""

from __future__ import annotations

from sqlglot import exp

from metastore.functions import sparksql as sql
from metastore.functions.registry import Call, FunctionSpec, T, scalar, sig
from metastore.sql import types as ty

STRING = ty.STRING


def _to_json_string(call: Call) -> exp.Expr:
    """ksqlDB's JSON of any value (``null`` for NULL): Spark's JSON of a one-element array,
    without its brackets; timestamps as ksqlDB writes them, without a zone."""
    options = sql.fn("map", sql.lit("timestampFormat"), sql.lit("yyyy-MM-dd'T'HH:mm:ss.SSS"))
    text = sql.fn("to_json", sql.fn("array", call.args[0]), options)
    inner = sql.fn("substring", text, sql.lit(2), sql.sub(sql.fn("length", text), sql.lit(2)))
    return inner


def _is_json_string(call: Call) -> exp.Expr:
    parsed = sql.fn("get_json_object", sql.fn("concat", sql.lit('{"v":'), call.args[0],
                                                    sql.lit("}")), sql.lit("$.v"))
    valid = exp.Or(this=exp.Not(this=sql.is_null(parsed)),
                   expression=sql.eq(sql.fn("trim", call.args[0]), sql.lit("null")))
    return sql.fn("coalesce", valid, sql.lit(False))


FUNCTIONS: tuple[FunctionSpec, ...] = (
    scalar("extractjsonfield", sig(STRING, STRING, returns=STRING),
           spark=lambda call: sql.fn("get_json_object", *call.args)),
    scalar("IS_JSON_STRING", sig(STRING, returns=ty.BOOLEAN), spark=_is_json_string),
    scalar("JSON_ARRAY_LENGTH", sig(STRING, returns=ty.INTEGER),
           spark=lambda call: sql.fn("json_array_length", *call.args)),
    scalar("JSON_KEYS", sig(STRING, returns=ty.ArrayType(STRING)),
           spark=lambda call: sql.fn("json_object_keys", *call.args)),
    scalar("JSON_ARRAY_CONTAINS", sig(STRING, T, returns=ty.BOOLEAN),
           unsupported="JSON_ARRAY_CONTAINS has no Spark translation yet"),
    scalar("JSON_CONCAT", sig(STRING, returns=STRING, variadic=True),
           unsupported="JSON_CONCAT has no Spark translation yet"),
    scalar("JSON_ITEMS", sig(STRING, returns=ty.ArrayType(STRING)),
           unsupported="JSON_ITEMS has no Spark translation yet"),
    scalar("JSON_RECORDS", sig(STRING, returns=ty.MapType(STRING, STRING)),
           unsupported="JSON_RECORDS has no Spark translation yet"),
    scalar("TO_JSON_STRING", sig(T, returns=STRING), spark=_to_json_string),
)
