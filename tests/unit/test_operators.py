"""Operators and CAST as the analysis types them: result types (DECIMAL precision and scale),
what ksqlDB refuses and its words for it."""

from __future__ import annotations

import pytest

from metastore.functions import casts, operators
from metastore.sql import types as ty
from metastore.testing.check import run_script

BASE = ("CREATE STREAM S (ID INT KEY, S STRING, N INT, B BIGINT, D DOUBLE, DE DECIMAL(4, 2), "
        "A ARRAY<INT>, M MAP<STRING, BIGINT>, T TIMESTAMP, BY BYTES) "
        "WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');\n")


def outcome(select_list: str, where: str = "") -> tuple[bool, str]:
    clause = f" WHERE {where}" if where else ""
    results, image = run_script(
        BASE + f"CREATE STREAM X AS SELECT ID, {select_list} FROM S{clause};",
        runtime_check=False)
    if not results[-1].ok:
        return False, results[-1].message
    return True, ", ".join(c.type.sql() for c in image.sources["X"].value_columns)


@pytest.mark.parametrize(("select_list", "types"), [
    ("N + B, N * D, DE + DE, DE * DE, DE / DE, DE % N", "BIGINT, DOUBLE, DECIMAL(5, 2), "
     "DECIMAL(9, 4), DECIMAL(11, 7), DECIMAL(4, 2)"),
    ("S + S, 0.8 + 0.05, N / 2", "STRING, DECIMAL(4, 2), INTEGER"),
    ("CAST(N AS STRING), CAST(A AS ARRAY<STRING>), CAST(S AS DECIMAL(5, 1))",
     "STRING, ARRAY<STRING>, DECIMAL(5, 1)"),
    ("N IN (1, '2', 3.5), S IN (true, 10), T > '2020-01-01', BY < BY, A = A",
     "BOOLEAN, BOOLEAN, BOOLEAN, BOOLEAN, BOOLEAN"),
])
def test_operator_types(select_list: str, types: str) -> None:
    assert outcome(select_list) == (True, types)


@pytest.mark.parametrize(("select_list", "where", "message"), [
    ("A < A", "", "Cannot compare A (ARRAY<INTEGER>) to A (ARRAY<INTEGER>) with LESS_THAN."),
    ("N", "N = '10'", "Error in WHERE expression: Cannot compare N (INTEGER) to '10' (STRING) "
     "with EQUAL.\nStatement: (N = '10')"),
    ("N", "N = NULL", "Comparison with NULL not supported: INTEGER = NULL\nUse 'IS NULL' or "
     "'IS NOT NULL' instead.\nStatement: (N = null)"),
    ("S + N", "", "Unsupported arithmetic types. STRING INTEGER"),
    ("CAST(S AS ARRAY<INTEGER>)", "", "Invalid Select: Cast of STRING to ARRAY<INTEGER> is not "
     "supported"),
    ("CAST(BY AS STRING)", "", "Cast of BYTES to STRING is not supported"),
    ("N", "N IN (10, 'ten')", "Invalid Predicate: invalid input syntax for type INTEGER: "
     "\"ten\"."),
    ("N", "N IN (10, true)", "Invalid Predicate: operator does not exist: INTEGER = BOOLEAN "
     "(true)"),
    ("N", "M IN (M, MAP('a' := S))", "Invalid Predicate: operator does not exist: "
     "MAP<STRING, BIGINT> = MAP<STRING, STRING> (MAP('a':=S))"),
])
def test_refusals_in_ksqldb_words(select_list: str, where: str, message: str) -> None:
    ok, found = outcome(select_list, where)
    assert not ok and message in found


def test_struct_casts_check_the_fields_both_sides_have() -> None:
    source = ty.StructType((("A", ty.INTEGER), ("B", ty.BYTES)))
    casts.check_cast(source, ty.StructType((("A", ty.STRING),)))
    with pytest.raises(casts.CastError):
        casts.check_cast(source, ty.StructType((("B", ty.INTEGER),)))


def test_literal_decimals_take_ksqldb_precision() -> None:
    from decimal import Decimal
    assert operators.decimal_of_value(Decimal("0.8")) == ty.DecimalType(2, 1)
    assert operators.decimal_of_value(Decimal("1.20")) == ty.DecimalType(3, 2)
    assert operators.decimal_of_value(Decimal("120.5")) == ty.DecimalType(4, 1)
