"""A persistent query's plan checks its stream rows where ksqlDB's evaluation would throw (a CAST
of text that is no number, a division by zero, a function refusing its arguments): each check,
evaluated by Spark over rows of the query's stream view, holds for exactly the rows ksqlDB logs
a RECORD_PROCESSING_ERROR for, named as ksqlDB's logger names it; and the record it logs is the
row as a JSON array, as ksqlDB prints it."""

from __future__ import annotations

import datetime
import decimal
import json
import re
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from metastore.catalog.image import Image
from metastore.catalog.model import PersistentQuery
from metastore.planner.plan import compile_query
from metastore.planner.record_checks import CARRIED, observed
from metastore.planner.steps import CheckedRows, QueryPlan
from metastore.runtime.processing_log import FailedRows, failed_rows_select
from metastore.spark.types import quote
from metastore.testing.check import run_script

SOURCE = ("CREATE STREAM S (ID INT KEY, S STRING, N INT, B BIGINT, BY BYTES, DE DECIMAL(4, 2)) "
          "WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');")
_SCHEMA = ("ID INT, S STRING, N INT, B BIGINT, BY BINARY, DE DECIMAL(4, 2), ROWTIME BIGINT, "
           "ROWPARTITION INT, ROWOFFSET BIGINT, __MS_NULL_VALUE BOOLEAN")


@pytest.fixture
def spark(spark: Any) -> Any:
    spark.conf.set("spark.sql.ansi.enabled", "false")
    return spark


def _query_of(script: str) -> tuple[PersistentQuery, Image]:
    """The one query ``script`` creates, and its catalog."""
    results, image = run_script(script)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    [query] = image.queries.values()
    return query, image


def _plan_of(script: str) -> QueryPlan:
    """The plan of the one query ``script`` creates."""
    return compile_query(*_query_of(script))


def _checked(statement: str) -> CheckedRows | None:
    return _plan_of(SOURCE + statement).checked


def _row(**values: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"ID": 1, "S": None, "N": 1, "B": 1, "BY": None, "DE": None,
                           "ROWTIME": 1000, "ROWPARTITION": 0, "ROWOFFSET": 7,
                           "__MS_NULL_VALUE": False}
    return {**row, **values}


def _failing(spark: Any, checked: CheckedRows, rows: list[dict[str, Any]],
             schema: str = _SCHEMA) -> list[list[tuple[str, str, str]]]:
    """Per row, the (logger, message, cause) of each check it fails."""
    spark.createDataFrame(rows, schema).createOrReplaceTempView(checked.view)
    columns = ", ".join(f"IF({c.condition}, {c.cause}, NULL) AS c{i}"
                        for i, c in enumerate(checked.checks))
    found = spark.sql(f"SELECT {columns} FROM `{checked.view}` ORDER BY ROWOFFSET").collect()
    return [[(c.logger, c.message, cause) for c, cause in zip(checked.checks, row, strict=True)
             if cause is not None] for row in found]


