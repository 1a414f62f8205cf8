"""What the Spark runtime runs is decided at validation, purely: every refusal names its reason."""

from __future__ import annotations

import pytest

from metastore.planner.plan import compile_query
from metastore.testing.check import run_script

BASE = """
CREATE STREAM S (ID INT KEY, V INT, NAME STRING) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');
CREATE STREAM S2 (ID INT KEY, V INT) WITH (KAFKA_TOPIC='s2', VALUE_FORMAT='JSON');
CREATE TABLE T (ID INT PRIMARY KEY, NAME STRING) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');
CREATE TABLE T2 (ID INT PRIMARY KEY, N INT) WITH (KAFKA_TOPIC='t2', VALUE_FORMAT='JSON');
CREATE STREAM A (ID INT KEY, V INT) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='AVRO');
"""
WINDOWED = """
CREATE STREAM W (ID INT KEY, V INT) WITH (KAFKA_TOPIC='w', VALUE_FORMAT='JSON',
  WINDOW_TYPE='SESSION');
CREATE STREAM H (ID INT KEY, V INT) WITH (KAFKA_TOPIC='h', VALUE_FORMAT='JSON',
  WINDOW_TYPE='HOPPING', WINDOW_SIZE='30 SECONDS');
"""


def outcome(statement: str) -> str | None:
    results, image = run_script(BASE + statement)
    failed = [r for r in results if not r.ok]
    if not failed:  # what validation accepts, the runtime plans
        for query in image.queries.values():
            compile_query(query, image)
    return failed[0].message if failed else None


@pytest.mark.parametrize("statement", [
    "CREATE STREAM X AS SELECT ID, V * 2 AS W FROM S WHERE V > 1 AND NAME LIKE 'a%';",
    "CREATE STREAM X AS SELECT ID, UCASE(NAME) AS U, COALESCE(V, 0) AS C FROM S PARTITION BY ID;",
    "CREATE TABLE X AS SELECT NAME, COUNT(*) AS N, AVG(V) AS M, LATEST_BY_OFFSET(V) AS L "
    "FROM S GROUP BY NAME;",
    "CREATE TABLE X AS SELECT ID, COUNT(*) AS N FROM S WINDOW HOPPING (SIZE 1 MINUTE, "
    "ADVANCE BY 10 SECONDS) GROUP BY ID;",
    "CREATE STREAM X AS SELECT S.ID AS ID, V, T.NAME AS N FROM S LEFT JOIN T ON S.ID = T.ID;",
    "CREATE STREAM X AS SELECT S.ID, S.V FROM S JOIN S2 WITHIN 1 MINUTE ON S.ID = S2.ID;",
    "CREATE STREAM X AS SELECT * FROM S FULL OUTER JOIN S2 WITHIN (1 SECOND, 2 SECONDS) "
    "GRACE PERIOD 3 SECONDS ON S.ID = S2.ID;",
    "CREATE TABLE X AS SELECT T.ID, N FROM T LEFT JOIN T2 ON T.ID = T2.ID;",
    "CREATE TABLE K2 (A INT PRIMARY KEY, B INT PRIMARY KEY, F INT) WITH (KAFKA_TOPIC='k2', "
    "FORMAT='JSON'); CREATE TABLE X AS SELECT A, B, NAME FROM K2 LEFT JOIN T ON F = T.ID;",
    "CREATE TABLE X AS SELECT S.ID, COUNT(*) AS N FROM S JOIN S2 WITHIN 1 MINUTE "
    "GRACE PERIOD 1 MINUTE ON S.ID = S2.ID GROUP BY S.ID HAVING COUNT(*) > 1;",
    "CREATE TABLE X AS SELECT S.NAME, COUNT(S2.V) AS N FROM S FULL JOIN S2 WITHIN 1 MINUTE "
    "ON S.ID = S2.ID JOIN T ON S.ID = T.ID WINDOW HOPPING (SIZE 1 MINUTE, ADVANCE BY 10 SECONDS) "
    "GROUP BY S.NAME;",
    "CREATE TABLE X AS SELECT T.NAME, COUNT(*) AS N FROM S JOIN T ON S.ID = T.ID JOIN S2 "
    "WITHIN 1 MINUTE ON S.ID = S2.ID GROUP BY T.NAME;",
    "CREATE STREAM X AS SELECT S.ID, EXPLODE(ARRAY[S.V, S2.V]) AS E, T.NAME FROM S JOIN S2 "
    "WITHIN 1 MINUTE ON S.ID = S2.ID JOIN T ON S.ID = T.ID;",
    "CREATE TABLE X AS SELECT S.ID, COUNT(*) AS N, COLLECT_LIST(TRANSFORM(ARRAY[NAME], X1 => UCASE(X1))) "
    "AS L FROM S JOIN S2 WITHIN 1 MINUTE ON S.ID = S2.ID GROUP BY S.ID;",
    "CREATE TABLE X AS SELECT T.ID, COUNT(*) AS N FROM T JOIN T2 ON T.ID = T2.ID GROUP BY T.ID;",
    "CREATE TABLE X AS SELECT NAME, COUNT(*) AS N FROM S WINDOW TUMBLING (SIZE 1 MINUTE) "
    "GROUP BY NAME EMIT FINAL;",
    "CREATE STREAM X AS SELECT ID, V FROM S; INSERT INTO X SELECT ID, V FROM S2;",
    "CREATE TABLE X AS SELECT ID, COUNT(*) AS N FROM S GROUP BY ID HAVING COUNT(*) > 1;",
    "CREATE TABLE X AS SELECT NAME, COUNT(*) AS N, COLLECT_LIST(ID) AS I FROM T GROUP BY NAME;",
    "CREATE TABLE X AS SELECT ID, COUNT(*) AS N FROM S WINDOW SESSION (1 MINUTE) GROUP BY ID;",
    "CREATE TABLE X AS SELECT NAME, COUNT(*) AS N FROM S WINDOW SESSION (1 MINUTE) "
    "GROUP BY NAME EMIT FINAL;",
    "CREATE TABLE X AS SELECT ID, MAX(V) AS M FROM S WINDOW SESSION (30 SECONDS, "
    "GRACE PERIOD 1 MINUTE) GROUP BY ID;",
    WINDOWED + "CREATE STREAM X AS SELECT ID, V, WINDOWSTART AS WS, WINDOWEND AS WE FROM W;",
    WINDOWED + "CREATE STREAM X AS SELECT * FROM H WHERE WINDOWSTART > 1000;",
])
def test_supported_queries_are_accepted(statement: str) -> None:
    assert outcome(statement) is None


