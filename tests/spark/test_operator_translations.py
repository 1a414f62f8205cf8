"""ksqlDB's operators and CAST translated by metastore.functions and evaluated by Spark (batch),
against the results ksqlDB's query tests expect."""

from __future__ import annotations

import decimal
from typing import Any

import pytest

from metastore.engine.analysis import analyse
from metastore.functions import library as functions
from metastore.functions.sparksql import spark_type
from metastore.sql.parser import parse
from metastore.sql.statements import CreateAsSelect
from metastore.testing.check import run_script

SOURCE = ("CREATE STREAM S (ID INT KEY, S STRING, N INT, B BIGINT, D DOUBLE, DE DECIMAL(4, 2), "
          "A ARRAY<INT>, M MAP<STRING, INT>, M2 MAP<STRING, BIGINT>, "
          "ST STRUCT<F0 INT, `f1` INT>, BY BYTES) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');")
ROW: dict[str, Any] = {
    "ID": 1, "S": "foo", "N": 7, "B": -7, "D": -1.5, "DE": decimal.Decimal("1.25"),
    "A": [1, 2], "M": {"a": 1, "b": 2}, "M2": {"b": 2, "a": 1}, "ST": {"F0": 1, "f1": 3},
    "BY": b"a",
}
NULLS: dict[str, Any] = {"ID": 2}


@pytest.fixture
def spark(spark: Any) -> Any:
    """The shared session, with ksqlDB's non-ANSI arithmetic and casts."""
    spark.conf.set("spark.sql.ansi.enabled", "false")
    return spark


def evaluate(spark: Any, select_list: str, row: dict[str, Any] | None = None) -> list[Any]:
    results, image = run_script(SOURCE)
    assert all(r.ok for r in results)
    [statement] = parse(f"CREATE STREAM X AS SELECT ID, {select_list} FROM S;")
    assert isinstance(statement, CreateAsSelect)
    analysis = analyse(statement.query, image.sources, image.types, "X")
    names = [name for name, _ in analysis.projection][1:]
    sql = [functions.to_spark(e.copy(), functions.SparkContext()).sql(dialect="spark",
                                                                      identify=True)
           for _, e in analysis.projection[1:]]
    source = image.sources["S"]
    schema = ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in source.columns)
    spark.createDataFrame([row or ROW], schema).createOrReplaceTempView("S")
    selected = ", ".join(f"{s} AS `{n}`" for s, n in zip(sql, names, strict=True))
    return list(spark.sql(f"SELECT {selected} FROM S").collect()[0])


def test_comparisons_are_false_not_null_when_an_operand_is_null(spark: Any) -> None:
    assert evaluate(spark, "N > 1, N = 1, NOT (N > 1), N IS DISTINCT FROM 7, "
                           "N IS NOT DISTINCT FROM 7, BY > BY", NULLS) == [
        False, False, True, True, False, False]


def test_collections_compare_by_value_maps_in_any_order(spark: Any) -> None:
    assert evaluate(spark, "M = M2, M = MAP('a':=1), A = ARRAY[1, 2], ST = ST, "
                           "ST IS DISTINCT FROM ST, M <> M") == [
        True, False, True, True, False, False]


def test_in_coerces_literals_and_matches_structured_values(spark: Any) -> None:
    assert evaluate(spark, "N IN (1, '7'), S IN (10, 'foo'), N IN (NULL, 8), "
                           "M IN (MAP('a':=1, 'b':=2)), DE IN (1.250), "
                           "ST IN (ST), ST IN (STRUCT(F0:=1))") == [
        True, True, False, True, True, True, False]


def test_arithmetic_follows_java_and_ksqldb_decimals(spark: Any) -> None:
    assert evaluate(spark, "N / 2, 'a' + S, S + S, D / 0, DE / 3, DE * 2, N % 3, DE + N") == [
        3, "afoo", "foofoo", float("-inf"), None, decimal.Decimal("2.50"), 1,
        decimal.Decimal("8.25")]


def test_casts_write_java_text_forms(spark: Any) -> None:
    assert evaluate(spark, "CAST(ST AS STRING), CAST(M AS STRING), CAST(A AS STRING), "
                           "CAST(DE AS STRING), CAST(D AS STRING), "
                           "CAST(0.00000001 AS STRING)") == [
        "Struct{F0=1,f1=3}", "{a=1, b=2}", "[1, 2]", "1.25", "-1.5", "0.00000001"]


def test_casts_from_strings_and_between_structs(spark: Any) -> None:
    assert evaluate(spark, "CAST(' yes' AS BOOLEAN), CAST('no' AS BOOLEAN), "
                           "CAST('4.0' AS INT), CAST(' 12 ' AS BIGINT), "
                           "CAST(ST AS STRUCT<F0 STRING, F3 STRING>)") == [
        True, False, None, 12, ("1", None)]