CASES: list[tuple[str, dict[str, Any], list[tuple[str, str, str]]]] = [
    ("CAST(S AS INT) AS X", {"S": "x1"},
     [("Project", "Error processing INTEGER", 'For input string: "x1"')]),
    ("CAST(S AS INT) AS X", {"S": " 42 "}, []),
    ("CAST(S AS INT) AS X", {"S": None}, []),
    ("CAST(S AS BIGINT) AS X", {"S": "4.5"},
     [("Project", "Error processing BIGINT", 'For input string: "4.5"')]),
    ("CAST(S AS DECIMAL(2, 1)) AS X", {"S": "12345"},
     [("Project", "Error processing DECIMAL(2, 1)", "Character array is not a valid "
       "DECIMAL(2, 1): '12345'")]),
    ("CAST(S AS DECIMAL(2, 1)) AS X", {"S": "1.25"}, []),
    ("CAST(N AS DECIMAL(2, 1)) AS X", {"N": 100},
     [("Project", "Error processing DECIMAL(2, 1)", "Numeric field overflow: A field with "
       "precision 2 and scale 1 must round to an absolute value less than 10^1. Got 100")]),
    ("CAST(S AS DATE) AS X", {"S": "someday"},
     [("Project", "Error processing DATE", "Failed to parse date 'someday'")]),
    ("CAST(S AS BOOLEAN) AS X", {"S": "x"}, []),  # false, as ksqlDB's
    ("N / B AS X", {"N": 4, "B": 0},
     [("Project", "Error computing expression (N / B) for column X with index 0",
       "/ by zero")]),
    ("N % B AS X", {"N": 4, "B": 0},
     [("Project", "Error computing expression (N % B) for column X with index 0",
       "/ by zero")]),
    ("N / B AS X", {"N": 4, "B": 3}, []),
    ("DE / DE AS X", {"DE": decimal.Decimal("0.00")},
     [("Project", "Error computing expression (DE / DE) for column X with index 0",
       "Division undefined")]),
    ("CAST(N AS DOUBLE) / 0 AS X", {"N": 4}, []),  # Infinity, as Java's double arithmetic
    ("PARSE_DATE(S, 'yyyy-MM-dd') AS X", {"S": "nope"},
     [("Project", "Error computing expression PARSE_DATE(S, 'yyyy-MM-dd') for column X with "
       "index 0", "Failed to invoke function PARSE_DATE")]),
    ("PARSE_DATE(S, 'yyyy-MM-dd') AS X", {"S": "2020-01-02"}, []),
    # a CAST catches what its operand throws, a call passed to a call what it throws
    ("UCASE(CAST(PARSE_TIMESTAMP(S, 'yyyy-MM-dd HH:mm') AS STRING)) AS X", {"S": "x"},
     [("Project", "Error processing STRING", "Failed to invoke function PARSE_TIMESTAMP")]),
    ("UCASE(FORMAT_TIMESTAMP(PARSE_TIMESTAMP(S, 'yyyy'), 'yyyy')) AS X", {"S": "x"},
     [("Project", "Error processing PARSE_TIMESTAMP", "Failed to invoke function "
       "PARSE_TIMESTAMP")]),
    ("CAST(N / B AS STRING) AS X", {"N": 4, "B": 0},
     [("Project", "Error processing STRING", "/ by zero")]),
    ("CAST(N / B + B / N AS STRING) AS X", {"N": 0, "B": 0},  # the first exception ends it
     [("Project", "Error processing STRING", "/ by zero")]),
    ("CAST(N / B AS STRING) AS X, CAST(B / N AS STRING) AS Y", {"N": 0, "B": 0},
     [("Project", "Error processing STRING", "/ by zero")] * 2),
    ("CONCAT(CAST(N / B AS STRING), CAST(B / N AS STRING)) AS X", {"N": 0, "B": 0},
     [("Project", "Error processing STRING", "/ by zero")] * 2),  # each CAST its own
    ("ARRAY[CAST(N / B AS STRING)] AS X", {"N": 4, "B": 0},  # the nearest catches
     [("Project", "Error processing STRING", "/ by zero")]),
    ("CAST(CASE WHEN N > 1 THEN N / B END AS STRING) AS X", {"N": 1, "B": 0}, []),
    ("CAST(CASE WHEN N > 1 THEN N / B END AS STRING) AS X", {"N": 4, "B": 0},
     [("Project", "Error processing STRING", "/ by zero")]),
    ("ARRAY[N / B] AS X", {"N": 4, "B": 0},
     [("Project", "Error processing array item", "/ by zero")]),
    ("MAP('k' := N / B) AS X", {"N": 4, "B": 0},
     [("Project", "Error processing map value", "/ by zero")]),
    ("MAP(ENCODE(S, 'hex', 'utf8') := 'v') AS X", {"S": "zz"},  # JSON's keys are strings
     [("Project", "Error processing map key", "Failed to invoke function ENCODE")]),
    ("ABS(N / B) AS X", {"N": 4, "B": 0},  # an argument that is no call is not caught
     [("Project", "Error computing expression ABS((N / B)) for column X with index 0",
       "/ by zero")]),
    ("ENCODE(S, 'hex', 'utf8') AS X", {"S": "zz"},
     [("Project", "Error computing expression ENCODE(S, 'hex', 'utf8') for column X with "
       "index 0", "Failed to invoke function ENCODE")]),
    ("ENCODE(S, 'hex', 'utf8') AS X", {"S": "6869"}, []),
    ("TO_BYTES(S, 'hex') AS X", {"S": "xyz"},
     [("Project", "Error computing expression TO_BYTES(S, 'hex') for column X with index 0",
       "Failed to invoke function TO_BYTES")]),
    ("TO_BYTES(S, 'hex') AS X", {"S": "0aff"}, []),
    ("INT_FROM_BYTES(BY) AS X", {"BY": bytearray(b"abc")},
     [("Project", "Error computing expression INT_FROM_BYTES(BY) for column X with index 0",
       "Failed to invoke function INT_FROM_BYTES")]),
    ("INT_FROM_BYTES(BY) AS X", {"BY": bytearray(b"abcd")}, []),
    ("CASE WHEN S = 'x' THEN NULL ELSE CAST(S AS INT) END AS X", {"S": "x"}, []),
    ("CASE WHEN S = 'x' THEN NULL ELSE CAST(S AS INT) END AS X", {"S": "y"},
     [("Project", "Error processing INTEGER", 'For input string: "y"')]),
    ("CASE N WHEN 1 THEN 0 WHEN 2 THEN CAST(S AS INT) END AS X", {"N": 1, "S": "y"}, []),
    ("CASE N WHEN 1 THEN 0 WHEN 2 THEN CAST(S AS INT) END AS X", {"N": 2, "S": "y"},
     [("Project", "Error processing INTEGER", 'For input string: "y"')]),
    ("STRUCT(F := PARSE_DATE(S, 'yyyy')) AS X", {"S": "y"},
     [("Project", "Error processing struct field", "Failed to invoke function PARSE_DATE")]),
    ("N / B + B / N AS X", {"N": 0, "B": 0},  # one failure of the expression, not two
     [("Project", "Error computing expression ((N / B) + (B / N)) for column X with index 0",
       "/ by zero")]),
    ("N / 3 AS X, N % 2 AS Y, CAST(N AS DECIMAL(12, 2)) AS Z", {"N": 1}, []),
]


@pytest.mark.parametrize(("select", "values", "logged"), CASES,
                         ids=[f"{s} {v}" for s, v, _ in CASES])
def test_a_check_holds_for_the_rows_ksqldb_logs_a_record_processing_error_for(
        spark: Any, select: str, values: dict[str, Any],
        logged: list[tuple[str, str, str]]) -> None:
    checked = _checked(f"CREATE STREAM T AS SELECT ID, {select} FROM S;")
    if checked is None:  # nothing in it can fail
        assert not logged
        return
    assert _failing(spark, checked, [_row(**values)]) == [logged]


