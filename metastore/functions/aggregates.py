"""Aggregate functions: COUNT, SUM, AVG, MIN, MAX, COUNT_DISTINCT, COLLECT_LIST/SET, TOPK,
TOPKDISTINCT, HISTOGRAM, EARLIEST/LATEST_BY_OFFSET, STDDEV_SAMP, CORRELATION, ATTR.

Spark runs them in a streaming aggregation, so each translation is made of aggregates Spark can
update incrementally (no exact DISTINCT). ksqlDB's SUM starts from 0 (a group of NULLs sums to 0),
*_BY_OFFSET order by the source offset and by default skip NULL values, COUNT_DISTINCT is
approximate (HyperLogLog) in ksqlDB as in Spark.

ksqlDB aggregates record by record, so the aggregates that keep values (COLLECT_LIST/SET, the N
values of *_BY_OFFSET, TOPK of several columns) collect each value with its source offset and
sort by it: COLLECT_LIST keeps NULLs and the order of arrival, COLLECT_SET the first of equal
values, ``ksql.functions.collect_list.limit`` / ``collect_set.limit`` (from ``Call.config``)
keep the first values only.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from metastore.functions import sparksql as sql
from metastore.functions.collections import distinct
from metastore.functions.registry import (
    ANY,
    ANY_DECIMAL,
    Argument,
    ArrayOf,
    Bindings,
    Call,
    Family,
    FunctionSpec,
    IntermediateRule,
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
              spark: Translation | None = None, unsupported: str = "",
              undoable: bool = False, intermediate: IntermediateRule | None = None
              ) -> FunctionSpec:
    return spec(names, Kind.AGGREGATE, signatures, spark, unsupported=unsupported,
                undoable=undoable, intermediate=intermediate)


# -- intermediate types: what ksqlDB's UDAFs keep between records, when not their result --------

def _struct(*fields: tuple[str, ty.SqlType]) -> ty.StructType:
    return ty.StructType(tuple(fields))


def _input(args: Sequence[ty.SqlType | None]) -> ty.SqlType:
    return args[0] if args and args[0] is not None else ty.STRING


def _sum_and_count(args: Sequence[ty.SqlType | None], _: ty.SqlType) -> ty.SqlType:
    """AVG: ``STRUCT<SUM input, COUNT BIGINT>``."""
    return _struct(("SUM", _input(args)), ("COUNT", BIGINT))


def _deviation(args: Sequence[ty.SqlType | None], _: ty.SqlType) -> ty.SqlType:
    """STDDEV_SAMP, STDDEV_SAMPLE: ``STRUCT<SUM input, COUNT BIGINT, M2 DOUBLE>``."""
    return _struct(("SUM", _input(args)), ("COUNT", BIGINT), ("M2", DOUBLE))


def _correlation(_: Sequence[ty.SqlType | None], __: ty.SqlType) -> ty.SqlType:
    return _struct(("X_SUM", DOUBLE), ("Y_SUM", DOUBLE), ("X_SQUARED_SUM", DOUBLE),
                   ("Y_SQUARED_SUM", DOUBLE), ("XY_SUM", DOUBLE), ("COUNT", BIGINT))


def _by_offset_state(args: Sequence[ty.SqlType | None], _: ty.SqlType) -> ty.SqlType:
    """*_BY_OFFSET: each value kept with its offset, ``STRUCT<SEQ BIGINT, VAL input>``; an
    array of them when it keeps N values."""
    entry = _struct(("SEQ", BIGINT), ("VAL", _input(args)))
    return ty.ArrayType(entry) if len(args) > 1 and args[1] == INTEGER else entry


def _attr_state(args: Sequence[ty.SqlType | None], _: ty.SqlType) -> ty.SqlType:
    """ATTR: each distinct value with its count, ``ARRAY<STRUCT<VALUE input, COUNT INTEGER>>``."""
    return ty.ArrayType(_struct(("VALUE", _input(args)), ("COUNT", INTEGER)))


def _hyper_log_log(_: Sequence[ty.SqlType | None], __: ty.SqlType) -> ty.SqlType:
    """COUNT_DISTINCT: the registers of its HyperLogLog, ``ARRAY<INTEGER>``."""
    return ty.ArrayType(INTEGER)


def _same(param: ty.SqlType | Family) -> Signature:
    return sig(param, returns=param if isinstance(param, ty.SqlType) else first_argument)


def _typed(result: exp.Expr, call: Call) -> exp.Expr:
    return sql.cast(result, call.returns) if call.returns is not None else result


def _count(call: Call) -> exp.Expr:
    return sql.fn("count", *(call.args or [exp.Star()]))


def _sum(call: Call) -> exp.Expr:
    """SUM, of its input's type; a DECIMAL sum its precision cannot hold fails the query, as
    ksqlDB's DecimalSumKudaf throws "Numeric field overflow" (Spark's cast, ANSI off, would
    give NULL)."""
    total = _typed(sql.fn("coalesce", sql.fn("sum", call.args[0]), sql.lit(0)), call)
    if not isinstance(call.returns, ty.DecimalType):
        return total
    return sql.fn("coalesce", total, sql.fn("raise_error", sql.lit("Numeric field overflow")))


def _field(row: str, name: str) -> exp.Expr:
    return exp.Dot(this=sql.var(row), expression=exp.to_identifier(name))


def _compare(left: exp.Expr, right: exp.Expr, descending: bool = False) -> list[
        tuple[exp.Expr, exp.Expr]]:
    before, after = (sql.lit(1), sql.lit(-1)) if descending else (sql.lit(-1), sql.lit(1))
    return [(sql.lt(left, right), before), (sql.lt(right, left), after)]


def _by_arrival(entries: exp.Expr) -> exp.Expr:
    """``entries`` (structs with the source offset in ``__o``) in the order they arrived."""
    order = _compare(_field("__l", "__o"), _field("__r", "__o"))
    return sql.fn("array_sort", entries, sql.lam(sql.case(*order, otherwise=sql.lit(0)),
                                                 "__l", "__r"))


def _arrived(call: Call, value: exp.Expr, *, skip_nulls: bool, **more: exp.Expr) -> exp.Expr:
    """The values of the group (NULLs too unless ``skip_nulls``) as structs ``__v`` (and the
    ``more`` fields), in the order they arrived: ksqlDB aggregates record by record."""
    fields: list[exp.Expr] = [sql.lit("__v"), value]
    for name, expression in more.items():
        fields += [sql.lit(name), expression]
    if call.row_offset is not None:
        fields += [sql.lit("__o"), call.row_offset.copy()]
    entry = sql.fn("named_struct", *fields)
    collected = sql.fn("collect_list", sql.if_(sql.is_null(value.copy()), sql.null(), entry)
                       if skip_nulls else entry)
    return _by_arrival(collected) if call.row_offset is not None else collected


def _values(entries: exp.Expr) -> exp.Expr:
    return sql.fn("transform", entries, sql.lam(_field("__e", "__v"), "__e"))


def _limited(call: Call, values: exp.Expr, setting: str) -> exp.Expr:
    """The first values only, when ``setting`` (a configuration) limits them (a negative
    limit is none, as in ksqlDB)."""
    limit = call.config.get(setting)
    try:
        count = int(str(limit)) if limit is not None else -1
    except ValueError as error:
        raise UntranslatableError(f"{setting} must be a number") from error
    return values if count < 0 else sql.fn("slice", values, sql.lit(1), sql.lit(count))


def _collect_list(call: Call) -> exp.Expr:
    """ksqlDB keeps NULLs and the order of arrival (Spark's collect_list drops NULLs)."""
    values = _values(_arrived(call, call.args[0], skip_nulls=False))
    return _limited(call, values, "ksql.functions.collect_list.limit")


def _collect_set(call: Call) -> exp.Expr:
    """The distinct values (NULL included) in the order they first arrived."""
    values = distinct(_values(_arrived(call, call.args[0], skip_nulls=False)), call.type(0))
    return _limited(call, values, "ksql.functions.collect_set.limit")


def _by_offset(function: str) -> Translation:
    def translate(call: Call) -> exp.Expr:
        value, *options = call.args
        if call.row_offset is None:
            raise UntranslatableError("*_BY_OFFSET needs the source offset")
        count: exp.Expr | None = None
        if options and isinstance(call.type(1), ty.Primitive) and call.type(1) != BOOLEAN:
            count, *options = options
        ignore_nulls = not options or not isinstance(options[0], exp.Boolean) or bool(
            options[0].this)
        if options and not isinstance(options[0], exp.Boolean):
            raise UntranslatableError("*_BY_OFFSET needs a literal TRUE or FALSE")
        if count is not None:
            return _n_by_offset(call, value, count, ignore_nulls, latest=function == "max_by")
        order = (sql.if_(sql.is_null(value), sql.null(), call.row_offset) if ignore_nulls
                 else call.row_offset)
        return sql.fn(function, value, order)
    return translate


def _n_by_offset(call: Call, value: exp.Expr, count: exp.Expr, ignore_nulls: bool, *,
                 latest: bool) -> exp.Expr:
    """The N earliest or latest values, oldest first (ksqlDB's ``earliestTN``/``latestTN``)."""
    n = literal_int(count)
    if n is None:
        raise UntranslatableError("*_BY_OFFSET needs a literal count of values")
    if n <= 0:
        raise UntranslatableError(f"{'latest' if latest else 'earliest'}N must be 1 or greater")
    entries = _arrived(call, value, skip_nulls=ignore_nulls)
    start: exp.Expr = sql.lit(1)
    if latest:
        start = sql.fn("greatest", sql.add(sql.sub(sql.fn("size", entries), sql.lit(n)),
                                           sql.lit(1)), sql.lit(1))
    return _values(sql.fn("slice", entries, start, sql.lit(n)))


def _top(collect: str) -> Translation:
    def translate(call: Call) -> exp.Expr:
        value, *others, count = call.args
        if literal_int(count) is None:
            raise UntranslatableError("TOPK needs a literal count")
        if others:
            return _typed(_top_rows(call, value, others, count), call)
        descending = sql.fn("sort_array", sql.fn(collect, value), sql.lit(False))
        return sql.fn("slice", descending, sql.lit(1), count)
    return translate


def _top_rows(call: Call, value: exp.Expr, others: list[exp.Expr], count: exp.Expr) -> exp.Expr:
    """TOPK(x, other..., k): the k rows of greatest ``x`` (NULLs skipped) as STRUCTs
    ``sort_col, col0, ...``; of equal ``x``, the earlier first (ksqlDB sorts stably)."""
    columns = {f"col{i}": other for i, other in enumerate(others)}
    entries = _arrived(call, value, skip_nulls=True, **columns)
    order = _compare(_field("__l", "__v"), _field("__r", "__v"), descending=True)
    if call.row_offset is not None:
        order += _compare(_field("__l", "__o"), _field("__r", "__o"))
    ranked = sql.fn("array_sort", entries, sql.lam(sql.case(*order, otherwise=sql.lit(0)),
                                                   "__l", "__r"))
    fields: list[exp.Expr] = [sql.lit("sort_col"), _field("__e", "__v")]
    for name in columns:
        fields += [sql.lit(name), _field("__e", name)]
    row = sql.lam(sql.fn("named_struct", *fields), "__e")
    return sql.fn("transform", sql.fn("slice", ranked, sql.lit(1), count), row)


def _top_type(args: Sequence[Argument], bindings: Bindings) -> ty.SqlType:
    """ARRAY of the sort column, or with other columns ARRAY<STRUCT<sort_col, col0, ...>>."""
    first = first_argument(args, bindings)
    if len(args) <= 2:
        return ty.ArrayType(first)
    fields = [("sort_col", first)]
    for index, other in enumerate(args[1:-1]):
        fields.append((f"col{index}", other if isinstance(other, ty.SqlType) else ty.STRING))
    return ty.ArrayType(ty.StructType(tuple(fields)))


def _sum_list(call: Call) -> exp.Expr:
    """SUM_LIST: the sum of every element of every array of the group, NULLs skipped."""
    element = call.returns or INTEGER
    zero = sql.cast(sql.lit(0), element)
    add = sql.lam(sql.add(sql.var("__s"), sql.fn("coalesce", sql.var("__x"), zero)),
                  "__s", "__x")
    return _typed(sql.fn("coalesce", sql.fn("sum", sql.fn("aggregate", call.args[0], zero, add)),
                         zero), call)


def _histogram(call: Call) -> exp.Expr:
    values = sql.fn("collect_list", call.args[0])
    same = sql.lam(sql.eq(sql.var("__y"), sql.var("__v")), "__y")
    count = sql.cast(sql.fn("size", sql.fn("filter", values, same)), BIGINT)
    entry = sql.lam(sql.fn("struct", sql.var("__v"), count), "__v")
    return sql.fn("map_from_entries", sql.fn("transform", sql.fn("array_distinct", values.copy()),
                                             entry))


def _attr(call: Call) -> exp.Expr:
    low, high = sql.fn("min", call.args[0]), sql.fn("max", call.args[0])
    return sql.if_(sql.eq(low, high), low, sql.null())


def _builtin(name: str) -> Translation:
    def translate(call: Call) -> exp.Expr:
        return _typed(sql.fn(name, *call.args), call)
    return translate


def _zero_if_none(name: str) -> Translation:
    """ksqlDB's AVG of no values is 0.0, as are its STDDEV_SAMP and STDDEV_SAMPLE of fewer than
    two."""
    def translate(call: Call) -> exp.Expr:
        return sql.fn("coalesce", _typed(sql.fn(name, *call.args), call),
                      sql.cast(sql.lit(0), DOUBLE))
    return translate


def _offset_signatures() -> tuple[Signature, ...]:
    return (sig(T, returns=T), sig(T, BOOLEAN, returns=T, init_args=1),
            sig(T, INTEGER, returns=ArrayOf(T), init_args=1),
            sig(T, INTEGER, BOOLEAN, returns=ArrayOf(T), init_args=2))


FUNCTIONS: tuple[FunctionSpec, ...] = (
    aggregate("COUNT", sig(returns=BIGINT), sig(T, returns=BIGINT), spark=_count, undoable=True),
    aggregate("COUNT_DISTINCT", sig(T, returns=BIGINT),
              spark=lambda call: sql.fn("approx_count_distinct", *call.args),
              intermediate=_hyper_log_log),
    aggregate("SUM", *(_same(t) for t in NUMBERS), spark=_sum, undoable=True),
    aggregate("sum_list", *(sig(ArrayOf(t), returns=t) for t in (INTEGER, BIGINT, DOUBLE)),
              spark=_sum_list, undoable=True),
    aggregate("AVG", *(sig(t, returns=DOUBLE) for t in NUMBERS), spark=_zero_if_none("avg"),
              undoable=True, intermediate=_sum_and_count),
    aggregate("MIN", *(_same(t) for t in ORDERED), spark=_builtin("min")),
    aggregate("MAX", *(_same(t) for t in ORDERED), spark=_builtin("max")),
    aggregate("LATEST_BY_OFFSET", *_offset_signatures(), spark=_by_offset("max_by"),
              intermediate=_by_offset_state),
    aggregate("EARLIEST_BY_OFFSET", *_offset_signatures(), spark=_by_offset("min_by"),
              intermediate=_by_offset_state),
    aggregate("COLLECT_LIST", sig(T, returns=ArrayOf(T)), spark=_collect_list, undoable=True),
    aggregate("COLLECT_SET", sig(T, returns=ArrayOf(T)), spark=_collect_set),
    aggregate("TOPK", *(sig(t, INTEGER, returns=array_of_first, init_args=1) for t in ORDERED),
              *(sig(t, ANY, INTEGER, returns=_top_type, variadic=True, repeated=1, init_args=1)
                for t in ORDERED),
              spark=_top("collect_list")),
    aggregate("TOPKDISTINCT", *(sig(t, INTEGER, returns=array_of_first, init_args=1)
                                for t in ORDERED),
              spark=_top("collect_set")),
    aggregate("HISTOGRAM", sig(ty.STRING, returns=ty.MapType(ty.STRING, BIGINT)),
              spark=_histogram, undoable=True),
    # ksqlDB's STDDEV_SAMP returns the sample *variance* (M2 / (n - 1)); STDDEV_SAMPLE its root
    aggregate("STDDEV_SAMP", *(sig(t, returns=DOUBLE) for t in NUMBERS),
              spark=_zero_if_none("var_samp"), undoable=True, intermediate=_deviation),
    aggregate("STDDEV_SAMPLE", *(sig(t, returns=DOUBLE) for t in NUMBERS),
              spark=_zero_if_none("stddev_samp"), undoable=True, intermediate=_deviation),
    aggregate("CORRELATION", *(sig(t, t, returns=DOUBLE) for t in (INTEGER, BIGINT, DOUBLE)),
              spark=_builtin("corr"), undoable=True, intermediate=_correlation),
    aggregate("ATTR", sig(T, returns=T), spark=_attr, undoable=True, intermediate=_attr_state),
)
