"""Which stateful queries keep their state as keyed state in the checkpoint, reading no topic
in batch at any micro-batch, and which keyed operators hold it; the plan of a checkpoint from
before that state (``stream_state=False``, and ``table_state=False`` for tables) replays a topic
instead."""

from __future__ import annotations

import pytest

from metastore.planner.plan import compile_query
from metastore.planner.steps import (
    FinalSessions,
    FinalWindows,
    QueryPlan,
    SessionMembers,
    Step,
    StreamTime,
    TableSideJoin,
    UnmatchedRecords,
)
from metastore.testing.check import run_script

SOURCES = (
    "CREATE STREAM S (ID INT KEY, USER_ID INT, V INT) WITH (kafka_topic='s', value_format='JSON');"
    "CREATE STREAM R (ID INT KEY, W INT) WITH (kafka_topic='r', value_format='JSON');"
    "CREATE TABLE U (ID INT PRIMARY KEY, REGION STRING) WITH (kafka_topic='u', "
    "value_format='JSON');")

SHAPES = {
    "session window": (
        "CREATE TABLE T AS SELECT ID, COUNT(*) AS N FROM S WINDOW SESSION (30 SECONDS) "
        "WHERE V > 0 GROUP BY ID;", {StreamTime, SessionMembers}),
    "emit final, session window": (
        "CREATE TABLE T AS SELECT ID, COUNT(*) AS N FROM S WINDOW SESSION (30 SECONDS) "
        "WHERE V > 0 GROUP BY ID EMIT FINAL;", {FinalSessions}),
    "emit final, hopping": (
        "CREATE TABLE T AS SELECT ID, SUM(V) AS N FROM S WINDOW HOPPING (SIZE 10 SECONDS, "
        "ADVANCE BY 5 SECONDS) GROUP BY ID EMIT FINAL;", {FinalWindows}),
    "emit final over a stream-table join": (
        "CREATE TABLE T AS SELECT U.REGION AS REGION, COUNT(*) AS N FROM S JOIN U ON "
        "S.USER_ID = U.ID WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY U.REGION EMIT FINAL;",
        {TableSideJoin, FinalWindows}),
    "left join of streams without grace": (
        "CREATE STREAM T AS SELECT S.ID AS ID, V, W FROM S LEFT JOIN R WITHIN 1 MINUTE "
        "ON S.ID = R.ID;", {UnmatchedRecords}),
    "full join of streams without grace": (
        "CREATE STREAM T AS SELECT ROWKEY AS K, V, W FROM S FULL JOIN R WITHIN 1 MINUTE "
        "ON S.ID = R.ID;", {UnmatchedRecords}),
}


def _plans(statement: str) -> tuple[QueryPlan, QueryPlan]:
    results, image = run_script(SOURCES + statement)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    query = next(iter(image.queries.values()))
    return compile_query(query, image), compile_query(query, image, table_state=False,
                                                      stream_state=False)


def _steps(plan: QueryPlan) -> list[Step]:
    return [*plan.steps, *(plan.batch.steps if plan.batch is not None else ())]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_state_is_keyed_and_no_topic_is_read_in_batch(shape: str) -> None:
    statement, operators = SHAPES[shape]
    keyed, earlier = _plans(statement)
    assert keyed.stream_state and keyed.table_state == (TableSideJoin in operators)
    assert {type(step.keyed) for step in _steps(keyed) if step.keyed is not None} == operators
    assert [step.view for step in _steps(keyed) if step.topic and not step.streaming] == []
    assert not earlier.table_state and not earlier.stream_state
    assert any(step.topic and not step.streaming for step in _steps(earlier)), \
        "a checkpoint from before keyed state keeps the plan that reads a topic in batch"


