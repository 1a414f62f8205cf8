"""The rows a query could not process: the plan's checks are written only into plans that have
some (a plan without any is the document an earlier release wrote and reads), and the runtime
counts each micro-batch's failed rows per query and hands their offsets to the processing log (a
join's rows themselves, which its observation carries)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metastore.catalog.image import Image
from metastore.planner.plan import compile_query
from metastore.planner.plan_format import PlanFormatError, plan_document, read_plan
from metastore.planner.record_checks import CARRIED, CARRIED_ROWS, FIRST
from metastore.planner.steps import QueryPlan
from metastore.runtime.processing_log import CarriedRows, FailedRows
from metastore.runtime.record_errors import RecordErrors
from metastore.testing.check import run_script

SOURCE = ("CREATE STREAM S (ID INT KEY, TXT STRING, N INT) WITH (KAFKA_TOPIC='s', "
          "VALUE_FORMAT='JSON', PARTITIONS=2);")


def _plan(select: str) -> QueryPlan:
    return _script_plan(SOURCE + f"CREATE STREAM T AS SELECT ID, {select} FROM S;")


def _script_plan(script: str) -> QueryPlan:
    """The plan of the one query ``script`` creates."""
    results, image = run_script(script)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    assert isinstance(image, Image)
    [query] = image.queries.values()
    return compile_query(query, image)


def test_a_plan_with_checks_is_query_plan_v2_and_one_without_is_the_v1_document() -> None:
    # a source read without the project's SQL functions (QueryPlan v4 names those it calls)
    source = ("CREATE STREAM S (ID STRING KEY, TXT STRING, N INT) WITH (KAFKA_TOPIC='s', "
              "VALUE_FORMAT='DELIMITED');")
    plain, checked = (_script_plan(f"{source}CREATE STREAM T AS SELECT ID, {select} FROM S;")
                      for select in ("UCASE(TXT) AS U", "CAST(TXT AS INT) AS X"))
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


def test_a_stream_table_join_is_checked_on_its_joined_view_and_its_failed_rows_carried() -> None:
    plan = _script_plan(
        SOURCE + "CREATE TABLE U (ID INT PRIMARY KEY, NAME STRING) WITH (KAFKA_TOPIC='u', "
        "VALUE_FORMAT='JSON', PARTITIONS=2);"
        "CREATE STREAM J AS SELECT S.ID, CAST(U.NAME AS INT) AS X FROM S JOIN U ON S.ID = U.ID "
        "WHERE N / N = 1;")
    checked = plan.checked
    assert checked is not None and checked.carried == CARRIED_ROWS and checked.reads == ()
    [joined] = [step for step in plan.steps if step.view == checked.view]
    assert joined.keyed is not None and joined.observed is not None, "observed on the join"
    assert [(c.logger, c.message) for c in checked.checks] == [
        ("Project", "Error processing INTEGER"),
        ("WhereFilter", "Error evaluating predicate ((S_N / S_N) = 1)")]
    assert "`__MS_J1_NAME`" in checked.checks[0].condition, "the table's column in the view"
    assert f"AS {CARRIED}0" in " ".join(joined.observed[1])
    assert plan_document(plan)["versions"]["CheckedRows"] == 2

    errors, reported = RecordErrors(), []
    errors.report_to(reported.append)
    query = plan.query_id
    errors.started(query, plan)
    record = '["x",1,0,0,5,1,"x",0,0,3,1]'
    errors.hear(_Progress(query, {joined.observed[0]: {
        "failed0": 1, "failed1": 0,  # no first-row metric on the carried path
        f"{CARRIED}0": [{"record": record, "cause": 'For input string: "x"'}],
        f"{CARRIED}1": []}}, []))
    assert errors.of(query) == 1
    [batch] = reported
    assert isinstance(batch, CarriedRows), "a join's rows are not read again from its topic"
    [entry] = [json.loads(text) for text in batch.entries(rows_include=True)]
    assert (entry["logger"], entry["message"]["recordProcessingError"]) == (
        f"processing.{query}.Project", {"errorMessage": "Error processing INTEGER",
                                        "record": record, "cause": ['For input string: "x"']})
    [hidden] = [json.loads(text) for text in batch.entries(rows_include=False)]
    assert hidden["message"]["recordProcessingError"]["record"] is None


def test_after_a_join_a_partition_by_is_over_the_joined_row_not_a_key_alone() -> None:
    checked = _script_plan(
        SOURCE + "CREATE TABLE U (ID INT PRIMARY KEY, NAME STRING) WITH (KAFKA_TOPIC='u', "
        "VALUE_FORMAT='JSON', PARTITIONS=2);"
        "CREATE STREAM P AS SELECT * FROM S JOIN U ON S.N = U.ID PARTITION BY S.ID / 0;").checked
    assert checked is not None
    [check] = checked.checks
    assert (check.logger, check.message, check.record) == (
        "PartitionBy", "Error computing new key from expression (S_ID / 0)", None), \
        "the join's key is U.ID: S.ID is a value of the joined row, named as ksqlDB names it"
    assert check.condition.startswith("NOT `__MS_NULL_VALUE` AND"), "no tombstone is joined"
