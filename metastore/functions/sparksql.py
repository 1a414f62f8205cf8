"""Small builders of Spark SQL expressions (sqlglot trees) that the translations compose.

:func:`spark_type` is the one mapping of ksqlDB types to Spark's (TIME is an INT of milliseconds
of the day); :mod:`metastore.spark.types` offers it to the Spark package.
"""

from __future__ import annotations

from sqlglot import exp

from metastore.sql import types as ty

_PRIMITIVES = {
    "BOOLEAN": "BOOLEAN", "INTEGER": "INT", "BIGINT": "BIGINT", "DOUBLE": "DOUBLE",
    "STRING": "STRING", "BYTES": "BINARY", "DATE": "DATE", "TIME": "INT", "TIMESTAMP": "TIMESTAMP",
}


def spark_type(sql_type: ty.SqlType) -> str:
    if isinstance(sql_type, ty.Primitive):
        return _PRIMITIVES[sql_type.name]
    if isinstance(sql_type, ty.DecimalType):
        return f"DECIMAL({sql_type.precision},{sql_type.scale})"
    if isinstance(sql_type, ty.ArrayType):
        return f"ARRAY<{spark_type(sql_type.element)}>"
    if isinstance(sql_type, ty.MapType):
        return f"MAP<{spark_type(sql_type.key)},{spark_type(sql_type.value)}>"
    if isinstance(sql_type, ty.StructType):
        inner = ",".join(f"`{name}`:{spark_type(t)}" for name, t in sql_type.fields)
        return f"STRUCT<{inner}>"
    raise TypeError(f"no Spark type for {sql_type.sql()}")


AGGREGATES = frozenset({
    "count", "sum", "avg", "min", "max", "min_by", "max_by", "collect_list", "collect_set",
    "approx_count_distinct", "stddev_samp", "corr", "first", "last", "any_value"})
"""The Spark aggregate functions translations call (by name, as :func:`fn` makes them)."""


def is_aggregate_call(node: exp.Expr) -> bool:
    """Whether ``node`` is a call of a Spark aggregate function."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower() in AGGREGATES
    return isinstance(node, exp.AggFunc)


def fn(name: str, *args: exp.Expr) -> exp.Expr:
    """A call of the Spark built-in ``name``."""
    return exp.Anonymous(this=name, expressions=list(args))


def lit(value: str | int | float | bool) -> exp.Expr:
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, str):
        return exp.Literal.string(value)
    return exp.Literal.number(value)


def null() -> exp.Expr:
    return exp.Null()


def cast(expression: exp.Expr, to: ty.SqlType | str) -> exp.Expr:
    text = to if isinstance(to, str) else spark_type(to)
    return exp.Cast(this=expression, to=exp.DataType.build(text, dialect="spark"))


def if_(condition: exp.Expr, then: exp.Expr, otherwise: exp.Expr) -> exp.Expr:
    return exp.If(this=condition, true=then, false=otherwise)


def is_null(expression: exp.Expr) -> exp.Expr:
    return exp.Is(this=exp.Paren(this=expression), expression=exp.Null())


def any_null(*expressions: exp.Expr) -> exp.Expr:
    condition = is_null(expressions[0])
    for more in expressions[1:]:
        condition = exp.Or(this=condition, expression=is_null(more))
    return condition


def null_if_any_null(result: exp.Expr, *arguments: exp.Expr) -> exp.Expr:
    """``result``, or NULL when any of ``arguments`` is NULL."""
    return if_(any_null(*arguments), null(), result) if arguments else result


def var(name: str) -> exp.Expr:
    """A reference to a lambda variable of a translation's own lambda."""
    return exp.column(name)


def lam(body: exp.Expr, *params: str) -> exp.Expr:
    return exp.Lambda(this=body, expressions=[exp.to_identifier(p) for p in params])


def binary(kind: type[exp.Binary], left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return kind(this=exp.Paren(this=left), expression=exp.Paren(this=right))


def eq(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return binary(exp.EQ, left, right)


def lt(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return binary(exp.LT, left, right)


def add(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return binary(exp.Add, left, right)


def sub(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return binary(exp.Sub, left, right)


def mul(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return binary(exp.Mul, left, right)


def div(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return binary(exp.Div, left, right)


def case(*branches: tuple[exp.Expr, exp.Expr], otherwise: exp.Expr | None = None) -> exp.Expr:
    return exp.Case(ifs=[exp.If(this=c, true=v) for c, v in branches], default=otherwise)
