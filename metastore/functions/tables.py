"""Table functions: EXPLODE and CUBE_EXPLODE, which turn one row into several.

A table function's Spark translation is the ARRAY whose elements are the rows it makes; the
planner explodes every table function of a projection together (``arrays_zip``), so a row
yields as many rows as its longest array, the shorter ones padded with NULLs, as ksqlDB does.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from metastore.functions.registry import ArrayOf, Call, FunctionSpec, Kind, T, sig, spec


def _explode(call: Call) -> exp.Expr:
    return call.args[0]


def _cube(call: Call) -> exp.Expr:
    """Every combination of the array's elements and NULLs, in ksqlDB's order (the first
    element varies slowest, NULL before the value); a NULL element yields each combination
    once."""
    array = call.args[0].sql(dialect="spark")
    size = f"size({array})"
    combination = (f"transform({array}, (__ms_x, __ms_j) -> IF(shiftright(__ms_i, {size} - 1 - "
                   "__ms_j) & 1 = 1, __ms_x, NULL))")
    every = f"transform(sequence(0, shiftleft(1, {size}) - 1), __ms_i -> {combination})"
    return sqlglot.parse_one(f"IF({array} IS NULL, NULL, array_distinct({every}))",
                             read="spark")


FUNCTIONS: tuple[FunctionSpec, ...] = (
    spec("explode", Kind.TABLE, [sig(ArrayOf(T), returns=T)], _explode),
    spec("cube_explode", Kind.TABLE, [sig(ArrayOf(T), returns=ArrayOf(T))], _cube),
)
