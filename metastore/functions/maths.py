"""Numeric functions: ABS, ROUND, TRUNC, CEIL, FLOOR, LN, LOG, POWER, GREATEST, LEAST, ...

ksqlDB computes them with ``java.lang.Math`` and ``BigDecimal``: ROUND rounds halves towards
positive infinity (``Math.round``; a DOUBLE with no digits becomes a BIGINT), TRUNC drops digits
towards zero, and LN/LOG of zero or a negative number are -Infinity and NaN where Spark says
NULL; the translations below keep those meanings.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from metastore.core.limits import MAX_SERIES_ELEMENTS
from metastore.functions import bounds
from metastore.functions import sparksql as sql
from metastore.functions.registry import (
    ANY_DECIMAL,
    Argument,
    Bindings,
    Call,
    Family,
    FunctionSpec,
    Signature,
    Translation,
    as_decimal,
    first_argument,
    literal_int,
    overloads,
    scalar,
    sig,
    wider,
)
from metastore.sql import types as ty

INTEGER, BIGINT, DOUBLE = ty.INTEGER, ty.BIGINT, ty.DOUBLE
WHOLE_AND_DOUBLE: tuple[ty.SqlType, ...] = (INTEGER, BIGINT, DOUBLE)
NUMBERS: tuple[ty.SqlType | Family, ...] = (INTEGER, BIGINT, DOUBLE, ANY_DECIMAL)
COMPARABLE: tuple[ty.SqlType | Family, ...] = (
    INTEGER, BIGINT, DOUBLE, ANY_DECIMAL, ty.STRING, ty.BYTES, ty.DATE, ty.TIME, ty.TIMESTAMP)


def _same_type(param: ty.SqlType | Family) -> Signature:
    return sig(param, returns=first_argument if param == ANY_DECIMAL else param)


def _decimal_integral(args: Sequence[Argument], _: Bindings) -> ty.SqlType:
    first = args[0]
    decimal = as_decimal(first) if isinstance(first, ty.SqlType) else ty.DecimalType(10, 0)
    return ty.DecimalType(max(decimal.precision - decimal.scale, 1), 0)


def _unary_double(name: str, spark: Translation) -> FunctionSpec:
    return scalar(name, *(sig(t, returns=DOUBLE) for t in WHOLE_AND_DOUBLE), spark=spark)


def _builtin(name: str) -> Translation:
    def translate(call: Call) -> exp.Expr:
        return sql.fn(name, *call.args)
    return translate


def _double(text: str) -> exp.Expr:
    return sql.cast(sql.lit(text), DOUBLE)


def _java_log(value: exp.Expr) -> exp.Expr:
    """``Math.log``: NaN below zero, -Infinity at zero (Spark's ln says NULL for both)."""
    return sql.case((sql.lt(value, sql.lit(0)), _double("NaN")),
                    (sql.eq(value, sql.lit(0)), _double("-Infinity")),
                    otherwise=sql.fn("ln", value))


def _log(call: Call) -> exp.Expr:
    if len(call.args) == 1:
        return _java_log(call.args[0])
    base, value = call.args
    # ksqlDB: NaN for a base <= 0 or 1 (Spark would divide by log(1) = 0 into NULL)
    invalid = exp.Or(this=exp.LTE(this=base, expression=sql.lit(0)),
                     expression=sql.eq(base.copy(), sql.lit(1)))
    nan = sql.cast(sql.lit("NaN"), DOUBLE)
    result = sql.if_(invalid, nan, sql.div(_java_log(value), _java_log(base.copy())))
    return sql.if_(sql.any_null(base.copy(), value.copy()), sql.cast(sql.null(), DOUBLE), result)


def _keep_type(spark_function: str) -> Translation:
    """CEIL/FLOOR: Spark answers BIGINT or DECIMAL(p, 0); ksqlDB keeps the argument's type."""

    def translate(call: Call) -> exp.Expr:
        result = sql.fn(spark_function, call.args[0])
        return sql.cast(result, call.returns) if call.returns is not None else result
    return translate


def _half_of_last_digit(places: int) -> exp.Expr:
    return exp.Literal.number("0." + "0" * places + "5" if places >= 0 else 5 * 10 ** (-places - 1))


def _round(call: Call) -> exp.Expr:
    value = call.args[0]
    argument = call.type(0)
    if len(call.args) == 1:
        if argument in (INTEGER, BIGINT):
            return sql.cast(value, BIGINT)
        if argument == DOUBLE or argument is None:
            return sql.cast(sql.fn("floor", sql.add(value, exp.Literal.number("0.5"))), BIGINT)
        return sql.cast(sql.fn("floor", sql.add(value, exp.Literal.number("0.5"))), call.returns
                        or DOUBLE)
    places = call.args[1]
    fixed = literal_int(places)
    half = (_half_of_last_digit(fixed) if fixed is not None
            else sql.div(sql.fn("power", sql.lit(10), exp.Neg(this=places)), sql.lit(2)))
    if isinstance(argument, ty.DecimalType):
        return sql.cast(sql.fn("floor", sql.add(value, half), places), argument)
    exact = sql.cast(value, ty.DecimalType(38, 18))
    rounded = sql.cast(sql.fn("floor", sql.add(exact, half), places), DOUBLE)
    return sql.if_(sql.any_null(value, places), sql.null(), sql.fn("coalesce", rounded, value))


def _towards_zero(exact: exp.Expr, places: exp.Expr) -> exp.Expr:
    """A DECIMAL with the digits after ``places`` dropped (``RoundingMode.DOWN``)."""
    return sql.if_(sql.lt(exact, sql.lit(0)), sql.fn("ceil", exact, places),
                   sql.fn("floor", exact, places))


def _trunc(call: Call) -> exp.Expr:
    """TRUNC drops digits towards zero; a DECIMAL keeps its type with places (ksqlDB keeps the
    scale), and without them becomes DECIMAL(p - s, 0). Spark's CAST of a DECIMAL to fewer
    digits rounds half up, so the digits are dropped first."""
    value = call.args[0]
    argument = call.type(0)
    if len(call.args) == 1:
        if isinstance(argument, ty.DecimalType):
            return sql.cast(_towards_zero(value, sql.lit(0)), call.returns or argument)
        return sql.cast(value, BIGINT)
    places = call.args[1]
    decimal = argument if isinstance(argument, ty.DecimalType) else ty.DecimalType(38, 18)
    towards_zero = _towards_zero(sql.cast(value, decimal), places)
    if isinstance(argument, ty.DecimalType):
        return sql.cast(towards_zero, argument)
    return sql.fn("coalesce", sql.cast(towards_zero, DOUBLE), value)


def _sign(call: Call) -> exp.Expr:
    return sql.cast(sql.fn("signum", call.args[0]), INTEGER)


EARTH_RADIUS = {"km": 6371, "kilometer": 6371, "kilometers": 6371, "kilometre": 6371,
                "kilometres": 6371, "mi": 3959, "mile": 3959, "miles": 3959}
"""GEO_DISTANCE's units (case-insensitive, trimmed) and the earth's radius in each."""


def _geo_distance(call: Call) -> exp.Expr:
    """ksqlDB's haversine great-circle distance, in its operation order: NULL for a latitude
    outside [-90, 90], a longitude outside [-180, 180] or unknown units (where ksqlDB's function
    throws); no units, or blank ones, are kilometres."""
    lat1, lon1, lat2, lon2 = (sql.cast(arg, DOUBLE) for arg in call.args[:4])

    def haversin(degrees: exp.Expr) -> exp.Expr:
        half = sql.div(sql.fn("radians", degrees), sql.lit(2))
        return sql.fn("power", sql.fn("sin", half), sql.lit(2))

    a = sql.add(haversin(sql.sub(lat2.copy(), lat1.copy())), sql.mul(sql.mul(
        haversin(sql.sub(lon2.copy(), lon1.copy())), sql.fn("cos", sql.fn("radians", lat1.copy()))),
        sql.fn("cos", sql.fn("radians", lat2.copy()))))
    radius: exp.Expr = sql.lit(EARTH_RADIUS["km"])
    if len(call.args) > 4:
        unit = sql.fn("lower", sql.fn("trim", call.args[4]))
        radius = sql.case(
            (exp.Or(this=exp.Is(this=unit.copy(), expression=exp.Null()),
                    expression=sql.eq(unit.copy(), sql.lit(""))), radius),
            *((sql.eq(unit.copy(), sql.lit(name)), sql.lit(km)) for name, km in
              EARTH_RADIUS.items()))
    distance = sql.mul(sql.mul(sql.lit(2), sql.fn("asin", sql.fn("sqrt", a))), radius)
    in_range = [exp.Between(this=value.copy(), low=sql.lit(-bound), high=sql.lit(bound))
                for value, bound in ((lat1, 90), (lat2, 90), (lon1, 180), (lon2, 180))]
    valid: exp.Expr = in_range[0]
    for condition in in_range[1:]:
        valid = exp.And(this=valid, expression=condition)
    return sql.case((valid, distance), otherwise=sql.null())


def _series(element: ty.SqlType) -> tuple[Signature, ...]:
    array = ty.ArrayType(element)
    return (sig(element, element, returns=array), sig(element, element, INTEGER, returns=array))


def _first_of_generic(args: Sequence[Argument], _: Bindings) -> ty.SqlType:
    """GREATEST/LEAST: the type every argument widens to."""
    result: ty.SqlType | None = None
    for arg in args:
        if isinstance(arg, ty.SqlType):
            result = arg if result is None else (wider(result, arg) or result)
    return result or ty.STRING


FUNCTIONS: tuple[FunctionSpec, ...] = (
    scalar("Abs", *overloads(NUMBERS, _same_type), spark=_builtin("abs")),
    scalar(("Ceil", "CEILING"), *overloads(NUMBERS, _same_type), spark=_keep_type("ceil")),
    scalar("Floor", *overloads(NUMBERS, _same_type), spark=_keep_type("floor")),
    scalar("Round", sig(BIGINT, returns=BIGINT), sig(INTEGER, returns=BIGINT),
           sig(DOUBLE, returns=BIGINT), sig(DOUBLE, INTEGER, returns=DOUBLE),
           sig(ANY_DECIMAL, returns=_decimal_integral),
           sig(ANY_DECIMAL, INTEGER, returns=first_argument), spark=_round),
    scalar("trunc", sig(BIGINT, returns=BIGINT), sig(INTEGER, returns=BIGINT),
           sig(DOUBLE, returns=BIGINT), sig(DOUBLE, INTEGER, returns=DOUBLE),
           sig(ANY_DECIMAL, returns=_decimal_integral),
           sig(ANY_DECIMAL, INTEGER, returns=first_argument), spark=_trunc),
    *(_unary_double(name, _builtin(spark)) for name, spark in (
        ("acos", "acos"), ("asin", "asin"), ("atan", "atan"), ("cbrt", "cbrt"), ("cos", "cos"),
        ("cosh", "cosh"), ("cot", "cot"), ("degrees", "degrees"), ("exp", "exp"),
        ("radians", "radians"), ("sin", "sin"), ("sinh", "sinh"), ("sqrt", "sqrt"),
        ("tan", "tan"), ("tanh", "tanh"))),
    _unary_double("ln", lambda call: _java_log(call.args[0])),
    scalar("log", *(sig(t, returns=DOUBLE) for t in WHOLE_AND_DOUBLE),
           *(sig(t, t, returns=DOUBLE) for t in WHOLE_AND_DOUBLE), spark=_log),
    scalar("atan2", *(sig(t, t, returns=DOUBLE) for t in WHOLE_AND_DOUBLE),
           spark=_builtin("atan2")),
    scalar(("power", "POW"), *(sig(t, t, returns=DOUBLE) for t in WHOLE_AND_DOUBLE),
           spark=_builtin("power")),
    scalar("sign", *(sig(t, returns=INTEGER) for t in WHOLE_AND_DOUBLE), spark=_sign),
    scalar("pi", sig(returns=DOUBLE), spark=_builtin("pi")),
    scalar("random", sig(returns=DOUBLE), spark=_builtin("rand")),
    scalar("greatest", *overloads(COMPARABLE, lambda t: sig(t, t, returns=_first_of_generic,
                                                            variadic=True)),
           spark=_builtin("greatest")),
    scalar("least", *overloads(COMPARABLE, lambda t: sig(t, t, returns=_first_of_generic,
                                                         variadic=True)),
           spark=_builtin("least")),
    scalar("GENERATE_SERIES", *_series(INTEGER), *_series(BIGINT),
           spark=bounds.series("sequence", MAX_SERIES_ELEMENTS)),
    scalar("geo_distance", sig(DOUBLE, DOUBLE, DOUBLE, DOUBLE, returns=DOUBLE),
           sig(DOUBLE, DOUBLE, DOUBLE, DOUBLE, ty.STRING, returns=DOUBLE),
           spark=_geo_distance),
)
