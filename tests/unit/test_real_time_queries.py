"""Real-time mode (``metastore.query.real.time``): the settings a query is written with,
validation refusing what Spark's real-time mode cannot run (nothing written), and the task
slots a node's real-time queries hold."""

from __future__ import annotations

import os
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, cast

import pytest

from metastore.engine import overrides
from metastore.engine.overrides import ConfigError
from metastore.kafka.exceptions import MissingSourceTopicError
from metastore.planner import plan as plan_module
from metastore.planner import real_time
from metastore.planner.exceptions import RealTimeSlotsError
from metastore.runtime.error_types import UNKNOWN, USER, ErrorClassifier
from metastore.runtime.query_health import QueryHealth, RetrySettings
from metastore.runtime.real_time_slots import RealTimeSlots, task_slots
from metastore.testing.check import run_script

SOURCES = ("CREATE STREAM S (ID INT KEY, N STRING, KEEP BOOLEAN) WITH (KAFKA_TOPIC='s', "
           "VALUE_FORMAT='JSON', PARTITIONS=2);"
           "CREATE STREAM S2 (ID INT KEY, M STRING) WITH (KAFKA_TOPIC='s2', "
           "VALUE_FORMAT='JSON', PARTITIONS=2);"
           "CREATE TABLE T (ID INT PRIMARY KEY, NAME STRING) WITH (KAFKA_TOPIC='t', "
           "VALUE_FORMAT='JSON', PARTITIONS=2);")
REAL_TIME = {"metastore.query.real.time": "true"}


def _run(statement: str, properties: dict[str, Any]) -> tuple[bool, str, dict[str, str]]:
    """Whether ``statement`` after the sources was accepted, its error, its query's settings."""
    results, image = run_script(SOURCES + statement, config=overrides.resolve(properties))
    last = results[-1]
    configs = [dict(query.config) for query in image.queries.values()]
    return last.ok, last.message or "", configs[0] if configs else {}


def test_a_stateless_query_is_written_with_its_real_time_settings() -> None:
    ok, _, config = _run("CREATE STREAM O AS SELECT ID, CAST(N AS INT) AS X FROM S WHERE KEEP;",
                         REAL_TIME)
    assert ok
    assert config[overrides.REAL_TIME] == "true"
    assert overrides.real_time_batch_ms(config) == 5_000
    _, _, config = _run("CREATE STREAM O AS SELECT * FROM S;",
                        {**REAL_TIME, "metastore.query.real.time.batch.ms": "30000"})
    assert overrides.real_time_batch_ms(config) == 30_000
    _, _, config = _run("CREATE STREAM O AS SELECT * FROM S;",
                        {"metastore.query.real.time.batch.ms": "30000"})
    assert overrides.real_time_batch_ms(config) is None, "micro-batches unless asked"
    assert overrides.REAL_TIME_BATCH_MS not in config


@pytest.mark.parametrize("value", ["4999", "3600001", "five", "-1", True])
def test_a_batch_length_out_of_range_is_refused(value: object) -> None:
    with pytest.raises(ConfigError, match=r"Invalid value .* for configuration "
                                          r"metastore\.query\.real\.time\.batch\.ms: Expected "
                                          r"milliseconds from 5000 to 3600000"):
        overrides.resolve({"metastore.query.real.time.batch.ms": value})


@pytest.mark.parametrize(("statement", "reason"), [
    ("CREATE TABLE C AS SELECT ID, COUNT(*) AS N FROM S GROUP BY ID;", "aggregates"),
    ("CREATE TABLE C AS SELECT ID, COUNT(*) AS N FROM S WINDOW SESSION (5 SECONDS) GROUP BY ID;",
     "aggregates"),
    ("CREATE TABLE C AS SELECT ID, COUNT(*) AS N FROM S WINDOW TUMBLING (SIZE 1 MINUTE) "
     "GROUP BY ID EMIT FINAL;", "aggregates"),
    ("CREATE STREAM J AS SELECT S.ID, NAME FROM S JOIN T ON S.ID = T.ID;", "joins"),
    ("CREATE STREAM J AS SELECT S.ID, M FROM S JOIN S2 WITHIN 1 MINUTE ON S.ID = S2.ID;",
     "joins"),
    ("CREATE TABLE U AS SELECT * FROM T WHERE NAME = 'x';", "reads a table"),
])
def test_a_stateful_query_is_refused_in_real_time_mode(statement: str, reason: str) -> None:
    ok, message, config = _run(statement, REAL_TIME)
    assert not ok and not config, "nothing written"
    assert message == ("The Spark runtime cannot run this query: metastore.query.real.time "
                       f"runs stateless queries only, and this one {reason}.")
    assert _run(statement, {})[0], "accepted in micro-batches"


