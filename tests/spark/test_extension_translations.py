"""ksqlDB's test UDFs (integration.conformance.ksql_test_functions, loaded as a function module) computed by
Spark: the values ksqlDB's Java classes return."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from metastore.functions import extensions
from metastore.functions.sparksql import spark_type
from metastore.testing.check import run_script
from tests.spark.test_function_translations import ROW, SOURCE, _translated, evaluate, spark

__all__ = ["spark"]

MODULE = "integration.conformance.ksql_test_functions"


@pytest.fixture(scope="module", autouse=True)
def test_functions() -> Iterator[None]:
    extensions.load([MODULE])
    yield
    extensions.unload(MODULE)


@pytest.mark.parametrize(("expression", "expected"), [
    ("TEST_UDF(N, S)", "doStuffIntString"), ("TEST_UDF(B, NULL)", "doStuffLongString"),
    ("TEST_UDF(B, B, S)", "doStuffLongLongString"), ("TEST_UDF(B, B, B, B)", "doStuffLongVarargs"),
    ("TEST_UDF(STRUCT(A := S))", "some_string"), ("TEST_UDF()", {"A": "foo"}),
    ("BAD_UDF(N)", None), ("BAD_UDF(FALSE)", 0), ("BAD_UDF(TRUE)", None),
    ("BAD_UDF(CAST(NULL AS BOOLEAN))", None),
    ("WHENCONDITION(TRUE, TRUE)", True), ("WHENCONDITION(TRUE, FALSE)", None),
    ("WHENRESULT(N, TRUE)", 7), ("TOSTRUCT(S)", {"A": "some_string"}),
])
def test_scalar(spark: Any, expression: str, expected: Any) -> None:
    [[value]] = evaluate(spark, expression)
    assert (value.asDict() if hasattr(value, "asDict") else value) == expected


def test_aggregates(spark: Any) -> None:
    _names, sql = _translated(
        "VAR_ARG(B, S, S), MID_VAR_ARG(B, S, 2, 3), MULTI_ARG(B, S, 5, '10', '200'), "
        "FOUR_ARG(B, S, S, S, 1), FIVE_ARG(B, S, S, S, N, 1, 'ab'), TEST_UDAF(N), "
        "TEST_UDAF(S, 'abc'), TEST_UDAF(D), GENERIC_VAR_ARG(N, D, B), GENERIC_VAR_ARG(N, D), "
        "OBJ_COL_ARG(N, S, D)", grouped=True)
    source = run_script(SOURCE)[1].sources["S"]
    schema = ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in source.columns)
    rows = [ROW, {**ROW, "S": None, "B": None, "ROWOFFSET_": 1}]
    spark.createDataFrame(rows, schema).createOrReplaceTempView("S")
    [row] = spark.sql(f"SELECT {', '.join(sql)} FROM S GROUP BY ID").collect()
    assert list(row) == [-7 + 22, -7 + 11 + 5, 5 + 5 + -7 + 11, 1 + -7 + 33,
                         1 + 2 + -7 + 33 + 14, 14, 3 + 11, -3.0, [7], [7, 7], [7]]