def test_a_lambda_that_throws_on_an_element_is_one_failure_of_its_call(spark: Any) -> None:
    """ksqlDB's TRANSFORM and FILTER end in the exception their lambda's body throws on an
    element: the call fails as a whole, logged once per row (by its clause, or by the call
    around it that catches it) with the first failing element's cause; a node inside the body
    that catches it makes only that element NULL, logged nowhere."""
    checked = _plan_of(
        "CREATE STREAM S (ID INT KEY, A ARRAY<INT>) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');"
        "CREATE STREAM T AS SELECT ID, TRANSFORM(A, X => 10 / X) AS T, "
        "ARRAY_LENGTH(FILTER(A, X => 10 / X > 1)) AS L, "
        "TRANSFORM(A, X => CAST(CAST(10 / X AS STRING) AS INT)) AS C FROM S;").checked
    assert checked is not None
    schema = ("ID INT, A ARRAY<INT>, ROWTIME BIGINT, ROWPARTITION INT, ROWOFFSET BIGINT, "
              "__MS_NULL_VALUE BOOLEAN")
    rows = [{"ID": 1, "A": [5, 0, 0], "ROWTIME": 1, "ROWPARTITION": 0, "ROWOFFSET": 1,
             "__MS_NULL_VALUE": False},
            {"ID": 2, "A": [5, 2, None], "ROWTIME": 1, "ROWPARTITION": 0, "ROWOFFSET": 2,
             "__MS_NULL_VALUE": False}]
    assert _failing(spark, checked, rows, schema) == [
        [("Project", "Error computing expression TRANSFORM(A, (X) => (10 / X)) for column T "
          "with index 0", "/ by zero"),
         ("Project", "Error processing FILTER", "/ by zero")],
        []]


def test_a_where_is_checked_once_its_operands_are_evaluated_and_gates_the_projection(
        spark: Any) -> None:
    checked = _checked("CREATE STREAM T AS SELECT ID, CAST(S AS INT) AS X FROM S "
                       "WHERE N > 0 AND N / B > 1;")
    assert checked is not None
    predicate = "Error evaluating predicate ((N > 0) AND ((N / B) > 1))"
    assert _failing(spark, checked, [
        _row(N=0, B=0, S="a", ROWOFFSET=1),  # N > 0 is false: nothing else is evaluated
        _row(N=5, B=0, S="5", ROWOFFSET=2),  # the division fails: the row is dropped
        _row(N=5, B=1, S="a", ROWOFFSET=3),  # kept, its CAST fails
        _row(N=5, B=5, S="a", ROWOFFSET=4),  # dropped by the WHERE: its CAST is not computed
    ]) == [[], [("WhereFilter", predicate, "/ by zero")],
           [("Project", "Error processing INTEGER", 'For input string: "a"')], []]


def test_a_where_that_throws_drops_the_row_though_an_or_would_keep_it(spark: Any) -> None:
    """ksqlDB's WhereFilter takes a predicate that throws for false: the row is dropped, and
    its SELECT neither computed nor logged, even where an OR around the failing node would
    keep the NULL it stands for here. A failure a node inside the WHERE catches is that
    node's NULL there too, and the row is kept if the WHERE holds."""
    plan = _plan_of(SOURCE + "CREATE STREAM T AS SELECT ID, CAST(S AS INT) AS X FROM S "
                    "WHERE N / B > 1 OR N > 0;")
    checked = plan.checked
    assert checked is not None
    rows = [_row(N=5, B=0, S="a", ROWOFFSET=1),  # the division throws: dropped
            _row(N=5, B=1, S="a", ROWOFFSET=2),  # kept, its CAST fails
            _row(N=0, B=0, S="a", ROWOFFSET=3)]  # throws too
    predicate = "Error evaluating predicate (((N / B) > 1) OR (N > 0))"
    assert _failing(spark, checked, rows) == [
        [("WhereFilter", predicate, "/ by zero")],
        [("Project", "Error processing INTEGER", 'For input string: "a"')],
        [("WhereFilter", predicate, "/ by zero")]]
    assert _kept_offsets(spark, plan, rows) == [2]

    caught = _plan_of(SOURCE + "CREATE STREAM T AS SELECT ID, N FROM S "
                      "WHERE CAST(S AS INT) IS NULL OR N > 9;")
    assert caught.checked is not None
    rows = [_row(S="x", ROWOFFSET=1), _row(S="5", ROWOFFSET=2)]
    assert _failing(spark, caught.checked, rows) == [
        [("WhereFilter", "Error processing INTEGER", 'For input string: "x"')], []]
    assert _kept_offsets(spark, caught, rows) == [1], "the CAST caught it: NULL, kept"


def test_a_table_query_deletes_the_key_whose_where_throws_though_an_or_would_keep_it(
        spark: Any) -> None:
    """A query over a table moves its WHERE into its rows' deletion: one that throws deletes
    the key, and its SELECT is neither computed nor logged."""
    plan = _plan_of("CREATE TABLE TB (ID INT PRIMARY KEY, S STRING, N INT, B BIGINT, "
                    "BY BYTES, DE DECIMAL(4, 2)) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');"
                    "CREATE TABLE T AS SELECT ID, CAST(S AS INT) AS X FROM TB "
                    "WHERE N / B > 1 OR N > 0;")
    assert plan.checked is not None
    predicate = "Error evaluating predicate (((N / B) > 1) OR (N > 0))"
    assert _failing(spark, plan.checked, [_row(N=5, B=0, S="a", ROWOFFSET=1),
                                          _row(N=5, B=1, S="a", ROWOFFSET=2)]) == [
        [("WhereFilter", predicate, "/ by zero")],
        [("Project", "Error processing INTEGER", 'For input string: "a"')]]


