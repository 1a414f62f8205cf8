"""The function registry: declarations, resolution with ksqlDB's implicit casts, return types,
ksqlDB's error messages, and the types the analysis derives through it."""

from __future__ import annotations

import pytest

from metastore.functions import library as functions
from metastore.functions.datetime import partial_timestamp_millis
from metastore.functions.registry import (
    FunctionError,
    Kind,
    LambdaArgument,
    UnitArgument,
    UnknownFunctionError,
)
from metastore.sql import types as ty
from metastore.testing.check import run_script

BASE = ("CREATE STREAM S (ID INT KEY, S STRING, N INT, B BIGINT, D DOUBLE, DE DECIMAL(4, 2), "
        "A ARRAY<INT>, M MAP<STRING, BIGINT>, T TIMESTAMP) "
        "WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');\n")


def schema_of(select_list: str) -> str:
    results, image = run_script(BASE + f"CREATE STREAM X AS SELECT ID, {select_list} FROM S;",
                                runtime_check=False)
    assert results[-1].ok, results[-1].message
    source = image.sources["X"]
    return ", ".join(c.type.sql() for c in source.value_columns)


def error_of(select_list: str) -> str:
    results, _ = run_script(BASE + f"CREATE STREAM X AS SELECT ID, {select_list} FROM S;",
                            runtime_check=False)
    assert not results[-1].ok
    return results[-1].message


def test_every_name_is_declared_once_with_its_kind() -> None:
    assert {"COUNT", "SUM", "TOPK", "LATEST_BY_OFFSET", "HISTOGRAM"} <= functions.names(
        Kind.AGGREGATE)
    assert functions.names(Kind.TABLE) == {"EXPLODE", "CUBE_EXPLODE"}
    assert functions.declared("ucase") is functions.declared("UPPER")
    with pytest.raises(UnknownFunctionError, match="Can't find any functions with the name 'NOPE'"):
        functions.declared("NOPE")


@pytest.mark.parametrize(("name", "args", "returns"), [
    ("ROUND", [ty.DOUBLE], ty.BIGINT),
    ("ROUND", [ty.DOUBLE, ty.INTEGER], ty.DOUBLE),
    ("ROUND", [ty.DecimalType(5, 2)], ty.DecimalType(3, 0)),
    ("ROUND", [ty.DecimalType(5, 2), ty.INTEGER], ty.DecimalType(5, 2)),
    ("ABS", [ty.INTEGER], ty.INTEGER),
    ("SQRT", [ty.INTEGER], ty.DOUBLE),
    ("GREATEST", [ty.BIGINT, ty.BIGINT, None], ty.BIGINT),
    ("GREATEST", [ty.DecimalType(9, 2), ty.DecimalType(7, 6)], ty.DecimalType(13, 6)),
    ("SUBSTRING", [ty.STRING, ty.INTEGER], ty.STRING),
    ("SUBSTRING", [ty.BYTES, ty.INTEGER, ty.INTEGER], ty.BYTES),
    ("COALESCE", [None, ty.INTEGER, ty.BIGINT], ty.BIGINT),
    ("LATEST_BY_OFFSET", [ty.STRING, ty.INTEGER], ty.ArrayType(ty.STRING)),
    ("SUM", [ty.DecimalType(4, 2)], ty.DecimalType(4, 2)),
    ("TIMESTAMPADD", [UnitArgument("SECONDS"), ty.INTEGER, ty.TIMESTAMP], ty.TIMESTAMP),
    ("TRANSFORM", [ty.ArrayType(ty.INTEGER), LambdaArgument(1, lambda t: ty.StructType(
        (("X", t[0]),)))], ty.ArrayType(ty.StructType((("X", ty.INTEGER),)))),
    ("REDUCE", [ty.MapType(ty.STRING, ty.BIGINT), ty.INTEGER,
                LambdaArgument(3, lambda t: t[2])], ty.BIGINT),
    ("EXPLODE", [ty.ArrayType(ty.DATE)], ty.DATE),
    ("TOPK", [ty.INTEGER, ty.INTEGER], ty.ArrayType(ty.INTEGER)),
    ("TOPK", [ty.BIGINT, ty.STRING, ty.DOUBLE, ty.INTEGER], ty.ArrayType(ty.StructType(
        (("sort_col", ty.BIGINT), ("col0", ty.STRING), ("col1", ty.DOUBLE))))),
    ("EARLIEST_BY_OFFSET", [ty.INTEGER, ty.INTEGER, ty.BOOLEAN], ty.ArrayType(ty.INTEGER)),
    ("SUM_LIST", [ty.ArrayType(ty.BIGINT)], ty.BIGINT),
    ("INT_FROM_BYTES", [ty.BYTES, ty.STRING], ty.INTEGER),
])
def test_calls_resolve_with_ksqldb_implicit_casts(name: str, args: list[functions.Argument],
                                                  returns: ty.SqlType) -> None:
    assert functions.resolve_call(name, args).returns == returns


