"""JSON functions over STRING values: EXTRACTJSONFIELD, IS_JSON_STRING, JSON_ARRAY_LENGTH,
JSON_KEYS, TO_JSON_STRING, ... (their inputs and outputs are JSON text)."""

from __future__ import annotations

from sqlglot import exp

from metastore.functions import casts
from metastore.functions import sparksql as sql
from metastore.functions.registry import Call, FunctionSpec, T, scalar, sig
from metastore.sql import types as ty

STRING = ty.STRING


def _to_json_string(call: Call) -> exp.Expr:
    """ksqlDB's JSON of any value (``null`` for NULL): Spark's JSON of a one-element array,
    without its brackets; timestamps as ksqlDB writes them, without a zone."""
    options = sql.fn("map", sql.lit("timestampFormat"), sql.lit("yyyy-MM-dd'T'HH:mm:ss.SSS"))
    value = call.args[0]
    if call.type(0) == ty.TIME:  # ksqlDB's formatTime (LocalTime's text), not milliseconds
        value = casts.to_text(value, ty.TIME)
    text = sql.fn("to_json", sql.fn("array", value), options)
    inner = sql.fn("substring", text, sql.lit(2), sql.sub(sql.fn("length", text), sql.lit(2)))
    return inner


def _is_json_string(call: Call) -> exp.Expr:
    parsed = sql.fn("get_json_object", sql.fn("concat", sql.lit('{"v":'), call.args[0],
                                                    sql.lit("}")), sql.lit("$.v"))
    valid = exp.Or(this=exp.Not(this=sql.is_null(parsed)),
                   expression=sql.eq(sql.fn("trim", call.args[0]), sql.lit("null")))
    return sql.fn("coalesce", valid, sql.lit(False))


def _parsed(text: exp.Expr, as_type: str = "") -> exp.Expr:
    """``text`` parsed as JSON (a VARIANT; NULL when it is no JSON), or read as ``as_type``
    (NULL when it is not one)."""
    parsed = sql.fn("try_parse_json", text)
    return sql.fn("try_variant_get", parsed, sql.lit("$"), sql.lit(as_type)) if as_type \
        else parsed


def _json_concat(call: Call) -> exp.Expr:
    """JSON_CONCAT(json...), PostgreSQL's ``||``: objects merge their top-level keys (the last
    value of a key wins, keys in the order first seen), anything else concatenates as arrays
    (a non-array as a one-element array); NULL when any input is NULL or no JSON."""
    texts = list(call.args)
    objects = [_parsed(t.copy(), "map<string, variant>") for t in texts]
    invalid = sql.any_null(*(_parsed(t.copy()) for t in texts))
    all_objects = exp.Not(this=exp.Paren(this=sql.any_null(*(o.copy() for o in objects))))
    keys = sql.fn("array_distinct", sql.fn("concat", *(sql.fn("json_object_keys", t.copy())
                                                       for t in texts)))
    key = sql.var("__k")
    latest = sql.fn("coalesce", *(sql.fn("element_at", o.copy(), key.copy())
                                  for o in reversed(objects)))
    member = sql.fn("concat", sql.fn("to_json", sql.cast(key.copy(), "VARIANT")), sql.lit(":"),
                    sql.fn("to_json", latest))
    merged = sql.fn("concat", sql.lit("{"), sql.fn("array_join", sql.fn(
        "transform", keys, sql.lam(member, "__k")), sql.lit(",")), sql.lit("}"))
    if len(texts) == 1:
        joined = sql.fn("to_json", _parsed(texts[0].copy()))
    else:
        arrays = [sql.fn("coalesce", _parsed(t.copy(), "array<variant>"),
                         sql.fn("array", _parsed(t.copy()))) for t in texts]
        joined = sql.fn("to_json", sql.fn("concat", *arrays))
    return sql.case((invalid, sql.cast(sql.null(), STRING)), (all_objects, merged),
                    otherwise=joined)


def _json_records(call: Call) -> exp.Expr:
    """JSON_RECORDS(json): a JSON object's fields, a string as its text, anything else as its
    JSON (``null`` for JSON null), keys in their order; NULL for anything but an object. Spark's
    JSON reader gives a field read as a STRING the text of any value that is not a string."""
    fields = sql.fn("from_json", call.args[0], sql.lit("MAP<STRING, STRING>"))
    text = sql.fn("coalesce", sql.var("__v"), sql.lit("null"))
    return sql.fn("transform_values", fields, sql.lam(text, "__k", "__v"))


