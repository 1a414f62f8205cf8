"""Refusals that must be typed, and bounded in work: oversized numeric literals, WHERE clauses
that expand to too many alternatives, and ``POST /query`` checking a SELECT as the validator."""

from __future__ import annotations

from typing import cast

import pytest
from pyspark.sql import SparkSession

from metastore.catalog.exceptions import QueryError
from metastore.engine import overrides
from metastore.engine.pull_filters import MAX_DISJUNCTS
from metastore.engine.validation import Validator
from metastore.spark.query import run_pull_query
from metastore.sql.exceptions import ParseError, PrepareError
from metastore.sql.parser import parse
from metastore.testing.check import AssumedTopics, run_script

HUGE = "9" * 5000
BASE = ("CREATE TABLE T (K STRING PRIMARY KEY, V INT) WITH (KAFKA_TOPIC='t', "
        "VALUE_FORMAT='JSON', PARTITIONS=1);\n"
        "CREATE TABLE M AS SELECT * FROM T;\n")


@pytest.mark.parametrize("statement", [
    f"SELECT * FROM M WHERE K = '1' AND V = {HUGE};",
    f"INSERT INTO S (A) VALUES ({HUGE});",
    f"INSERT INTO S (A) VALUES (-{HUGE});",
])
def test_a_numeric_literal_of_thousands_of_digits_is_refused_typed(statement: str) -> None:
    results, _ = run_script(BASE + statement)
    assert not results[-1].ok
    assert "Invalid numeric literal: " in results[-1].message


def test_a_property_value_of_thousands_of_digits_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="Invalid numeric literal"):
        parse(f"CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', "
              f"PARTITIONS={HUGE});")


def test_a_where_clause_of_many_alternatives_is_refused_before_expanding() -> None:
    pairs = " AND ".join(f"(K = 'a{i}' OR K = 'b{i}')" for i in range(16))  # 2 ** 16
    results, _ = run_script(BASE + f"SELECT * FROM M WHERE {pairs};")
    assert not results[-1].ok
    assert results[-1].message == (f"The WHERE clause expands to more than {MAX_DISJUNCTS} "
                                   "alternatives.")


class _NoSpark:
    def sql(self, text: str) -> object:
        raise AssertionError(f"a refused pull query reached Spark: {text}")


def test_the_rest_pull_query_is_checked_as_the_validator_checks_a_select() -> None:
    _, image = run_script(BASE)
    spark = cast(SparkSession, _NoSpark())
    no_scans = overrides.resolve({"ksql.query.pull.table.scan.enabled": "false"})
    statement = "SELECT * FROM M WHERE V = 1;"
    [select] = parse(statement)
    with pytest.raises(QueryError) as validator_refused:
        Validator(image, AssumedTopics(), config=no_scans).validate(select)
    with pytest.raises(QueryError) as refused:
        run_pull_query(spark, statement, image, "db", no_scans)
    assert refused.value.message == validator_refused.value.message
    with pytest.raises(PrepareError, match="Invalid numeric literal"):
        run_pull_query(spark, f"SELECT * FROM M WHERE K = '1' AND V = {HUGE};", image, "db")