def _kept_offsets(spark: Any, plan: QueryPlan, rows: list[dict[str, Any]]) -> list[int]:
    """The offsets of ``rows``, in ``plan``'s stream view, that its one filter keeps."""
    assert plan.checked is not None
    spark.createDataFrame(rows, _SCHEMA).createOrReplaceTempView(plan.checked.view)
    [filtered] = [select for select in sqlglot.parse_one(plan.sql, dialect="spark").find_all(
        exp.Select) if select.args.get("where") is not None]
    filtered.set("expressions", [exp.column("ROWOFFSET")])
    kept = spark.sql(f"{filtered.sql(dialect='spark')} ORDER BY ROWOFFSET").collect()
    return [row.ROWOFFSET for row in kept]


def test_each_group_by_expression_is_checked_for_the_rows_the_where_keeps(spark: Any) -> None:
    checked = _checked("CREATE TABLE T WITH (KEY_FORMAT='JSON') AS SELECT N, B / N AS Q, "
                       "COUNT(*) AS C FROM S "
                       "WHERE B > 0 GROUP BY N, B / N;")
    assert checked is not None
    failed = ("Aggregate.GroupBy", "Error calculating group-by column with index 1. The source "
              "row will be excluded from the table.", "/ by zero")
    assert _failing(spark, checked, [_row(N=0, B=1, ROWOFFSET=1), _row(N=0, B=0, ROWOFFSET=2),
                                     _row(N=2, B=4, ROWOFFSET=3)]) == [[failed], [], []]
    checked = _checked("CREATE TABLE T AS SELECT CAST(S AS INT) AS K, COUNT(*) AS C FROM S "
                       "GROUP BY CAST(S AS INT);")
    assert checked is not None
    assert _failing(spark, checked, [_row(S="x")]) == [
        [("Aggregate.GroupBy", "Error processing INTEGER", 'For input string: "x"')]]


def test_a_failure_in_two_columns_is_logged_for_each_and_a_tombstone_for_none(
        spark: Any) -> None:
    checked = _checked("CREATE STREAM T AS SELECT ID, PARSE_DATE(S, 'yyyy') AS X, "
                       "CAST(PARSE_DATE(S, 'yyyy') AS STRING) AS Y FROM S;")
    assert checked is not None
    parse = ("Failed to invoke function PARSE_DATE")
    assert _failing(spark, checked, [_row(S="y", ROWOFFSET=1),
                                     _row(S="y", ROWOFFSET=2, __MS_NULL_VALUE=True)]) == [
        [("Project", "Error computing expression PARSE_DATE(S, 'yyyy') for column X with "
          "index 0", parse), ("Project", "Error processing STRING", parse)], []]


def test_a_hopping_window_is_checked_on_its_records_not_on_a_row_per_window(
        spark: Any) -> None:
    checked = _checked("CREATE TABLE T AS SELECT ID, COUNT(*) AS C FROM S WINDOW HOPPING "
                       "(SIZE 60 SECONDS, ADVANCE BY 10 SECONDS) WHERE N / B > 0 GROUP BY ID;")
    assert checked is not None and checked.view.endswith("_timed"), "before the windows"
    assert checked.reads[-1] == checked.view
    assert _failing(spark, checked, [_row(N=1, B=0)]) == [
        [("WhereFilter", "Error evaluating predicate ((N / B) > 0)", "/ by zero")]]
    assert _checked("CREATE TABLE T AS SELECT ID, COUNT(*) AS C FROM S WINDOW TUMBLING "
                    "(SIZE 60 SECONDS) WHERE N / B > 0 GROUP BY ID;") is not None


def test_a_query_without_an_expression_that_can_fail_has_no_checks() -> None:
    assert _checked("CREATE STREAM T AS SELECT ID, UCASE(S) AS U, N + 1 AS M FROM S "
                    "WHERE N > 1;") is None


def test_the_record_is_the_rows_values_then_its_pseudo_columns_then_its_key(spark: Any) -> None:
    checked = _checked("CREATE STREAM T AS SELECT ID, CAST(S AS INT) AS X FROM S;")
    assert checked is not None
    spark.createDataFrame([_row(S='say "hi"', DE=decimal.Decimal("1.50"))], _SCHEMA) \
        .createOrReplaceTempView(checked.view)
    [[record]] = spark.sql(f"SELECT {checked.record} FROM `{checked.view}`").collect()
    assert json.loads(record) == ['say "hi"', 1, 1, None, 1.5, 1000, 0, 7, 1]


def test_a_partition_by_expression_is_checked_as_ksqldbs_partitionby_step_after_the_where(
        spark: Any) -> None:
    checked = _checked("CREATE STREAM T AS SELECT * FROM S WHERE N > 0 PARTITION BY N / B;")
    assert checked is not None
    new_key = ("PartitionBy", "Error computing new key from expression (N / B)", "/ by zero")
    assert _failing(spark, checked, [_row(N=1, B=0, ROWOFFSET=1), _row(N=0, B=0, ROWOFFSET=2),
                                     _row(N=2, B=1, ROWOFFSET=3)]) == [[new_key], [], []]
    checked = _checked("CREATE STREAM T AS SELECT * FROM S PARTITION BY CAST(S AS INT);")
    assert checked is not None  # a CAST is caught where it is, in the PartitionBy step
    assert _failing(spark, checked, [_row(S="x", ROWOFFSET=1), _row(S="7", ROWOFFSET=2)]) == [
        [("PartitionBy", "Error processing INTEGER", 'For input string: "x"')], []]


