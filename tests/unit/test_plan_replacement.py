"""CREATE OR REPLACE compares the stored plans: the replacement must be able to go on from the
running query's checkpoint (its streaming reads, keyed state and kind of output), whatever
release wrote the running query's plan; a filter or a projection may change."""

from __future__ import annotations

from dataclasses import replace

import pytest

from metastore.catalog.exceptions import UpgradeError
from metastore.catalog.image import Image
from metastore.engine.validation import Validator, Write
from metastore.planner.plan import stored_plan
from metastore.planner.plan_format import plan_text, read_plan
from metastore.planner.replacement import check_replacement
from metastore.planner.steps import RowVersions, Step
from metastore.planner.support import check_runtime
from metastore.sql.parser import parse
from metastore.testing.check import AssumedTopics, run_script

SOURCES = ("CREATE STREAM S (ID INT KEY, V INT) WITH (kafka_topic='s', value_format='JSON');"
           "CREATE STREAM R (ID INT KEY, W INT) WITH (kafka_topic='r', value_format='JSON');")
COUNTS = "TABLE T AS SELECT ID, COUNT(*) AS N FROM S GROUP BY ID HAVING COUNT(*) > {};"
"""A stream aggregation: state ksqlDB's rules let a replacement keep."""


def _running(script: str) -> Image:
    results, image = run_script(SOURCES + script)
    assert all(result.ok for result in results), [r.message for r in results if not r.ok]
    return image


def _replace(image: Image, statement: str) -> Write:
    validator = Validator(image, AssumedTopics({"s": 1, "r": 1, "T": 1}),
                          runtime_check=check_runtime, planner=stored_plan)
    [parsed] = parse(statement)
    outcome = validator.validate(parsed)
    assert isinstance(outcome, Write)
    return outcome


def _with_running_plan(image: Image, text: str) -> Image:
    [query] = image.queries.values()
    return replace(image, queries={query.query_id: replace(query, plan=text)})


def test_a_replacement_that_changes_a_filter_goes_on_from_the_checkpoint() -> None:
    image = _running("CREATE " + COUNTS.format(0))
    outcome = _replace(image, "CREATE OR REPLACE " + COUNTS.format(1))
    assert "> (1)" in outcome.command.plan  # type: ignore[attr-defined]


def test_a_running_plan_whose_state_differs_refuses_the_replacement() -> None:
    image = _running("CREATE " + COUNTS.format(0))
    [query] = image.queries.values()
    running = read_plan(query.plan)
    kept_otherwise = replace(running, steps=(*running.steps, Step("older", keyed=RowVersions(
        "older_changes"))))
    with pytest.raises(UpgradeError, match=r"has the keyed state \['RowVersions\(\)'\], the "
                                           r"replacement's \[\]"):
        _replace(_with_running_plan(image, plan_text(kept_otherwise)),
                 "CREATE OR REPLACE " + COUNTS.format(1))
    with pytest.raises(UpgradeError, match="has the output mode append, the replacement's update"):
        _replace(_with_running_plan(image, plan_text(replace(running, output_mode="append"))),
                 "CREATE OR REPLACE " + COUNTS.format(1))


def test_a_running_plan_this_release_cannot_read_refuses_the_replacement() -> None:
    image = _running("CREATE STREAM T AS SELECT ID, V FROM S;")
    [query] = image.queries.values()
    newer = _with_running_plan(image, query.plan.replace('"format":1', '"format":2', 1))
    with pytest.raises(UpgradeError, match=r"Query is not upgradeable\. The query's stored plan "
                                           r"uses plan format 2"):
        _replace(newer, "CREATE OR REPLACE STREAM T AS SELECT ID, V FROM S WHERE V > 0;")


def test_what_a_checkpoint_holds_is_compared_and_named() -> None:
    image = _running("CREATE STREAM T AS SELECT ID, V FROM S;")
    [query] = image.queries.values()
    plan = read_plan(query.plan)
    check_replacement(plan, replace(plan, sql=plan.sql + " "), "T")  # the SQL may change
    other_reads = replace(plan, steps=tuple(replace(step, topic="r") if step.topic else step
                                            for step in plan.steps))
    with pytest.raises(UpgradeError, match=r"the streaming reads \['s'\], the replacement's "
                                           r"\['r'\]"):
        check_replacement(plan, other_reads, "T")
    with pytest.raises(UpgradeError, match="the output mode append, the replacement's update"):
        check_replacement(plan, replace(plan, output_mode="update"), "T")
    with pytest.raises(UpgradeError, match="table state False, the replacement's True"):
        check_replacement(plan, replace(plan, table_state=True), "T")