def test_a_lambda_parameter_named_as_a_column_is_refused_and_another_is_the_parameter() -> None:
    """As ksqlDB's AstSanitizer: a parameter named as a column of any source the query reads
    is refused; one named otherwise is bound in its body over a join too."""
    results, _image = run_script(BASE + "CREATE TABLE X AS SELECT S.ID, COLLECT_LIST(TRANSFORM("
                                 "ARRAY[NAME], NAME => UCASE(NAME))) AS L FROM S JOIN S2 WITHIN "
                                 "1 MINUTE ON S.ID = S2.ID GROUP BY S.ID;")
    assert not results[-1].ok
    assert results[-1].message == "Lambda function argument can't be a column name: NAME"
    results, image = run_script(BASE + "CREATE TABLE X AS SELECT S.ID, COLLECT_LIST(TRANSFORM("
                                "ARRAY[NAME], X1 => UCASE(X1))) AS L FROM S JOIN S2 WITHIN "
                                "1 MINUTE ON S.ID = S2.ID GROUP BY S.ID;")
    assert all(r.ok for r in results)
    [query] = image.queries.values()
    plan = compile_query(query, image)
    sql = plan.sql + (plan.batch.source_sql if plan.batch is not None else "")
    assert "TRANSFORM(ARRAY(`S`.`NAME`), `X1` -> UPPER(`X1`))" in sql