def test_a_partition_by_over_key_columns_only_logs_the_keys_values_even_of_a_tombstone(
        spark: Any) -> None:
    checked = _checked("CREATE STREAM T AS SELECT * FROM S PARTITION BY ID / 0;")
    assert checked is not None
    [check] = checked.checks
    assert check.record is not None, "ksqlDB evaluates the key alone, and logs it"
    rows = [_row(ID=3, ROWOFFSET=1), _row(ID=4, ROWOFFSET=2, __MS_NULL_VALUE=True)]
    new_key = ("PartitionBy", "Error computing new key from expression (ID / 0)", "/ by zero")
    assert _failing(spark, checked, rows) == [[new_key], [new_key]]
    entries = spark.sql(failed_rows_select(FailedRows("CSAS_T_1", checked, (), (2,), {}, {}),
                                           rows_include=True)).collect()
    assert sorted(json.loads(json.loads(entry.value)["message"]["recordProcessingError"][
        "record"]) for entry in entries) == [[3], [4]]
    checked = _checked("CREATE STREAM T AS SELECT * FROM S PARTITION BY N / 0;")
    assert checked is not None and checked.checks[0].record is None, "the row, as any step's"
    checked = _checked("CREATE STREAM T AS SELECT * FROM S WHERE ID > 0 PARTITION BY ID / 0;")
    assert checked is not None  # ksqlDB's WHERE drops a tombstone before the PARTITION BY
    assert _failing(spark, checked, rows) == [[new_key], []]


def test_a_join_is_checked_on_its_joined_rows_which_its_observation_carries(spark: Any) -> None:
    checked = _checked(
        "CREATE TABLE U (ID INT PRIMARY KEY, NAME STRING) WITH (KAFKA_TOPIC='u', "
        "VALUE_FORMAT='JSON');"
        "CREATE STREAM J AS SELECT S.ID, CAST(NAME AS INT) AS X FROM S JOIN U ON S.ID = U.ID;")
    assert checked is not None and checked.carried
    table = "`__MS_J1_ID` INT, `__MS_J1_NAME` STRING, `__MS_J1_ROWTIME` BIGINT, " \
            "`__MS_J1_ROWPARTITION` INT, `__MS_J1_ROWOFFSET` BIGINT"
    rows = [{**_row(ID=key, ROWOFFSET=offset), "__MS_J1_ID": key, "__MS_J1_NAME": name,
             "__MS_J1_ROWTIME": 500, "__MS_J1_ROWPARTITION": 0, "__MS_J1_ROWOFFSET": key}
            for key, name, offset in [(1, "x", 3), (2, "5", 4), (3, "y", 5)]]
    spark.createDataFrame(rows, f"{_SCHEMA}, {table}").createOrReplaceTempView(checked.view)
    _, measures = observed(checked)
    [observation] = spark.sql(f"SELECT {', '.join(measures)} FROM `{checked.view}`").collect()
    assert observation["failed0"] == 2, "NAME, named alone, is the table's column in the view"
    [first, second] = observation[f"{CARRIED}0"]
    assert [first["cause"], second["cause"]] == ['For input string: "x"',
                                                'For input string: "y"']
    assert json.loads(first["record"]) == [None, 1, 1, None, None, 1000, 0, 3, 1,  # the stream's
                                           "x", 500, 0, 1, 1]  # then the table's row


def test_a_query_over_a_table_checks_each_row_of_its_changelog_but_no_tombstone(
        spark: Any) -> None:
    checked = _checked("CREATE TABLE TB (ID INT PRIMARY KEY, S STRING, N INT, B BIGINT, "
                       "BY BYTES, DE DECIMAL(4, 2)) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');"
                       "CREATE TABLE T AS SELECT ID, CAST(S AS INT) AS X FROM TB WHERE N / B > 0;")
    assert checked is not None
    assert _failing(spark, checked, [
        _row(S="x", N=1, B=1, ROWOFFSET=1), _row(S="1", N=1, B=0, ROWOFFSET=2),
        _row(S="x", N=1, B=1, ROWOFFSET=3, __MS_NULL_VALUE=True)]) == [
        [("Project", "Error processing INTEGER", 'For input string: "x"')],
        [("WhereFilter", "Error evaluating predicate ((N / B) > 0)", "/ by zero")], []]


def test_an_aggregate_calls_argument_is_checked_as_ksqldbs_prepare_step_names_it(
        spark: Any) -> None:
    checked = _checked("CREATE TABLE T AS SELECT ID, COUNT(*) AS C, SUM(N / B) AS Q, "
                       "MAX(N / B) AS M, SUM(CAST(S AS INT)) AS X FROM S WHERE B < 5 "
                       "GROUP BY ID;")
    assert checked is not None  # reads ID, ROWTIME (COUNT(*)), N, B, S; then (N / B) once
    divided = ("Aggregate.Prepare", "Error computing expression (N / B) for column "
               "KSQL_INTERNAL_COL_5 with index 5", "/ by zero")
    cast = ("Aggregate.Prepare", "Error processing INTEGER", 'For input string: "x"')
    assert _failing(spark, checked, [_row(N=1, B=0, S="1", ROWOFFSET=1),
                                     _row(S="x", ROWOFFSET=2),
                                     _row(N=1, B=0, S="x", ROWOFFSET=3),
                                     _row(N=1, B=7, S="x", ROWOFFSET=4)]) == [
        [divided], [cast], [divided, cast], []]


