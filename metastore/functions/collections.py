"""ARRAY, MAP and STRUCT functions, and the lambda invocations TRANSFORM, FILTER and REDUCE.

ksqlDB indexes arrays from 1 (negative indexes count from the end, out of range is NULL) and
answers NULL for a NULL collection, except where noted: ARRAY_CONTAINS of NULL is false, REDUCE
of NULL is its initial state, ARRAY_CONCAT and MAP_UNION of one NULL are the other collection.
The constructors ARRAY[...], MAP(k := v) and STRUCT(f := v) are typed by the typer (their types
depend on the names and values written); they are declared here for their translation.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from metastore.functions import sparksql as sql
from metastore.functions.registry import (
    Argument,
    ArrayOf,
    Bindings,
    Call,
    FunctionSpec,
    K,
    Kind,
    LambdaOf,
    MapOf,
    S,
    Signature,
    T,
    Translation,
    U,
    UntranslatableError,
    V,
    scalar,
    sig,
    spec,
)
from metastore.sql import types as ty

INTEGER, BOOLEAN, STRING = ty.INTEGER, ty.BOOLEAN, ty.STRING


def apply(function: exp.Expr, *arguments: exp.Expr) -> exp.Expr:
    """The body of a lambda with its parameters replaced by ``arguments``."""
    if not isinstance(function, exp.Lambda):
        raise UntranslatableError("a lambda was expected")
    names = [p.name.upper() for p in function.expressions]
    if len(names) != len(arguments):
        raise UntranslatableError("the lambda takes another number of arguments")
    replacing = dict(zip(names, arguments, strict=True))

    def substitute(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name.upper() in replacing:
            replacement: exp.Expr = replacing[node.name.upper()].copy()
            return replacement
        return node

    body: exp.Expr = function.this.copy()
    result: exp.Expr = body.transform(substitute)
    return result


def _entry(field: str) -> exp.Expr:
    return exp.Dot(this=sql.var("__e"), expression=exp.to_identifier(field))


def _transform(call: Call) -> exp.Expr:
    if len(call.args) == 2:
        return sql.fn("transform", *call.args)
    collection, key_function, value_function = call.args
    key, value = _entry("key"), _entry("value")
    entry = sql.fn("struct", apply(key_function, key, value), apply(value_function, key, value))
    return sql.fn("map_from_entries",
                  sql.fn("transform", sql.fn("map_entries", collection), sql.lam(entry, "__e")))


def _filter(call: Call) -> exp.Expr:
    is_map = isinstance(call.type(0), ty.MapType)
    return sql.fn("map_filter" if is_map else "filter", *call.args)


def _reduce(call: Call) -> exp.Expr:
    collection, initial, function = call.args
    state = sql.cast(initial, call.returns) if call.returns is not None else initial
    if isinstance(call.type(0), ty.MapType):
        merge = sql.lam(apply(function, sql.var("__s"), _entry("key"), _entry("value")),
                        "__s", "__e")
        reduced = sql.fn("aggregate", sql.fn("map_entries", collection), state, merge)
    else:
        reduced = sql.fn("aggregate", collection, state, function)
    return sql.if_(sql.is_null(collection), state, reduced)


def _either_or_both(spark_function: str) -> Translation:
    """ARRAY_CONCAT/MAP_UNION: NULL only when both are; one NULL side gives the other."""

    def translate(call: Call) -> exp.Expr:
        left, right = call.args
        both = sql.fn(spark_function, left, right)
        return sql.if_(sql.is_null(left), right, sql.if_(sql.is_null(right), left, both))
    return translate


def _map_union(call: Call) -> exp.Expr:
    left, right = call.args
    in_right = sql.fn("array_contains", sql.fn("map_keys", right), sql.var("__k"))
    kept = sql.fn("map_filter", left, sql.lam(exp.Not(this=in_right), "__k", "__v"))
    merged = sql.fn("map_concat", kept, right)
    return sql.if_(sql.is_null(left), right, sql.if_(sql.is_null(right), left, merged))


def _array_join(call: Call) -> exp.Expr:
    array, *delimiter = call.args
    text = sql.fn("coalesce", sql.cast(sql.var("__x"), STRING), sql.lit("null"))
    strings = sql.fn("transform", array, sql.lam(text, "__x"))
    return sql.fn("array_join", strings, delimiter[0] if delimiter else sql.lit(","))


def _array_sort(call: Call) -> exp.Expr:
    array, *direction = call.args
    if not direction:
        return sql.fn("sort_array", array, sql.lit(True))
    ascending = sql.eq(sql.fn("upper", direction[0]), sql.lit("ASC"))
    descending = sql.eq(sql.fn("upper", direction[0]), sql.lit("DESC"))
    return sql.case((ascending, sql.fn("sort_array", array, sql.lit(True))),
                    (descending, sql.fn("sort_array", array, sql.lit(False))),
                    otherwise=sql.null())


def _slice(call: Call) -> exp.Expr:
    array, start, end = call.args
    return sql.fn("slice", array, start, sql.add(sql.sub(end, start), sql.lit(1)))


def _entries(call: Call) -> exp.Expr:
    map_, sorted_ = call.args
    entries = sql.fn("map_entries", map_)
    ordered = sql.if_(sorted_, sql.fn("array_sort", entries), entries)
    return sql.cast(ordered, call.returns) if call.returns is not None else ordered


def _map(call: Call) -> exp.Expr:
    pairs: list[exp.Expr] = []
    for argument in call.args:
        if not isinstance(argument, exp.PropertyEQ):
            raise UntranslatableError("MAP takes key := value pairs")
        key = argument.this
        if isinstance(key, exp.Identifier):
            key = exp.column(key.name, quoted=bool(key.args.get("quoted")))
        pairs += [sql.cast(key, STRING), argument.expression]
    return sql.fn("map", *pairs)


def _struct(call: Call) -> exp.Expr:
    fields: list[exp.Expr] = []
    for index, argument in enumerate(call.args):
        if isinstance(argument, exp.PropertyEQ):
            fields += [sql.lit(argument.this.name.upper()), argument.expression]
        elif isinstance(argument, exp.Alias):
            fields += [sql.lit(argument.alias), argument.this]
        else:
            fields += [sql.lit(f"F{index}"), argument]
    return sql.fn("named_struct", *fields)


def _builtin(name: str) -> Translation:
    def translate(call: Call) -> exp.Expr:
        return sql.fn(name, *call.args)
    return translate


def _entries_type(value: ty.SqlType) -> Signature:
    row = ty.StructType((("K", STRING), ("V", value)))
    return sig(MapOf(STRING, value), BOOLEAN, returns=ty.ArrayType(row))


def _constructed(_: Sequence[Argument], __: Bindings) -> ty.SqlType:
    raise AssertionError("constructors are typed by the typer")


_ARRAY = ArrayOf(T)

FUNCTIONS: tuple[FunctionSpec, ...] = (
    spec("ARRAY", Kind.SCALAR, [sig(T, returns=_constructed, variadic=True)],
         lambda call: sql.fn("array", *call.args), variadic_any=True),
    spec("MAP", Kind.SCALAR, [sig(T, returns=_constructed, variadic=True)], _map,
         variadic_any=True),
    spec("STRUCT", Kind.SCALAR, [sig(T, returns=_constructed, variadic=True)], _struct,
         variadic_any=True),
    scalar("array_concat", sig(_ARRAY, _ARRAY, returns=_ARRAY),
           spark=_either_or_both("concat")),
    scalar("ARRAY_CONTAINS", sig(_ARRAY, T, returns=BOOLEAN),
           spark=lambda call: sql.fn("coalesce", sql.fn("array_contains", *call.args),
                                     sql.lit(False))),
    scalar("array_distinct", sig(_ARRAY, returns=_ARRAY), spark=_builtin("array_distinct")),
    scalar("array_except", sig(_ARRAY, _ARRAY, returns=_ARRAY), spark=_builtin("array_except")),
    scalar("array_intersect", sig(_ARRAY, _ARRAY, returns=_ARRAY),
           spark=_builtin("array_intersect")),
    scalar("array_union", sig(_ARRAY, _ARRAY, returns=_ARRAY), spark=_builtin("array_union")),
    scalar("ARRAY_JOIN", sig(_ARRAY, returns=STRING), sig(_ARRAY, STRING, returns=STRING),
           spark=_array_join),
    scalar("ARRAY_LENGTH", sig(_ARRAY, returns=INTEGER), spark=_builtin("array_size")),
    scalar("array_max", sig(_ARRAY, returns=T), spark=_builtin("array_max")),
    scalar("array_min", sig(_ARRAY, returns=T), spark=_builtin("array_min")),
    scalar("array_remove", sig(_ARRAY, T, returns=_ARRAY), spark=_builtin("array_remove")),
    scalar("array_sort", sig(_ARRAY, returns=_ARRAY), sig(_ARRAY, STRING, returns=_ARRAY),
           spark=_array_sort),
    scalar("slice", sig(_ARRAY, INTEGER, INTEGER, returns=_ARRAY), spark=_slice),
    scalar("AS_MAP", sig(ArrayOf(STRING), _ARRAY, returns=MapOf(STRING, T)),
           spark=_builtin("map_from_arrays")),
    scalar("map_keys", sig(MapOf(STRING, T), returns=ArrayOf(STRING)),
           spark=_builtin("map_keys")),
    scalar("map_values", sig(MapOf(STRING, T), returns=_ARRAY), spark=_builtin("map_values")),
    scalar("map_union", sig(MapOf(STRING, T), MapOf(STRING, T), returns=MapOf(STRING, T)),
           spark=_map_union),
    scalar("ENTRIES", *(_entries_type(v) for v in (INTEGER, ty.BIGINT, ty.DOUBLE, BOOLEAN,
                                                   STRING)),
           spark=_entries),
    scalar("transform", sig(_ARRAY, LambdaOf((T,), U), returns=ArrayOf(U)),
           sig(MapOf(K, V), LambdaOf((K, V), T), LambdaOf((K, V), U), returns=MapOf(T, U)),
           spark=_transform),
    scalar("filter", sig(_ARRAY, LambdaOf((T,), BOOLEAN), returns=_ARRAY),
           sig(MapOf(K, V), LambdaOf((K, V), BOOLEAN), returns=MapOf(K, V)), spark=_filter),
    scalar("reduce", sig(_ARRAY, S, LambdaOf((S, T), S), returns=S),
           sig(MapOf(K, V), S, LambdaOf((S, K, V), S), returns=S), spark=_reduce),
)