@pytest.mark.parametrize(("statement", "reason"), [
    ("CREATE TABLE X AS SELECT S.ID, COUNT(*) AS N FROM S LEFT JOIN S2 WITHIN 1 MINUTE "
     "GRACE PERIOD 1 MINUTE ON S.ID = S2.ID GROUP BY S.ID;",
     "aggregating an outer stream-stream join with a GRACE PERIOD"),
    ("CREATE TABLE X AS SELECT S.ID, COUNT(*) AS N FROM S JOIN S2 WITHIN 1 MINUTE "
     "ON S.ID = S2.ID LEFT JOIN A WITHIN 1 MINUTE ON S.ID = A.ID GROUP BY S.ID;",
     "or with another stream-stream join"),
    ("CREATE TABLE X AS SELECT S.ID, COUNT(*) AS N FROM S JOIN S2 WITHIN 1 MINUTE "
     "ON S.ID = S2.ID WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY S.ID EMIT FINAL;",
     "EMIT FINAL over a stream-stream join is not supported"),
    ("CREATE TABLE X AS SELECT S.ID, COUNT(*) AS N FROM S JOIN T ON S.ID = T.ID "
     "WINDOW SESSION (1 MINUTE) GROUP BY S.ID;", "SESSION windows over a join are not supported"),
    ("CREATE STREAM X AS SELECT ID, TO_BYTES(NAME, NAME) AS M FROM S;",
     "TO_BYTES needs a literal encoding"),
    (WINDOWED + "CREATE TABLE X AS SELECT V, COUNT(*) AS N FROM H GROUP BY V;",
     "aggregating a windowed source (H) is not supported"),
    (WINDOWED + "CREATE STREAM X AS SELECT * FROM W PARTITION BY V;",
     "PARTITION BY over a windowed source (W) is not supported"),
])
def test_unsupported_queries_are_refused_before_they_are_written(statement: str,
                                                                  reason: str) -> None:
    message = outcome(statement)
    assert message is not None and message.startswith(
        "The Spark runtime cannot run this query: ") and reason in message, message


@pytest.mark.parametrize("statement", [
    "CREATE STREAM X AS SELECT ID, V FROM A;",
    "CREATE STREAM X WITH (VALUE_FORMAT='AVRO') AS SELECT ID, V FROM S;",
    "CREATE STREAM X WITH (FORMAT='PROTOBUF') AS SELECT ID, V FROM A;",
    "CREATE STREAM X WITH (VALUE_FORMAT='JSON_SR') AS SELECT ID, V FROM A;",
])
def test_the_schema_registry_formats_are_read_and_written(statement: str) -> None:
    assert outcome(statement) is None


def test_windowed_streams_join_in_their_windows() -> None:
    assert outcome(WINDOWED + "CREATE STREAM W2 (ID INT KEY, U INT) WITH (KAFKA_TOPIC='w2', "
                   "VALUE_FORMAT='JSON', WINDOW_TYPE='SESSION');"
                   "CREATE STREAM X AS SELECT W.ID, W.V, W2.U FROM W JOIN W2 WITHIN 1 MINUTE "
                   "ON W.ID = W2.ID;") is None


def test_drop_terminates_the_sinks_query_but_not_insert_queries_into_it() -> None:
    results, image = run_script(BASE + "CREATE STREAM X AS SELECT ID, V FROM S;"
                                       "INSERT INTO X SELECT ID, V FROM S2; DROP STREAM X;")
    assert results[-1].ok is False
    assert ("The following queries write into this source: [INSERTQUERY_6].\nYou need to "
            "terminate them before dropping X." in results[-1].message)
    results, image = run_script(BASE + "CREATE STREAM X AS SELECT ID, V FROM S; DROP STREAM X;")
    assert all(r.ok for r in results) and image.queries == {}


@pytest.mark.parametrize(("statement", "message"), [
    ("CREATE TABLE X AS SELECT NAME, MIN(ID) AS L, COUNT(*) AS N, MAX(ID) AS H FROM T "
     "GROUP BY NAME;", "The aggregation functions MIN and MAX cannot be applied to a table "
     "source, only to a stream source."),
    ("CREATE TABLE X AS SELECT NAME, LATEST_BY_OFFSET(ID) AS L FROM T GROUP BY NAME;",
     "The aggregation function LATEST_BY_OFFSET cannot be applied to a table source"),
    ("CREATE TABLE X AS SELECT NAME, COUNT(*) AS N FROM T GROUP BY NAME HAVING MAX(ID) > 3;",
     "The aggregation function MAX cannot be applied to a table source"),
    ("CREATE TABLE X AS SELECT NAME, COUNT(*) AS N FROM T WINDOW TUMBLING (SIZE 1 MINUTE) "
     "GROUP BY NAME;", "Windowing not supported for table aggregations."),
])
def test_a_table_aggregates_only_unwindowed_with_functions_that_can_undo(
        statement: str, message: str) -> None:
    found = outcome(statement)
    assert found is not None and message in found, found