@pytest.mark.parametrize("statement", [
    "CREATE STREAM O AS SELECT ID, EXPLODE(ARRAY[1, 2]) AS X FROM S;",
    "CREATE STREAM O AS SELECT ID, N FROM S PARTITION BY N;",
    "CREATE STREAM O AS SELECT * FROM S; INSERT INTO O SELECT * FROM S WHERE KEEP;",
])
def test_stateless_shapes_are_accepted_in_real_time_mode(statement: str) -> None:
    results, image = run_script(SOURCES + statement, config=overrides.resolve(REAL_TIME))
    assert all(result.ok for result in results), [r.message for r in results if not r.ok]
    assert all(overrides.real_time_batch_ms(dict(q.config)) == 5_000
               for q in image.queries.values())


def test_the_plan_backstops_a_stateful_step_the_query_does_not_show() -> None:
    _, image = run_script(SOURCES + "CREATE STREAM O AS SELECT * FROM S;",
                          config=overrides.resolve(REAL_TIME))
    [query] = image.queries.values()
    plan, analysis = plan_module.compiled_query(query, image)
    assert real_time.check(plan, analysis, dict(query.config)) is None
    watermarked = replace(plan, steps=tuple(replace(step, watermark_ms=1_000)
                                            for step in plan.steps))
    assert real_time.check(watermarked, analysis, dict(query.config)) == (
        "metastore.query.real.time runs stateless queries only, and this one keeps state "
        "between records")
    assert real_time.check(replace(plan, output_mode="update"), analysis, {}) is None, (
        "a query in micro-batches is not checked")


def test_an_exactly_once_query_is_refused_in_real_time_mode() -> None:
    ok, message, _ = _run("CREATE STREAM O AS SELECT * FROM S;",
                          {**REAL_TIME, "processing.guarantee": "exactly_once_v2"})
    assert not ok
    assert message.endswith("metastore.query.real.time needs processing.guarantee "
                            "at_least_once (the request's, or else the node's default): "
                            "real-time batches are not written in transactions.")


@pytest.mark.parametrize(("master", "task_cpus", "slots"), [
    ("local", "1", 1), ("local[1]", "1", 1), ("local[3]", "1", 3), ("local[3]", "2", 1),
    ("local[2, 4]", "1", 2), ("local[*]", "1", os.cpu_count() or 1),
    ("spark://h:7077", "1", 6), ("spark://h:7077", "2", 3)])
def test_the_task_slots_of_a_nodes_spark(master: str, task_cpus: str, slots: int) -> None:
    conf = {"spark.task.cpus": task_cpus}
    context = SimpleNamespace(master=master, defaultParallelism=6,
                              getConf=lambda: SimpleNamespace(get=conf.get))
    assert task_slots(cast(Any, SimpleNamespace(sparkContext=context))) == slots


def test_real_time_queries_hold_a_slot_per_partition_beside_one_kept() -> None:
    slots = RealTimeSlots()
    with pytest.raises(RealTimeSlotsError) as refused:
        slots.take("CSAS_A_1", 1, slots=1)
    assert (refused.value.needed, refused.value.free, refused.value.slots) == (1, 0, 1)
    assert refused.value.user_error and MissingSourceTopicError("t").user_error
    assert ErrorClassifier().classify(str(refused.value)) == UNKNOWN, "by its type, not its text"
    health = QueryHealth(RetrySettings(), ErrorClassifier())
    health.failed(str(refused.value), user=refused.value.user_error)
    assert [error["type"] for error in health.errors] == [USER]
    slots.take("CSAS_A_1", 2, slots=4)
    with pytest.raises(RealTimeSlotsError, match="CSAS_B_2 reads 2 source partitions and needs "
                                                 "a task slot for each, the node's Spark has 4, "
                                                 "of which 1 are free"):
        slots.take("CSAS_B_2", 2, slots=4)
    slots.take("CSAS_A_1", 3, slots=4)  # a restart gives its own slots back first
    assert slots.held() == 3
    slots.give_back("CSAS_A_1")
    slots.take("CSAS_B_2", 2, slots=4)
    assert slots.held() == 2