def test_an_argument_is_checked_for_every_row_whatever_surrounds_its_aggregate_call(
        spark: Any) -> None:
    divided = ("Aggregate.Prepare", "Error computing expression (N / B) for column "
               "KSQL_INTERNAL_COL_4 with index 4", "/ by zero")  # after ID, ROWTIME, N and B
    for query in ("SELECT ID, CASE WHEN COUNT(*) > 1 THEN SUM(N / B) END AS Q FROM S GROUP BY ID",
                  "SELECT ID, COUNT(*) AS C FROM S GROUP BY ID HAVING COUNT(*) > 1 AND "
                  "MAX(N / B) > 1"):
        checked = _checked(f"CREATE TABLE T AS {query};")
        assert checked is not None, query  # no condition holds an aggregate call
        assert _failing(spark, checked, [_row(N=1, B=0)]) == [[divided]], query


def test_an_aggregate_calls_argument_is_caught_only_within_it(spark: Any) -> None:
    """ksqlDB's Aggregate.Prepare computes each argument as a column of its own: a CAST
    around the call catches nothing of it, and an argument two calls take is one entry."""
    checked = _checked("CREATE TABLE T AS SELECT ID, CAST(SUM(N / B) AS STRING) AS Q, "
                       "SUM(CAST(S AS INT)) AS X, MAX(CAST(S AS INT)) AS Y FROM S GROUP BY ID;")
    assert checked is not None
    assert _failing(spark, checked, [_row(N=1, B=0, S="x")]) == [[
        ("Aggregate.Prepare", "Error computing expression (N / B) for column "
         "KSQL_INTERNAL_COL_4 with index 4", "/ by zero"),  # after ID, N, B and S
        ("Aggregate.Prepare", "Error processing INTEGER", 'For input string: "x"')]]


def test_an_aggregations_having_and_select_are_checked_over_its_aggregated_rows(
        spark: Any) -> None:
    """ksqlDB's Aggregate.HavingFilter and Aggregate.Project evaluate each aggregated row, its
    aggregate calls numbered KSQL_AGG_VARIABLE_<n> (the SELECT's, then the HAVING's); a row the
    HAVING drops is not projected, and AND evaluates its right side only when the left holds."""
    plan = _plan_of(
        "CREATE STREAM E (ID INT KEY, N INT, B BIGINT) WITH (KAFKA_TOPIC='e', VALUE_FORMAT='JSON');"
        "CREATE TABLE T AS SELECT ID, SUM(N) / COUNT(B) AS X, SUM(N) / (COUNT(*) - 2) AS Y "
        "FROM E GROUP BY ID HAVING COUNT(*) > 1 AND SUM(N) / COUNT(B) >= 0;")
    aggregated = plan.aggregated
    assert aggregated is not None and aggregated.carried
    assert [(c.logger, c.message) for c in aggregated.checks] == [
        ("Aggregate.Project", "Error computing expression (KSQL_AGG_VARIABLE_0 / "
         "KSQL_AGG_VARIABLE_1) for column X with index 0"),
        ("Aggregate.Project", "Error computing expression (KSQL_AGG_VARIABLE_2 / "
         "(KSQL_AGG_VARIABLE_3 - 2)) for column Y with index 1"),
        ("Aggregate.HavingFilter", "Error evaluating predicate ((KSQL_AGG_VARIABLE_4 > 1) AND "
         "((KSQL_AGG_VARIABLE_5 / KSQL_AGG_VARIABLE_6) >= 0))")]
    [step] = [step for step in plan.steps if step.view == aggregated.view]
    assert step.sql is not None and step.observed is not None
    rows = [(key, n, b, 1000 + offset, 0, offset, False, [])
            for key, n, b, offset in [(1, 1, None, 1), (1, 2, None, 2),  # HAVING: 3 / 0
                                      (2, 1, None, 3),  # COUNT(*) > 1 is false: no division
                                      (3, 4, 1, 4), (3, 2, None, 5)]]  # kept, Y: 6 / 0
    stream_view = next(s.view for s in plan.steps if s.view.endswith("_0"))
    spark.createDataFrame(rows, "ID INT, N INT, B BIGINT, ROWTIME BIGINT, ROWPARTITION INT, "
                          "ROWOFFSET BIGINT, __MS_NULL_VALUE BOOLEAN, __MS_HEADERS ARRAY<STRUCT<"
                          "key: STRING, value: BINARY>>").createOrReplaceTempView(stream_view)
    spark.sql(step.sql).createOrReplaceTempView(aggregated.view)
    [observation] = spark.sql(f"SELECT {', '.join(step.observed[1])} FROM "
                              f"`{aggregated.view}`").collect()
    # X fails for ID 1 only, which its HAVING drops
    assert [observation[f"failed{i}"] for i in range(3)] == [0, 1, 1]
    [projected] = observation[f"{CARRIED}1"]
    [having] = observation[f"{CARRIED}2"]
    assert (having["cause"], projected["cause"]) == ("/ by zero", "/ by zero")
    # the columns it reads (ID, the group's; N and B, not kept; ROWTIME for COUNT(*), the
    # newest), then each call
    assert json.loads(having["record"]) == [1, None, None, 1002, 3, 0, 3, 2, 2, 3, 0]
    assert json.loads(projected["record"]) == [3, None, None, 1005, 6, 1, 6, 2, 2, 6, 1]


