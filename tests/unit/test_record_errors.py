"""The rows a query could not process: the plan's checks are written only into plans that have
some (a plan without any is the document an earlier release wrote and reads), and the runtime
counts each micro-batch's failed rows per query and hands their offsets to the processing log."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metastore.catalog.image import Image
from metastore.planner.plan import compile_query
from metastore.planner.plan_format import PlanFormatError, plan_document, read_plan
from metastore.planner.record_checks import FIRST
from metastore.planner.steps import QueryPlan
from metastore.runtime.processing_log import FailedRows
from metastore.runtime.record_errors import RecordErrors
from metastore.testing.check import run_script

SOURCE = ("CREATE STREAM S (ID INT KEY, TXT STRING, N INT) WITH (KAFKA_TOPIC='s', "
          "VALUE_FORMAT='JSON', PARTITIONS=2);")


def _plan(select: str) -> QueryPlan:
    results, image = run_script(SOURCE + f"CREATE STREAM T AS SELECT ID, {select} FROM S;")
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    assert isinstance(image, Image)
    [query] = image.queries.values()
    return compile_query(query, image)


def test_a_plan_with_checks_is_query_plan_v2_and_one_without_is_the_v1_document() -> None:
    plain, checked = _plan("UCASE(TXT) AS U"), _plan("CAST(TXT AS INT) AS X")
    assert plain.checked is None and checked.checked is not None
    plain_document, checked_document = plan_document(plain), plan_document(checked)
    assert plain_document["versions"]["QueryPlan"] == 1
    assert "checked" not in plain_document["plan"], "a field v1 does not know is not written"
    assert "CheckedRows" not in plain_document["versions"]
    assert checked_document["versions"]["QueryPlan"] == 2
    assert checked_document["versions"]["CheckedRows"] == 1
    assert checked_document["versions"]["RecordCheck"] == 1
    assert read_plan(json.dumps(checked_document)) == checked
    assert read_plan(json.dumps(plain_document)) == plain
    claimed_v1 = {**checked_document, "versions": {**checked_document["versions"],
                                                   "QueryPlan": 1}}
    with pytest.raises(PlanFormatError, match=r"gives QueryPlan v1 the unknown fields "
                                              r"\['checked'\]"):
        read_plan(json.dumps(claimed_v1))


class _Source:
    def __init__(self, start: str | None, end: str) -> None:
        self.startOffset, self.endOffset = start, end


class _Progress:
    def __init__(self, name: str, metrics: dict[str, Any], sources: list[_Source]) -> None:
        self.name, self.observedMetrics, self.sources = name, metrics, sources


def test_each_micro_batch_with_failed_rows_is_counted_and_handed_to_the_log_with_its_offsets(
        ) -> None:
    plan = _plan("CAST(TXT AS INT) AS X, N / N AS Y")
    assert plan.checked is not None and len(plan.checked.checks) == 2
    errors, reported = RecordErrors(), []
    errors.report_to(reported.append)
    errors.started("CSAS_T_1", plan)
    [name] = [step.observed[0] for step in plan.steps
              if step.observed is not None and step.view == plan.checked.view]
    sources = [_Source('{"s": {"0": 5, "1": 9}}', '{"s": {"0": 8, "1": 12}}')]
    errors.hear(_Progress("CSAS_T_1", {name: {"failed0": 2, "failed1": 0, FIRST: {
        "partition": 0, "offset": 6}}}, sources))
    errors.hear(_Progress("CSAS_T_1", {name: {"failed0": 0, "failed1": 0, FIRST: None}},
                          sources))
    assert errors.of("CSAS_T_1") == 2 and errors.total() == 2
    [batch] = reported
    assert isinstance(batch, FailedRows)
    assert (batch.query, batch.failed, dict(batch.start), dict(batch.end)) == (
        "CSAS_T_1", (2, 0), {0: 5, 1: 9}, {0: 8, 1: 12})
    assert [step.view for step in batch.steps] == list(plan.checked.reads)
    assert batch.steps[0].topic == "s", "the log reads the micro-batch's records again"