def test_a_checkpoint_with_keyed_tables_only_keeps_replaying_its_streams() -> None:
    """An outer join of streams without GRACE PERIOD and a table after it: a checkpoint that
    started with its table as keyed state, before the unmatched records were, keeps the plan
    that re-reads the other stream (Spark resumes a checkpoint only with the same operators)."""
    results, image = run_script(SOURCES + (
        "CREATE STREAM T AS SELECT S.USER_ID AS USER_ID, V, W, REGION FROM S LEFT JOIN R "
        "WITHIN 1 MINUTE ON S.ID = R.ID JOIN U ON S.USER_ID = U.ID;"))
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    query = next(iter(image.queries.values()))
    now = compile_query(query, image)
    assert {type(step.keyed) for step in _steps(now) if step.keyed} == {
        UnmatchedRecords, TableSideJoin}
    assert now.table_state and now.stream_state
    tables_only = compile_query(query, image, stream_state=False)
    assert {type(step.keyed) for step in _steps(tables_only) if step.keyed} == {TableSideJoin}
    assert tables_only.table_state and not tables_only.stream_state
    assert any(step.topic and not step.streaming for step in _steps(tables_only))


@pytest.mark.parametrize("tables", [1, 2])
def test_tables_joined_before_a_stream_join_are_keyed_state_over_the_first_stream(
        tables: int) -> None:
    """``s JOIN u [JOIN u2] JOIN r WITHIN ...``: each table is a keyed join over the first
    stream's records, whose view, not the stream's read, carries the stream-stream join's
    watermark; the later join reads a table's column there. A checkpoint from before keyed
    table state keeps reading every version of the tables' rows in batch."""
    second = " JOIN U2 ON S.USER_ID = U2.ID" if tables == 2 else ""
    results, image = run_script(SOURCES + (
        "CREATE TABLE U2 (ID INT PRIMARY KEY, SCORE INT) WITH (kafka_topic='u2', "
        "value_format='JSON');"
        "CREATE STREAM T AS SELECT R.ID AS ID, V, W, U.REGION AS REGION FROM S JOIN U ON "
        f"S.USER_ID = U.ID{second} JOIN R WITHIN 1 MINUTE ON U.ID = R.ID;"))
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    query = next(iter(image.queries.values()))
    plan = compile_query(query, image)
    assert [type(step.keyed) for step in _steps(plan) if step.keyed] == [TableSideJoin] * tables
    assert [step.view for step in _steps(plan) if step.topic and not step.streaming] == []
    watermarked = {step.view.removeprefix("q_csas_t_4_") for step in plan.steps
                   if step.watermark_ms is not None}
    assert watermarked == {"tables_joined", f"{tables + 1}_decoded"}, \
        "R's read and S's joined records"
    assert plan.batch is not None and "`S`.`__MS_J1_ID`) = (`R`.`ID`)" in \
        plan.batch.source_sql, "the stream join's ON reads the table's column from the view"
    earlier = compile_query(query, image, table_state=False)
    assert not earlier.table_state
    assert any(step.topic == "u" and not step.streaming for step in _steps(earlier))


def test_a_later_joins_unqualified_table_column_reads_the_joined_records() -> None:
    """``... JOIN r WITHIN ... ON SCORE = r.W``: SCORE is the table's alone (ksqlDB refuses an
    unqualified name two sources have), read from the first stream's joined records, as the
    table's LATERAL VIEW comes after the JOIN."""
    results, image = run_script(SOURCES + (
        "CREATE TABLE U2 (ID INT PRIMARY KEY, SCORE INT) WITH (kafka_topic='u2', "
        "value_format='JSON');"
        "CREATE STREAM T AS SELECT S.ID AS ID, V, W FROM S JOIN U2 ON S.USER_ID = U2.ID "
        "JOIN R WITHIN 1 MINUTE ON SCORE = R.W;"))
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    plan = compile_query(next(iter(image.queries.values())), image)
    assert plan.batch is not None and "(`S`.`__MS_J1_SCORE`) = (`R`.`W`)" in \
        plan.batch.source_sql