def test_a_variadic_parameter_may_sit_before_the_last() -> None:
    with pytest.raises(FunctionError, match=r"TOPK\(INTEGER, ANY\.\.\., INTEGER\)"):
        functions.resolve_call("TOPK", [ty.INTEGER, ty.STRING, ty.STRING])


def test_user_lists_take_ksqldb_common_type() -> None:
    # ARRAY[...] and MAP(...) keys and values coerce as ksqlDB's CoercionUtil does
    assert schema_of("ARRAY[NULL, 10, '2e1', N, B] AS L") == "ARRAY<DECIMAL(19, 0)>"
    assert schema_of("ARRAY[STRUCT(X := N, Y := B), STRUCT(Y := N, Z := B)] AS L") == (
        "ARRAY<STRUCT<Y BIGINT, Z BIGINT, X INTEGER>>")
    assert schema_of("MAP(S := TRUE, 'k' := 'true', 10 := 'no') AS M") == "MAP<STRING, BOOLEAN>"
    assert schema_of("MAP(S := N, NULL := N) AS M") == "MAP<STRING, INTEGER>"
    assert "JSON only supports MAP types with STRING keys" in error_of("MAP(N := D) AS M")
    assert 'invalid input syntax for type INTEGER: "x"' in error_of("ARRAY[1, 'x'] AS L")
    assert "Array constructor cannot be empty" in error_of("ARRAY[] AS L")
    assert "Cannot construct an array with all NULL elements" in error_of("ARRAY[NULL] AS L")
    assert "Map constructor cannot be empty" in error_of("MAP() AS M")
    assert "Cannot construct a map with all NULL keys" in error_of("MAP(NULL := N) AS M")


def test_strings_parse_implicitly_as_temporal_arguments() -> None:
    # ksqlDB's SqlBaseType.canImplicitlyCast: STRING to DATE, TIME, TIMESTAMP and BYTES
    assert functions.resolve_call("GREATEST", [ty.DATE, None, ty.STRING]).returns == ty.DATE
    assert functions.resolve_call("LEAST", [ty.TIME, ty.STRING]).returns == ty.TIME
    assert schema_of("GREATEST(T, NULL, '2022-06-14') AS G, FORMAT_DATE('2022-06-14', 'y') AS F"
                     ) == "TIMESTAMP, STRING"
    with pytest.raises(FunctionError):  # a STRING is no number
        functions.resolve_call("LEAST", [ty.INTEGER, ty.STRING])


def test_calls_several_signatures_accept_alike_are_ambiguous() -> None:
    # ksqlDB's UdfIndex: of the signatures accepting a call, the non-variadic, longest, least
    # generic one wins; a tie is refused, with or without implicit casts
    for args in ([ty.INTEGER, ty.BIGINT], [None, None]):
        with pytest.raises(FunctionError, match="'greatest' cannot be resolved due to ambiguous "
                                                "method parameters"):
            functions.resolve_call("GREATEST", args)
    assert functions.resolve_call("GREATEST", [ty.INTEGER, None]).returns == ty.INTEGER
    assert functions.resolve_call("ROUND", [ty.DOUBLE, None]).returns == ty.DOUBLE
    with pytest.raises(FunctionError, match="does not accept parameters"):  # no casts for UDAFs
        functions.resolve_call("SUM_LIST", [ty.ArrayType(ty.STRING)])


