"""Aggregate functions: COUNT, SUM, AVG, MIN, MAX, COUNT_DISTINCT, COLLECT_LIST/SET, TOPK,
TOPKDISTINCT, HISTOGRAM, EARLIEST/LATEST_BY_OFFSET, STDDEV_SAMP, CORRELATION, ATTR.

Spark runs them in a streaming aggregation, so each translation is made of aggregates Spark can
update incrementally (no exact DISTINCT). ksqlDB's SUM starts from 0 (a group of NULLs sums to 0),
*_BY_OFFSET order by the source offset and by default skip NULL values, COUNT_DISTINCT is
approximate (HyperLogLog) in ksqlDB as in Spark.
"""

from __future__ import annotations

from sqlglot import exp

from metastore.functions import sparksql as sql
from metastore.functions.registry import (
    ANY_DECIMAL,
    ArrayOf,
    Call,
    Family,
    FunctionSpec,
    Kind,
    Signature,
    T,
    Translation,
    UntranslatableError,
    array_of_first,
    first_argument,
    literal_int,
    sig,
    spec,
)
from metastore.sql import types as ty

INTEGER, BIGINT, DOUBLE, BOOLEAN = ty.INTEGER, ty.BIGINT, ty.DOUBLE, ty.BOOLEAN
NUMBERS: tuple[ty.SqlType | Family, ...] = (INTEGER, BIGINT, DOUBLE, ANY_DECIMAL)
ORDERED: tuple[ty.SqlType | Family, ...] = (
    INTEGER, BIGINT, DOUBLE, ANY_DECIMAL, ty.STRING, ty.BYTES, ty.DATE, ty.TIME, ty.TIMESTAMP)


def aggregate(names: str | tuple[str, ...], *signatures: Signature,
              spark: Translation | None = None, unsupported: str = "") -> FunctionSpec:
    return spec(names, Kind.AGGREGATE, signatures, spark, unsupported=unsupported)


def _same(param: ty.SqlType | Family) -> Signature:
    return sig(param, returns=param if isinstance(param, ty.SqlType) else first_argument)


def _typed(result: exp.Expr, call: Call) -> exp.Expr:
    return sql.cast(result, call.returns) if call.returns is not None else result


def _count(call: Call) -> exp.Expr:
    return sql.fn("count", *(call.args or [exp.Star()]))


def _sum(call: Call) -> exp.Expr:
    return _typed(sql.fn("coalesce", sql.fn("sum", call.args[0]), sql.lit(0)), call)


def _by_offset(function: str) -> Translation:
    def translate(call: Call) -> exp.Expr:
        value, *options = call.args
        if call.row_offset is None:
            raise UntranslatableError("*_BY_OFFSET needs the source offset")
        if options and isinstance(call.type(1), ty.Primitive) and call.type(1) != BOOLEAN:
            raise UntranslatableError("*_BY_OFFSET of the N latest or earliest values is not "
                                 "supported yet")
        ignore_nulls = not options or not isinstance(options[0], exp.Boolean) or bool(
            options[0].this)
        order = (sql.if_(sql.is_null(value), sql.null(), call.row_offset) if ignore_nulls
                 else call.row_offset)
        return sql.fn(function, value, order)
    return translate


def _top(collect: str) -> Translation:
    def translate(call: Call) -> exp.Expr:
        if len(call.args) != 2:
            raise UntranslatableError("TOPK with other columns is not supported yet")
        value, count = call.args
        if literal_int(count) is None:
            raise UntranslatableError("TOPK needs a literal count")
        descending = sql.fn("sort_array", sql.fn(collect, value), sql.lit(False))
        return sql.fn("slice", descending, sql.lit(1), count)
    return translate


def _histogram(call: Call) -> exp.Expr:
    values = sql.fn("collect_list", call.args[0])
    same = sql.lam(sql.eq(sql.var("__y"), sql.var("__v")), "__y")
    count = sql.cast(sql.fn("size", sql.fn("filter", values, same)), BIGINT)
    entry = sql.lam(sql.fn("struct", sql.var("__v"), count), "__v")
    return sql.fn("map_from_entries", sql.fn("transform", sql.fn("array_distinct", values), entry))


def _attr(call: Call) -> exp.Expr:
    low, high = sql.fn("min", call.args[0]), sql.fn("max", call.args[0])
    return sql.if_(sql.eq(low, high), low, sql.null())


def _builtin(name: str) -> Translation:
    def translate(call: Call) -> exp.Expr:
        return _typed(sql.fn(name, *call.args), call)
    return translate


def _offset_signatures() -> tuple[Signature, ...]:
    return (sig(T, returns=T), sig(T, BOOLEAN, returns=T),
            sig(T, INTEGER, returns=ArrayOf(T)), sig(T, INTEGER, BOOLEAN, returns=ArrayOf(T)))


FUNCTIONS: tuple[FunctionSpec, ...] = (
    aggregate("COUNT", sig(returns=BIGINT), sig(T, returns=BIGINT), spark=_count),
    aggregate("COUNT_DISTINCT", sig(T, returns=BIGINT),
              spark=lambda call: sql.fn("approx_count_distinct", *call.args)),
    aggregate("SUM", *(_same(t) for t in NUMBERS), spark=_sum),
    aggregate("AVG", *(sig(t, returns=DOUBLE) for t in NUMBERS), spark=_builtin("avg")),
    aggregate("MIN", *(_same(t) for t in ORDERED), spark=_builtin("min")),
    aggregate("MAX", *(_same(t) for t in ORDERED), spark=_builtin("max")),
    aggregate("LATEST_BY_OFFSET", *_offset_signatures(), spark=_by_offset("max_by")),
    aggregate("EARLIEST_BY_OFFSET", *_offset_signatures(), spark=_by_offset("min_by")),
    aggregate("COLLECT_LIST", sig(T, returns=ArrayOf(T)), spark=_builtin("collect_list")),
    aggregate("COLLECT_SET", sig(T, returns=ArrayOf(T)), spark=_builtin("collect_set")),
    aggregate("TOPK", *(sig(t, INTEGER, returns=array_of_first) for t in ORDERED),
              spark=_top("collect_list")),
    aggregate("TOPKDISTINCT", *(sig(t, INTEGER, returns=array_of_first) for t in ORDERED),
              spark=_top("collect_set")),
    aggregate("HISTOGRAM", sig(ty.STRING, returns=ty.MapType(ty.STRING, BIGINT)),
              spark=_histogram),
    aggregate(("STDDEV_SAMP", "STDDEV_SAMPLE"), *(sig(t, returns=DOUBLE) for t in NUMBERS),
              spark=_builtin("stddev_samp")),
    aggregate("CORRELATION", *(sig(t, t, returns=DOUBLE) for t in (INTEGER, BIGINT, DOUBLE)),
              spark=_builtin("corr")),
    aggregate("ATTR", sig(T, returns=T), spark=_attr),
)
