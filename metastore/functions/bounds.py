"""What one function call may produce: the calls that can make a value of any size from a small
input (GENERATE_SERIES, LPAD, RPAD) are bounded by :data:`~metastore.core.limits.MAX_SERIES_ELEMENTS`
and :data:`~metastore.core.limits.MAX_PADDED_CHARS`, checked on each record before Spark builds the
value.

Past its bound a call is NULL in a persistent query, as ksqlDB makes a value its function could
not compute (the record is still written), and fails a pull query with the reason: a user
asking for one answer learns why there is none. The query's configuration says which
(:data:`ON_EXCEEDED`).
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from metastore.functions import sparksql as sql
from metastore.functions.registry import Call, Translation
from metastore.sql import types as ty

ON_EXCEEDED = "metastore.functions.bounds.on.exceeded"
"""The configuration key that says what a call past its bound is: ``"error"`` (pull queries) or
NULL (persistent and push queries, the default)."""
FAIL = "error"

_WHOLE = "DECIMAL(21,0)"
"""A type that holds the difference of any two BIGINTs."""


def fails(config: Mapping[str, object]) -> bool:
    return config.get(ON_EXCEEDED) == FAIL


def bounded(call: Call, size: exp.Expr, limit: int, unit: str, value: exp.Expr) -> exp.Expr:
    """``value``, unless ``size`` is over ``limit``: then NULL, or the query fails."""
    if fails(call.config):
        message = sql.fn("concat", sql.lit(f"{call.name.upper()} would produce "),
                         sql.cast(size, "STRING"),
                         sql.lit(f" {unit}; one value may hold at most {limit}"))
        exceeded = sql.fn("raise_error", message)
    else:
        exceeded = sql.null()
    return sql.if_(exp.GT(this=size, expression=sql.lit(limit)), exceeded, value)


def series(spark_function: str, limit: int) -> Translation:
    """GENERATE_SERIES(start, end[, step]): ``|end - start| / |step| + 1`` elements."""
    def translate(call: Call) -> exp.Expr:
        start, end, *step = call.args
        span = sql.fn("abs", sql.sub(sql.cast(end, _WHOLE), sql.cast(start, _WHOLE)))
        if step:
            span = sql.fn("try_divide", span, sql.fn("abs", sql.cast(step[0], _WHOLE)))
        size = sql.add(sql.fn("floor", span), sql.lit(1))
        return bounded(call, size, limit, "elements", sql.fn(spark_function, *call.args))
    return translate


def padded(translation: Translation, limit: int) -> Translation:
    """LPAD/RPAD(text, length, padding): ``length`` characters."""
    def translate(call: Call) -> exp.Expr:
        length = call.args[1]
        unit = "bytes" if call.returns == ty.BYTES else "characters"
        return bounded(call, length, limit, unit, translation(call))
    return translate


__all__ = ["FAIL", "ON_EXCEEDED", "bounded", "fails", "padded", "series"]