def test_an_aggregations_checks_keep_no_state_of_their_own(spark: Any) -> None:
    """A replacement ksqlDB allows (its projection changes, its aggregate calls do not) goes on
    from the query's state whether either plan checks its aggregated rows or not: the checks
    add no aggregate to Spark's state."""
    def aggregates(select: str) -> tuple[str, bool]:
        plan = _plan_of("CREATE STREAM E (ID INT KEY, N INT, B BIGINT) WITH (KAFKA_TOPIC='e', "
                        f"VALUE_FORMAT='JSON');CREATE TABLE T AS SELECT {select} FROM E "
                        "GROUP BY ID;")
        stream_view = next(s.view for s in plan.steps if s.view.endswith("_0"))
        spark.createDataFrame([(1, 1, 1, 1, 0, 1, False, [])],
                              "ID INT, N INT, B BIGINT, ROWTIME BIGINT, ROWPARTITION INT, "
                              "ROWOFFSET BIGINT, __MS_NULL_VALUE BOOLEAN, __MS_HEADERS ARRAY<"
                              "STRUCT<key: STRING, value: BINARY>>"
                              ).createOrReplaceTempView(stream_view)
        for step in plan.steps:
            if step.view.endswith("_aggregated"):
                assert step.sql is not None
                spark.sql(step.sql).createOrReplaceTempView(step.view)
        executed = spark.sql(plan.sql)._jdf.queryExecution().executedPlan().toString()
        [functions] = {found for found in re.findall(
            r"Aggregate\(keys?=\[[^]]*\], functions=\[(.*?)\], output", executed)
            if "partial_" not in found}
        return re.sub(r"#\d+L?", "", functions), plan.aggregated is not None

    plain = aggregates("ID, SUM(N) AS X, COUNT(B) AS C")
    checked = aggregates("ID, ID / SUM(N) AS X, SUM(N) / COUNT(B) AS Y, COUNT(B) AS C")
    assert (plain[1], checked[1]) == (False, True)
    assert checked[0] == plain[0] == "sum(N), count(B), max_by(__MS_HEADERS, ROWOFFSET), " \
        "max(ROWTIME)"


@pytest.mark.parametrize("stream_state", [True, False])
@pytest.mark.parametrize("window", ["SESSION (10 SECONDS)", "SESSION (10 SECONDS) EMIT FINAL",
                                    "TUMBLING (SIZE 10 SECONDS) EMIT FINAL"])
def test_session_and_emit_final_windows_check_their_where_on_the_streams_records(
        window: str, stream_state: bool) -> None:
    """Their keyed state reads the records after the WHERE: the stream's view, which the
    streaming query reads, checks each record. A checkpoint older than that state replays the
    stream in each micro-batch's stage, which could compute the view more than once: no
    check."""
    size, final = window.removesuffix(" EMIT FINAL"), window.endswith(" EMIT FINAL")
    results, image = run_script(SOURCE + "CREATE TABLE T AS SELECT ID, COUNT(*) AS C FROM S "
                                f"WINDOW {size} WHERE N / B > 0 GROUP BY ID"
                                f"{' EMIT FINAL' if final else ''};")
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    [query] = image.queries.values()
    plan = compile_query(query, image, stream_state=stream_state)
    checked = plan.checked
    assert plan.batch is not None and (checked is not None) == stream_state
    if checked is None:
        return
    assert [(c.logger, c.message) for c in checked.checks] == [
        ("WhereFilter", "Error evaluating predicate ((N / B) > 0)")]
    [step] = [s for s in plan.steps if s.view == checked.view]  # a streaming step's
    assert step.observed is not None and all(s.view != step.view for s in plan.batch.steps)
    assert step.view == checked.reads[-1] and not checked.carried


def test_a_session_aggregation_is_checked_over_the_sessions_a_micro_batch_touched() -> None:
    """Its stage computes its SELECT over the sessions a micro-batch touched and over those it
    merged away (to delete them): the first computes the checks' columns, and its view of the
    touched sessions, which the stage writes, is observed; the merged-away are not checked. A
    checkpoint older than its keyed sessions replays the stream: not checked."""
    script = SOURCE + ("CREATE TABLE T AS SELECT ID, COUNT(*) AS C FROM S WINDOW SESSION "
                       "(1 HOUR) GROUP BY ID HAVING 10 / (COUNT(*) - 1) > 0;")
    query, image = _query_of(script)
    assert compile_query(query, image, stream_state=False).aggregated is None
    plan = compile_query(query, image)
    aggregated, stage = plan.aggregated, plan.batch
    assert aggregated is not None and aggregated.carried and stage is not None
    assert [(c.logger, c.message) for c in aggregated.checks] == [
        ("Aggregate.HavingFilter", "Error evaluating predicate ((10 / (KSQL_AGG_VARIABLE_1 - "
         "1)) > 0)")]
    steps = {step.view: step for step in stage.steps}
    touched = steps[aggregated.view]
    computed = steps[aggregated.view.removesuffix("_touched")]
    merged_away = next(step for view, step in steps.items() if view.endswith("earlier_sessions"))
    assert touched.observed is not None and "__ms_checked_condition0" in str(computed.sql)
    assert "__ms_checked" not in str(merged_away.sql) and merged_away.observed is None
    assert f"FROM {quote(aggregated.view)}" in plan.sql, "the stage writes the observed rows"