def test_partial_timestamps_read_as_ksqldb_reads_them() -> None:
    assert partial_timestamp_millis("2020-02-10T08:31:44.001+0000") == 1581323504001
    assert partial_timestamp_millis("2018") == partial_timestamp_millis("2018-01-01T00") == (
        1514764800000)
    assert partial_timestamp_millis("2020-02-10T08:31:44.001-05:00") == 1581341504001
    assert partial_timestamp_millis("2020-02-10T08:31Z") == 1581323460000
    with pytest.raises(ValueError, match="Failed to parse timestamp 'x'"):
        partial_timestamp_millis("x")


def test_string_literals_compared_with_rowtime_are_timestamps() -> None:
    results, _ = run_script(BASE + "CREATE STREAM X AS SELECT ID, N FROM S WHERE ROWTIME BETWEEN "
                                   "'2018-01-01' AND '2018-01-02T10' AND '2019' > ROWTIME;",
                            runtime_check=False)
    assert results[-1].ok, results[-1].message
    results, _ = run_script(BASE + "CREATE STREAM X AS SELECT ID, N FROM S WHERE ROWTIME > 'x';",
                            runtime_check=False)
    assert "Failed to parse timestamp 'x'" in results[-1].message


def test_a_call_no_signature_accepts_is_refused_in_ksqldb_words() -> None:
    with pytest.raises(FunctionError) as error:
        functions.resolve_call("DATESUB", [ty.DATE, ty.INTEGER, ty.DATE])
    assert str(error.value).startswith(
        "Function 'datesub' does not accept parameters (DATE, INTEGER, DATE).\n"
        "Valid alternatives are:\nDATESUB(INTERVALUNIT, INTEGER, DATE)")
    with pytest.raises(FunctionError, match=r"Function 'greatest' does not accept parameters \(\)"):
        functions.resolve_call("GREATEST", [])
    with pytest.raises(FunctionError, match=r"'least' does not accept parameters \(STRING, INTEGER\)"):
        functions.resolve_call("LEAST", [ty.STRING, ty.INTEGER])


def test_the_analysis_types_calls_through_the_registry() -> None:
    assert schema_of("UCASE(S) AS U, LEN(S) AS L, ROUND(D) AS R, ROUND(DE, 1) AS R1, "
                     "N / 2 AS H, A[1] AS E, M['x'] AS V") == (
        "STRING, INTEGER, BIGINT, DECIMAL(4, 2), INTEGER, INTEGER, BIGINT")
    assert schema_of("TRANSFORM(A, x => CAST(x AS STRING)) AS T, FILTER(M, (k, v) => v > 1) AS F, "
                     "REDUCE(A, B, (acc, x) => acc + x) AS R") == (
        "ARRAY<STRING>, MAP<STRING, BIGINT>, BIGINT")
    assert schema_of("TIMESTAMPADD(SECONDS, 5, T) AS T2, DATEADD(DAYS, 1, FROM_DAYS(N)) AS D2") == (
        "TIMESTAMP, DATE")
    assert schema_of("MAP('a' := N) AS M2, STRUCT(X := N, Y := S) AS ST") == (
        "MAP<STRING, INTEGER>, STRUCT<X INTEGER, Y STRING>")


def test_the_analysis_reports_ksqldb_messages() -> None:
    assert "Can't find any functions with the name 'WONT_FIND_ME'" in error_of("WONT_FIND_ME(S)")
    assert "Function 'substring' does not accept parameters (STRING, STRING)" in error_of(
        "SUBSTRING(S, S)")


def test_lambdas_parse_with_ksqldb_arrows() -> None:
    assert schema_of("TRANSFORM(M, (k, v) => UCASE(k), (k, v) => v + 1) AS T") == (
        "MAP<STRING, BIGINT>")


def test_the_runtime_check_refuses_only_what_has_no_translation() -> None:
    results, _ = run_script(BASE + "CREATE STREAM X AS SELECT ID, MASK(S) AS M, "
                                   "TRANSFORM(A, x => x * 2) AS T FROM S;")
    assert results[-1].ok, results[-1].message
    results, _ = run_script(BASE + "CREATE STREAM Y AS SELECT ID, TO_BYTES(S, S) AS J FROM S;")
    assert "TO_BYTES needs a literal encoding" in results[-1].message
    results, _ = run_script(BASE + "CREATE STREAM Z AS SELECT ID, EXPLODE(A) AS E FROM S;")
    assert results[-1].ok, results[-1].message  # table functions run since 6016f00
