"""ksqlDB's test-only functions, as a function module (see metastore.functions.extensions).

ksqlDB's functional tests run with test UDFs on the classpath (ksqldb-engine/src/test/java/
io/confluent/ksql/function/udf|udaf) and the ``udf-example.jar`` extension (TOSTRUCT):
TEST_UDF, BAD_UDF, WHENCONDITION, WHENRESULT, TOSTRUCT, TEST_UDTF, THROWING_UDTF, TEST_UDAF,
VAR_ARG, MID_VAR_ARG, MULTI_ARG, FOUR_ARG, FIVE_ARG, GENERIC_VAR_ARG and OBJ_COL_ARG. They are
declared here with the Java's signatures (a UDAF's parameters are its column arguments, then
its factory's arguments, literal constants; a Java ``...`` is variadic wherever it stands) and,
where their behaviour is simple, a Spark translation: a UDF that throws in ksqlDB yields NULL
(ksqlDB logs the error and the expression is NULL). These belong to the conformance harnesses
only (integration.conformance, integration.conformance.ksql_suite, the records bench), which load this
module as ksqlDB's harness has the classes; no node loads it unless told to
(``--function-module integration.conformance.ksql_test_functions``).
"""

from __future__ import annotations

from sqlglot import exp

from metastore.functions import aggregates
from metastore.functions import sparksql as sql
from metastore.functions.registry import (
    ANY,
    ANY_DECIMAL,
    ArrayOf,
    Call,
    FunctionSpec,
    Kind,
    MapOf,
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

INTEGER, BIGINT, DOUBLE, BOOLEAN, STRING = ty.INTEGER, ty.BIGINT, ty.DOUBLE, ty.BOOLEAN, ty.STRING
STRUCT_A = ty.StructType((("A", STRING),))
"""``STRUCT<A VARCHAR>``, TestUdf's and ToStruct's."""
STRUCT_AB = ty.StructType((("A", INTEGER), ("B", INTEGER)))
"""``STRUCT<A INTEGER, B INTEGER>``, TestUdaf's struct aggregate."""


def _field(value: exp.Expr, name: str) -> exp.Expr:
    return exp.Dot(this=value, expression=exp.to_identifier(name))


def _struct_a(value: exp.Expr) -> exp.Expr:
    return sql.fn("named_struct", sql.lit("A"), value)


def _unless_null(result: exp.Expr, *primitives: exp.Expr) -> exp.Expr:
    """NULL when a Java primitive parameter gets NULL (the call fails, ksqlDB yields NULL)."""
    return sql.null_if_any_null(result, *primitives) if primitives else result


# -- scalar functions -----------------------------------------------------------------------------

def _test_udf(call: Call) -> exp.Expr:
    """TestUdf: each overload returns its method's name, the struct one its field A, the
    no-argument one ``STRUCT(A := 'foo')``."""
    args, count = call.args, len(call.args)
    if count == 0:
        return _struct_a(sql.lit("foo"))
    if count == 1 and isinstance(call.type(0), ty.StructType):
        return _field(args[0], "A")
    if count == 2 and call.type(1) in (STRING, None):
        name = "doStuffIntString" if call.type(0) == INTEGER else "doStuffLongString"
        return _unless_null(sql.lit(name), args[0])
    if count == 3 and call.type(2) in (STRING, None):
        return _unless_null(sql.lit("doStuffLongLongString"), args[0], args[1])
    return sql.lit("doStuffLongVarargs")


def _bad_udf(call: Call) -> exp.Expr:
    """BadUdf: ``blowUp(int)`` always throws (NULL); ``mightThrow(boolean)`` throws on TRUE and
    returns 0 on FALSE; ``returnNull(String)`` returns NULL at every other call of the instance,
    a counter Spark cannot keep."""
    kind = call.type(0)
    if kind == BOOLEAN:
        return sql.if_(exp.Not(this=exp.Paren(this=call.args[0])), sql.lit(0),
                       sql.cast(sql.null(), INTEGER))
    if kind == STRING:
        raise UntranslatableError("BAD_UDF(STRING) returns NULL at every other call of its "
                                  "instance, a per-task counter Spark cannot reproduce")
    return sql.cast(sql.null(), STRING)


def _lazy(call: Call) -> exp.Expr:
    """WhenCondition / WhenResult: the first argument, but they throw (NULL) unless the second
    is TRUE (ksqlDB's case-expression tests check CASE evaluates them lazily)."""
    typed = call.returns or BOOLEAN
    return sql.if_(sql.fn("coalesce", call.args[1], sql.lit(False)), call.args[0],
                   sql.cast(sql.null(), typed))


# -- table functions ------------------------------------------------------------------------------

_ROW_TYPES = (INTEGER, BIGINT, DOUBLE, BOOLEAN, STRING, ANY_DECIMAL, STRUCT_A)
"""TestUdtf's seven parameters (``standardParams``)."""


def _test_udtf(call: Call) -> exp.Expr:
    """TestUdtf's one-parameter overloads return a list of that value (a DECIMAL as
    DECIMAL(30, 10)); the seven-parameter ones print Java's ``String.valueOf`` and
    ``Struct.toString``, which Spark does not."""
    if len(call.args) != 1:
        raise UntranslatableError("TEST_UDTF of seven arguments formats them as Java's "
                                  "String.valueOf and Struct.toString, which Spark does not")
    value = call.args[0]
    if isinstance(call.type(0), ty.DecimalType):
        value = sql.cast(value, ty.DecimalType(30, 10))
    return sql.fn("array", value)


def _throwing_udtf(call: Call) -> exp.Expr:
    """ThrowingUdtf: ``[b]`` for FALSE; it throws for TRUE (or NULL): no rows."""
    value = call.args[0]
    return sql.if_(exp.Not(this=exp.Paren(this=value.copy())), sql.fn("array", value),
                   sql.cast(sql.null(), ty.ArrayType(BOOLEAN)))


# -- aggregates -----------------------------------------------------------------------------------

def _row_total(args: tuple[exp.Expr, ...], types: tuple[ty.SqlType | None, ...]) -> exp.Expr:
    """What the *_ARG UDAFs add per record: each number (NULL as 0) and each string's length
    (NULL as 0), as a BIGINT."""
    total: exp.Expr | None = None
    for value, kind in zip(args, types, strict=True):
        term = sql.fn("length", value) if kind == STRING else value
        term = sql.fn("coalesce", sql.cast(term, BIGINT), sql.lit(0))
        total = term if total is None else sql.add(total, term)
    return total if total is not None else sql.lit(0)


def _summing(columns: int | None, init: str) -> Translation:
    """VAR_ARG and friends: ``init`` + the sum over the records of :func:`_row_total` of the
    first ``columns`` arguments (all but the last two when None); ``init`` is ``mid`` (the two
    factory integers added, MiddleVarArgUdaf's map), ``multi`` (the factory integer plus its
    strings' lengths, MultiArgUdaf's initialize) or ``none``."""
    def translate(call: Call) -> exp.Expr:
        taken = len(call.args) if init == "none" else (
            len(call.args) - 2 if columns is None else columns)
        row = _row_total(call.args[:taken], call.types[:taken])
        result = sql.fn("coalesce", sql.fn("sum", row), sql.lit(0))
        constants = call.args[taken:]
        if init == "mid":
            result = sql.add(result, _row_total(constants, call.types[taken:]))
        elif init == "multi" and constants:
            result = sql.add(_row_total(constants, call.types[taken:]), result)
        return sql.cast(result, BIGINT)
    return translate


def _test_udaf(call: Call) -> exp.Expr:
    """TestUdaf: sums BIGINT (as BIGINT), INTEGER (as BIGINT, from
    ``ksql.functions.test_udaf.init``), DOUBLE; the lengths of strings from the initial
    string's; a ``STRUCT<A INTEGER, B INTEGER>`` field by field."""
    kind, value = call.type(0), call.args[0]
    if kind == STRING and len(call.args) == 2:
        total = sql.fn("coalesce", sql.fn("sum", sql.fn("length", value)), sql.lit(0))
        return sql.cast(sql.add(sql.fn("length", call.args[1]), total), BIGINT)
    if kind in (BIGINT, INTEGER):
        start = call.config.get("ksql.functions.test_udaf.init", 0) if kind == INTEGER else 0
        try:
            initial = int(str(start))
        except ValueError as error:
            raise UntranslatableError("ksql.functions.test_udaf.init must be a number") from error
        total = sql.fn("coalesce", sql.fn("sum", sql.cast(value, BIGINT)), sql.lit(0))
        return sql.cast(sql.add(sql.lit(initial), total), BIGINT)
    if kind == DOUBLE:
        return sql.fn("coalesce", sql.fn("sum", value), sql.cast(sql.lit(0), DOUBLE))
    if kind == STRUCT_AB:
        sums = [sql.cast(sql.fn("coalesce", sql.fn("sum", _field(value.copy(), name)),
                                sql.lit(0)), INTEGER) for name in ("A", "B")]
        return sql.fn("named_struct", sql.lit("A"), sums[0], sql.lit("B"), sums[1])
    raise UntranslatableError(f"TEST_UDAF of {kind.sql() if kind else 'NULL'} is not handled "
                              "(ksqlDB's createSumT throws for it too)")


def _first_where_all_present(call: Call) -> exp.Expr:
    """GENERIC_VAR_ARG / OBJ_COL_ARG: the first argument of each record whose arguments are all
    non-NULL, in the order the records arrived (COLLECT_LIST's bookkeeping)."""
    kept = sql.if_(sql.any_null(*(a.copy() for a in call.args)), sql.null(), call.args[0])
    return aggregates._values(aggregates._arrived(call, kept, skip_nulls=True))


FUNCTIONS: tuple[FunctionSpec, ...] = (
    scalar("test_udf",
           sig(INTEGER, STRING, returns=STRING), sig(BIGINT, STRING, returns=STRING),
           sig(BIGINT, BIGINT, STRING, returns=STRING),
           sig(BIGINT, returns=STRING, variadic=True),
           sig(STRUCT_A, returns=STRING), sig(returns=STRUCT_A),
           spark=_test_udf),
    scalar("bad_udf", sig(INTEGER, returns=STRING), sig(BOOLEAN, returns=INTEGER),
           sig(STRING, returns=STRING), spark=_bad_udf),
    scalar("WhenCondition", sig(BOOLEAN, BOOLEAN, returns=BOOLEAN), spark=_lazy),
    scalar("WhenResult", sig(INTEGER, BOOLEAN, returns=INTEGER), spark=_lazy),
    scalar("tostruct", sig(STRING, returns=STRUCT_A),
           spark=lambda call: _struct_a(call.args[0])),
    spec("test_udtf", Kind.TABLE, [
        sig(*_ROW_TYPES, returns=STRING),
        sig(*(ArrayOf(t) for t in _ROW_TYPES), returns=STRING),
        sig(*(MapOf(STRING, t) for t in _ROW_TYPES), returns=STRING),
        sig(MapOf(BIGINT, INTEGER), *(MapOf(STRING, t) for t in _ROW_TYPES[1:]), returns=STRING),
        *(sig(t, returns=t) for t in (INTEGER, BIGINT, DOUBLE, BOOLEAN, STRING, STRUCT_A)),
        sig(ANY_DECIMAL, returns=ty.DecimalType(30, 10)),
    ], _test_udtf),
    spec("throwing_udtf", Kind.TABLE, [sig(BOOLEAN, returns=BOOLEAN)], _throwing_udtf),
    spec("test_udaf", Kind.AGGREGATE, [
        sig(BIGINT, returns=BIGINT), sig(INTEGER, returns=BIGINT), sig(DOUBLE, returns=DOUBLE),
        sig(T, returns=T), sig(STRING, STRING, returns=BIGINT, init_args=1),
        sig(STRUCT_AB, returns=STRUCT_AB),
    ], _test_udaf, undoable=True),
    spec("VAR_ARG", Kind.AGGREGATE, [sig(BIGINT, STRING, returns=BIGINT, variadic=True)],
         _summing(None, "none")),
    spec("MID_VAR_ARG", Kind.AGGREGATE, [
        sig(BIGINT, STRING, INTEGER, INTEGER, returns=BIGINT, variadic=True, repeated=1,
            init_args=2)], _summing(None, "mid")),
    spec("MULTI_ARG", Kind.AGGREGATE, [
        sig(BIGINT, STRING, INTEGER, STRING, returns=BIGINT, variadic=True, init_args=2)],
         _summing(2, "multi")),
    spec("FOUR_ARG", Kind.AGGREGATE, [
        sig(BIGINT, STRING, STRING, STRING, INTEGER, STRING, returns=BIGINT, variadic=True,
            init_args=2)], _summing(4, "multi")),
    spec("FIVE_ARG", Kind.AGGREGATE, [
        sig(BIGINT, STRING, STRING, STRING, INTEGER, INTEGER, STRING, returns=BIGINT,
            variadic=True, init_args=2)], _summing(5, "multi")),
    spec("GENERIC_VAR_ARG", Kind.AGGREGATE, [
        sig(T, U, V, returns=ArrayOf(T), variadic=True)], _first_where_all_present),
    spec("OBJ_COL_ARG", Kind.AGGREGATE, [
        sig(INTEGER, ANY, returns=ArrayOf(INTEGER), variadic=True)], _first_where_all_present),
)