def test_a_table_aggregation_is_checked_in_its_stage_over_the_groups_its_changes_touched(
        spark: Any) -> None:
    """A table aggregation's aggregate SELECT runs in its batch stage, over the rows of the
    groups a micro-batch's changes touched and those changes as sentinels: the checks are a
    step of the stage, whose aggregate calls leave the sentinels out as the SELECT's do."""
    plan = _plan_of(
        "CREATE TABLE U (ID INT PRIMARY KEY, K INT, M INT) WITH (KAFKA_TOPIC='u', "
        "VALUE_FORMAT='JSON');CREATE TABLE T AS SELECT K, COUNT(*) AS C, 10 / (SUM(M) - 4) AS R "
        "FROM U GROUP BY K HAVING 6 / (SUM(M) - 3) >= 0;")
    aggregated, stage = plan.aggregated, plan.batch
    assert aggregated is not None and aggregated.carried and stage is not None
    assert [(c.logger, c.message) for c in aggregated.checks] == [
        ("Aggregate.Project", "Error computing expression (10 / (KSQL_AGG_VARIABLE_1 - 4)) "
         "for column R with index 1"),
        ("Aggregate.HavingFilter", "Error evaluating predicate ((6 / (KSQL_AGG_VARIABLE_2 - "
         "3)) >= 0)")]
    [step] = [s for s in stage.steps if s.view == aggregated.view]
    assert step.sql is not None and step.observed is not None
    assert all(s.view != aggregated.view for s in plan.steps), "not a streaming step"
    rows = [(1, 1, 2, 1000, 0, 1, False, [], False), (2, 1, 2, 1001, 0, 2, False, [], False),
            (2, 1, 2, 1005, 0, 5, False, [], True),  # K 1: SUM(M) is 4, R divides by 0
            (3, 2, 3, 1002, 0, 3, False, [], False),
            (3, 2, 3, 1006, 0, 6, False, [], True),  # K 2: the HAVING divides by 0
            (4, 3, 3, 1003, 0, 4, False, [], False)]  # K 3: no change touched it
    spark.createDataFrame(rows, "ID INT, K INT, M INT, ROWTIME BIGINT, ROWPARTITION INT, "
                          "ROWOFFSET BIGINT, __MS_NULL_VALUE BOOLEAN, __MS_HEADERS ARRAY<STRUCT<"
                          "key: STRING, value: BINARY>>, __MS_SENTINEL BOOLEAN"
                          ).createOrReplaceTempView(stage.view)
    spark.sql(step.sql).createOrReplaceTempView(aggregated.view)
    [observation] = spark.sql(f"SELECT {', '.join(step.observed[1])} FROM "
                              f"`{aggregated.view}`").collect()
    assert [observation["failed0"], observation["failed1"]] == [1, 1]
    [projected], [having] = observation[f"{CARRIED}0"], observation[f"{CARRIED}1"]
    # K, the group's; ROWTIME for COUNT(*), the newest change's (as the row written); M, not
    # kept; then each call, over the members
    assert json.loads(projected["record"]) == [1, 1005, None, 2, 4, 4]
    assert json.loads(having["record"]) == [2, 1006, None, 1, 3, 3]


def test_a_join_of_streams_is_checked_in_its_selects_view_before_its_where_filters_it(
        spark: Any) -> None:
    """A stream-stream join's rows exist only in its SELECT: the view of that SELECT computes
    its checks and keeps the rows its WHERE keeps or throws on (which ksqlDB logs), marked for
    the filter after it; the record is the left stream's row, then the right's."""
    plan = _plan_of(
        "CREATE STREAM L (ID INT KEY, A INT, B INT) WITH (KAFKA_TOPIC='l', VALUE_FORMAT='JSON');"
        "CREATE STREAM R (ID INT KEY, C INT) WITH (KAFKA_TOPIC='r', VALUE_FORMAT='JSON');"
        "CREATE STREAM J AS SELECT L.ID, L.A / R.C AS Q FROM L JOIN R WITHIN 1 HOUR "
        "ON L.ID = R.ID WHERE L.A % L.B = 0;")
    checked = plan.checked
    assert checked is not None and checked.carried and not checked.reads
    assert [(c.logger, c.message) for c in checked.checks] == [
        ("Project", "Error computing expression (L_A / R_C) for column Q with index 0"),
        ("WhereFilter", "Error evaluating predicate ((L_A % L_B) = 0)")]
    pseudo = ("ROWTIME BIGINT, ROWPARTITION INT, ROWOFFSET BIGINT, __MS_NULL_VALUE BOOLEAN, "
              "__MS_TS TIMESTAMP, __MS_SOURCE STRING, __MS_HEADERS ARRAY<STRUCT<key: STRING, "
              "value: BINARY>>")
    [left, right] = [s.view for s in plan.steps if s.view.endswith(("_0", "_1"))]
    time = datetime.datetime(2020, 1, 1)
    spark.createDataFrame([(1, 4, 2, 1000, 0, 1, False, time, "l", []),
                           (2, 4, 0, 1000, 0, 2, False, time, "l", [])],
                          f"ID INT, A INT, B INT, {pseudo}").createOrReplaceTempView(left)
    spark.createDataFrame([(1, 0, 1500, 0, 7, False, time, "r", []),
                           (2, 5, 1500, 0, 8, False, time, "r", [])],
                          f"ID INT, C INT, {pseudo}").createOrReplaceTempView(right)
    [step] = [s for s in plan.steps if s.view == checked.view]
    assert step.sql is not None and step.observed is not None
    spark.sql(step.sql).createOrReplaceTempView(checked.view)
    [observation] = spark.sql(f"SELECT {', '.join(step.observed[1])} FROM "
                              f"`{checked.view}`").collect()
    assert (observation["failed0"], observation["failed1"]) == (1, 1)
    [divided] = observation[f"{CARRIED}0"]
    [where] = observation[f"{CARRIED}1"]
    assert json.loads(divided["record"]) == [4, 2, 1000, 0, 1, 1, 0, 1500, 0, 7, 1]
    assert json.loads(where["record"]) == [4, 0, 1000, 0, 2, 2, 5, 1500, 0, 8, 2]
    kept = spark.sql(f"SELECT `L_ID` FROM `{checked.view}` WHERE "
                     "`__ms_checked_kept`").collect()
    assert [row["L_ID"] for row in kept] == [1], "the WHERE filters the view after its checks"
