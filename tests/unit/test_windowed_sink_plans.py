"""A windowed sink is partitioned and ordered as Kafka Streams writes it: each record in the
partition of its key without the window (``WindowedStreamPartitioner``), and a time-windowed
aggregation's records of a micro-batch in time, then window, order (a record's windows by their
starts), through a stage that writes them from one task."""

from __future__ import annotations

import pytest

from metastore.jvm.classes import WINDOW_KEY_BYTES_CONFIG, WINDOWED_PARTITIONER_CLASS
from metastore.planner.plan import WINDOWED_RECORD_ORDER, compile_query
from metastore.planner.steps import QueryPlan
from metastore.runtime import job
from metastore.testing.check import run_script

SOURCE = ("CREATE STREAM S (ID STRING KEY, V INT) WITH (kafka_topic='s', value_format='JSON');"
          "CREATE STREAM W (ID STRING KEY, V INT) WITH (kafka_topic='w', value_format='JSON', "
          "WINDOW_TYPE='SESSION');")

SINKS = {
    "hopping": ("CREATE TABLE T AS SELECT ID, COUNT(*) AS N FROM S WINDOW HOPPING (SIZE 60 "
                "SECONDS, ADVANCE BY 20 SECONDS) GROUP BY ID HAVING COUNT(*) > 1;", 8),
    "tumbling, final": ("CREATE TABLE T AS SELECT ID, COUNT(*) AS N FROM S WINDOW TUMBLING "
                        "(SIZE 1 MINUTE) GROUP BY ID EMIT FINAL;", 8),
    "session": ("CREATE TABLE T AS SELECT ID, COUNT(*) AS N FROM S WINDOW SESSION (30 SECONDS) "
                "GROUP BY ID;", 16),
    "projection of a session-windowed stream": ("CREATE STREAM T AS SELECT * FROM W;", 16),
    "unwindowed": ("CREATE TABLE T AS SELECT ID, COUNT(*) AS N FROM S GROUP BY ID;", 0),
}


def _plan(statement: str) -> QueryPlan:
    results, image = run_script(SOURCE + statement)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    return compile_query(next(iter(image.queries.values())), image)


@pytest.mark.parametrize("shape", sorted(SINKS))
def test_a_windowed_key_is_partitioned_without_its_window(shape: str) -> None:
    statement, window_bytes = SINKS[shape]
    plan = _plan(statement)
    assert plan.window_key_bytes == window_bytes
    expected = {} if not window_bytes else {
        "kafka.partitioner.class": WINDOWED_PARTITIONER_CLASS,
        f"kafka.{WINDOW_KEY_BYTES_CONFIG}": str(window_bytes)}
    assert job.sink_partitioner(plan) == expected


def test_a_time_windowed_aggregation_writes_in_time_then_window_order() -> None:
    plan = _plan(SINKS["hopping"][0])
    assert plan.output_mode == "update" and plan.batch is not None
    # the streaming aggregation is the one a direct sink had: the state of its checkpoint fits
    assert plan.batch.source_sql.startswith("SELECT concat(") and "ORDER" not in (
        plan.batch.source_sql)
    assert plan.sql.endswith(f"DISTRIBUTE BY 'one task' SORT BY {WINDOWED_RECORD_ORDER}")


def test_an_unwindowed_aggregation_writes_straight_to_its_sink() -> None:
    plan = _plan(SINKS["unwindowed"][0])
    assert plan.output_mode == "update" and plan.batch is None