def _json_array_contains(call: Call) -> exp.Expr:
    """JSON_ARRAY_CONTAINS(json, value): whether a top-level element of a JSON array is
    ``value``, compared as ksqlDB compares them: an INT or BIGINT only with JSON integers, a
    DOUBLE only with JSON numbers that have a fraction or an exponent, a STRING or BOOLEAN with
    its own kind, NULL with JSON null (a DECIMAL with nothing); FALSE for anything but an
    array."""
    elements = _parsed(call.args[0], "array<variant>")
    wanted = call.args[1]
    element = sql.var("__e")
    kind = sql.fn("schema_of_variant", element)
    decimal = exp.Like(this=kind.copy(), expression=sql.lit("DECIMAL%"))
    compatible: dict[ty.SqlType, tuple[exp.Expr, str]] = {
        ty.INTEGER: (sql.eq(kind.copy(), sql.lit("BIGINT")), "bigint"),
        ty.BIGINT: (sql.eq(kind.copy(), sql.lit("BIGINT")), "bigint"),
        ty.DOUBLE: (exp.Or(this=sql.eq(kind.copy(), sql.lit("DOUBLE")), expression=decimal),
                    "double"),
        ty.BOOLEAN: (sql.eq(kind.copy(), sql.lit("BOOLEAN")), "boolean"),
        ty.STRING: (sql.eq(kind.copy(), sql.lit("STRING")), "string"),
    }
    wanted_type = call.type(1)
    rule = compatible.get(wanted_type) if wanted_type is not None else None
    same: exp.Expr = sql.lit(False)
    if rule is not None:
        value = sql.fn("try_variant_get", element.copy(), sql.lit("$"), sql.lit(rule[1]))
        same = exp.And(this=rule[0], expression=sql.eq(value, wanted.copy()))
    is_null = sql.eq(kind.copy(), sql.lit("VOID"))
    matches = sql.if_(sql.is_null(wanted.copy()), is_null, same)
    found = sql.fn("exists", elements, sql.lam(sql.fn("coalesce", matches, sql.lit(False)), "__e"))
    return sql.fn("coalesce", found, sql.lit(False))


def _json_items(call: Call) -> exp.Expr:
    """JSON_ITEMS(json): each element of a JSON array as JSON text (Jackson's, as ksqlDB's
    ``JsonNode.toString``: an object's keys in their order, which a VARIANT sorts, so an
    object or array element is its text as written); NULL for anything else."""
    items = _parsed(call.args[0], "array<variant>")
    texts = sql.fn("from_json", call.args[0].copy(), sql.lit("array<string>"))
    item = sql.fn("to_json", sql.var("__i"))
    nested = exp.In(this=sql.fn("substring", item, sql.lit(1), sql.lit(1)),
                    expressions=[sql.lit("{"), sql.lit("[")])
    return sql.fn("zip_with", items, texts, sql.lam(
        sql.if_(nested, sql.var("__t"), item.copy()), "__i", "__t"))


FUNCTIONS: tuple[FunctionSpec, ...] = (
    scalar("extractjsonfield", sig(STRING, STRING, returns=STRING),
           spark=lambda call: sql.fn("get_json_object", *call.args)),
    scalar("IS_JSON_STRING", sig(STRING, returns=ty.BOOLEAN), spark=_is_json_string),
    scalar("JSON_ARRAY_LENGTH", sig(STRING, returns=ty.INTEGER),
           spark=lambda call: sql.fn("json_array_length", *call.args)),
    scalar("JSON_KEYS", sig(STRING, returns=ty.ArrayType(STRING)),
           spark=lambda call: sql.fn("json_object_keys", *call.args)),
    scalar("JSON_ARRAY_CONTAINS", sig(STRING, T, returns=ty.BOOLEAN), spark=_json_array_contains),
    scalar("JSON_CONCAT", sig(STRING, returns=STRING, variadic=True), spark=_json_concat),
    scalar("JSON_ITEMS", sig(STRING, returns=ty.ArrayType(STRING)), spark=_json_items),
    scalar("JSON_RECORDS", sig(STRING, returns=ty.MapType(STRING, STRING)), spark=_json_records),
    scalar("TO_JSON_STRING", sig(T, returns=STRING), spark=_to_json_string),
)
