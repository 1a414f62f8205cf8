"""A persistent query's plan is fixed when its command is written: the command keeps the plan's
versioned document, every node reads the same plan from the log and its checkpoints, and the
runtime runs that plan rather than what its own release would compile from the SQL."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from metastore.catalog import commands as cmd
from metastore.catalog.image import Image
from metastore.catalog.model import PersistentQuery
from metastore.checkpoint import codec
from metastore.engine.validation import Validator, Write
from metastore.log.record import CommandRecord, decode
from metastore.log.state import ReplicaState
from metastore.planner import plan as plan_module
from metastore.planner.exceptions import QueryRuntimeError, UnsupportedByRuntimeError
from metastore.planner.plan import compile_query, plan_of, stored_plan
from metastore.planner.plan_format import (
    NODE_VERSIONS,
    PlanFormatError,
    UnknownPlanVersionError,
    plan_text,
    read_plan,
)
from metastore.planner.support import check_runtime
from metastore.sql.parser import parse
from metastore.testing.check import AssumedTopics, run_script

SOURCES = (
    "CREATE STREAM S (ID INT KEY, USER_ID INT, V INT) WITH (kafka_topic='s', value_format='JSON');"
    "CREATE STREAM R (ID INT KEY, W INT) WITH (kafka_topic='r', value_format='JSON');"
    "CREATE TABLE U (ID INT PRIMARY KEY, REGION STRING) WITH (kafka_topic='u', "
    "value_format='JSON');")

QUERIES = {
    "filter": "CREATE STREAM T AS SELECT ID, V FROM S WHERE V > 1;",
    "windowed count": "CREATE TABLE T AS SELECT ID, COUNT(*) AS N FROM S "
                      "WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY ID;",
    "session window": "CREATE TABLE T AS SELECT ID, COUNT(*) AS N FROM S "
                      "WINDOW SESSION (30 SECONDS) GROUP BY ID;",
    "stream-table join": "CREATE STREAM T AS SELECT S.USER_ID AS UID, V, REGION FROM S "
                         "JOIN U ON S.USER_ID = U.ID;",
    "outer stream-stream join": "CREATE STREAM T AS SELECT S.ID AS ID, V, W FROM S "
                                "LEFT JOIN R WITHIN 1 MINUTE ON S.ID = R.ID;",
    "table aggregation": "CREATE TABLE T AS SELECT REGION, COUNT(*) AS N FROM U GROUP BY REGION;",
}


def _image(script: str) -> Image:
    results, image = run_script(SOURCES + script)
    assert all(result.ok for result in results), [r.message for r in results if not r.ok]
    return image


def _query(image: Image) -> PersistentQuery:
    [query] = image.queries.values()
    return query


@pytest.mark.parametrize("script", QUERIES.values(), ids=QUERIES.keys())
def test_a_query_keeps_the_plan_its_sql_compiled_to_when_it_was_written(script: str) -> None:
    image = _image(script)
    query = _query(image)
    assert query.plan, "the command carries the plan"
    assert read_plan(query.plan) == compile_query(query, image)
    assert plan_text(read_plan(query.plan)) == query.plan, "one text per plan"


def test_the_command_record_carries_the_plan_as_a_document_and_every_reader_gets_the_same() -> None:
    validator = Validator(_image(""), AssumedTopics({}), runtime_check=check_runtime,
                          planner=stored_plan)
    [statement] = parse(QUERIES["stream-table join"])
    outcome = validator.validate(statement)
    assert isinstance(outcome, Write)
    command = outcome.command
    assert isinstance(command, cmd.CreateAsSelectCommand) and command.plan
    encoded = cmd.to_json(command)
    assert encoded["plan"]["format"] == 1 and encoded["plan"]["plan"]["@"] == "QueryPlan"
    assert encoded["plan"]["versions"]["TableSideJoin"] == NODE_VERSIONS["TableSideJoin"]
    spaced = json.loads(json.dumps(encoded, indent=4))  # however a record is spaced
    assert cmd.from_json(spaced) == command


def test_checkpoints_and_fingerprints_hold_the_plan() -> None:
    image = _image(QUERIES["windowed count"])
    query = _query(image)
    restored = codec.decode(codec.encode(ReplicaState(image, {}, {}))).image
    assert restored.queries[query.query_id] == query
    assert restored.fingerprint == image.fingerprint
    unplanned = replace(image, queries={query.query_id: replace(query, plan="")})
    assert unplanned.fingerprint != image.fingerprint, "a plan is part of the catalog"


def test_insert_into_and_create_or_replace_keep_their_own_plans() -> None:
    image = _image("CREATE STREAM T AS SELECT ID, V FROM S;"
                   "CREATE OR REPLACE STREAM T AS SELECT ID, V FROM S WHERE V > 0;"
                   "INSERT INTO T SELECT ID, W AS V FROM R;")
    by_kind = {q.kind: q for q in image.queries.values()}
    assert set(by_kind) == {"CSAS", "INSERT"}
    assert "V > 0" in by_kind["CSAS"].sql, "replaced"
    for query in by_kind.values():  # the replaced query, the replacing statement's plan
        assert read_plan(query.plan) == compile_query(query, image)


def test_the_runtime_runs_the_stored_plan_not_what_its_release_compiles_from_the_sql() -> None:
    image = _image(QUERIES["filter"])
    query = _query(image)
    other = _query(_image("CREATE STREAM T AS SELECT ID, V FROM S WHERE V > 100;"))
    stored = replace(query, plan=other.plan)  # the SQL says V > 1, the plan V > 100
    ran = plan_of(stored, image)
    assert ran == replace(read_plan(other.plan), query_id=query.query_id)
    assert ran != compile_query(query, image)
    assert plan_of(replace(query, plan=""), image) == compile_query(query, image), (
        "a query written before plans were kept runs what its SQL compiles to")


def test_a_checkpoint_older_than_the_plans_keyed_state_runs_the_plan_of_its_state() -> None:
    image = _image(QUERIES["stream-table join"])
    query = _query(image)
    assert read_plan(query.plan).table_state
    assert plan_of(query, image, table_state=False) == compile_query(
        query, image, table_state=False)


def _document(query: PersistentQuery) -> dict[str, object]:
    document: dict[str, object] = json.loads(query.plan)
    return document


@pytest.mark.parametrize(("change", "named"), [
    (lambda d: d.update(format=2), "plan format 2"),
    (lambda d: d["versions"].update(Step=2), "Step v2"),
    (lambda d: d["versions"].update(ShuffledJoin=1), "ShuffledJoin v1"),
])
def test_a_plan_written_by_a_newer_release_is_refused_naming_what_it_does_not_know(
        change: object, named: str) -> None:
    document = _document(_query(_image(QUERIES["filter"])))
    change(document)  # type: ignore[operator]
    with pytest.raises(UnknownPlanVersionError) as refused:
        read_plan(json.dumps(document))
    assert refused.value.unknown == named
    assert named in str(refused.value)


@pytest.mark.parametrize(("change", "named"), [
    (lambda d: d.update(format=True), "plan format True"),
    (lambda d: d.update(format=1.0), "plan format 1.0"),
    (lambda d: d["versions"].update(Step=True), "Step vTrue"),
    (lambda d: d["versions"].update(Step=-5), "Step v-5"),
])
def test_a_version_that_is_not_a_known_whole_number_is_refused(change: object, named: str) -> None:
    document = _document(_query(_image(QUERIES["filter"])))
    change(document)  # type: ignore[operator]
    with pytest.raises(UnknownPlanVersionError) as refused:
        read_plan(json.dumps(document))
    assert refused.value.unknown == named


@pytest.mark.parametrize(("field", "value"), [
    ("steps", "abc"), ("steps", [{"@": "QueryPlan"}]), ("sql", 5), ("earliest", 1),
    ("batch", [1]), ("window_key_bytes", "8"),
])
def test_a_field_of_the_wrong_type_is_refused_before_anything_runs(field: str,
                                                                   value: object) -> None:
    document = _document(_query(_image(QUERIES["windowed count"])))
    plan = document["plan"]
    assert isinstance(plan, dict)
    plan[field] = value
    with pytest.raises(PlanFormatError, match="stored plan"):
        read_plan(json.dumps(document))


def test_a_paused_query_with_settings_and_a_plan_survives_a_checkpoint() -> None:
    image = _image("SET 'ksql.functions.collect_list.limit' = '3';" + QUERIES["windowed count"])
    query = replace(_query(image), paused=True, config=(("ksql.functions.collect_list.limit",
                                                        "3"),))
    paused = replace(image, queries={query.query_id: query})
    state = ReplicaState(paused, {}, {})
    assert codec.format_version(state) == 3, "a node that does not know plans refuses it"
    restored = codec.decode(codec.encode(state)).image
    assert restored.queries[query.query_id] == query
    assert restored.fingerprint == paused.fingerprint


def test_a_query_record_with_its_plan_is_a_version_an_older_node_refuses() -> None:
    image = _image(QUERIES["filter"])
    query = _query(image)
    planned = cmd.CreateAsSelectCommand(replace(image.sources["T"], query_id=None), "CSAS",
                                        query.sources, query.sql,
                                        plan=query.plan)
    assert json.loads(CommandRecord(planned, "x", "r").encode()[1])["version"] == 2
    unplanned = replace(planned, plan="")
    assert json.loads(CommandRecord(unplanned, "x", "r").encode()[1])["version"] == 1
    assert decode(CommandRecord(planned, "x", "r").encode()[1]).command == planned


@pytest.mark.parametrize("text", [
    "not json", "[]", '{"format": 1, "versions": {"QueryPlan": 1}, "plan": {"@": "Nope"}}',
    '{"format": 1, "versions": {"QueryPlan": 1}, "plan": {"@": "QueryPlan", "colour": 1}}',
    '{"format": 1, "versions": {"QueryPlan": 1}, "plan": {"@": "QueryPlan"}}',
    '{"format": 1, "versions": {}, "plan": {"@": "QueryPlan"}}',
])
def test_a_malformed_plan_is_refused_with_a_reason(text: str) -> None:
    with pytest.raises(PlanFormatError, match="stored plan"):
        read_plan(text)


def test_a_query_the_planner_cannot_plan_is_refused_as_a_statement_and_nothing_is_written(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> None:
        raise QueryRuntimeError("no plan for this shape")

    monkeypatch.setattr(plan_module, "compiled_query", broken)
    validator = Validator(_image(""), AssumedTopics({}), runtime_check=check_runtime,
                          planner=stored_plan)
    [statement] = parse(QUERIES["filter"])
    with pytest.raises(UnsupportedByRuntimeError, match="cannot be planned: no plan for this"):
        validator.validate(statement)
    assert "T" not in validator.image.sources


def test_a_plan_names_the_projects_sql_functions_it_calls_which_makes_it_a_newer_version() -> None:
    """A JSON source is read by ``json_fields`` and a KAFKA key by ``kafka_int``: the plan says
    so, as QueryPlan v4, which a node of a release without those functions refuses."""
    document = _document(_query(_image(QUERIES["filter"])))
    plan = document["plan"]
    assert isinstance(plan, dict) and isinstance(document["versions"], dict)
    assert plan["functions"] == ["json_fields", "kafka_int"]
    assert document["versions"]["QueryPlan"] == 4 == NODE_VERSIONS["QueryPlan"]
    assert read_plan(json.dumps(document)).functions == ("json_fields", "kafka_int")
    delimited = ("CREATE STREAM D (V STRING) WITH (kafka_topic='d', value_format='DELIMITED');"
                 "CREATE STREAM T AS SELECT V FROM D;")
    results, image = run_script(delimited)
    assert all(result.ok for result in results)
    assert "functions" not in json.loads(_query(image).plan)["plan"]


def test_a_plan_calling_a_function_this_node_does_not_have_is_refused_naming_it() -> None:
    document = _document(_query(_image(QUERIES["filter"])))
    plan = document["plan"]
    assert isinstance(plan, dict)
    plan["functions"] = ["json_fields", "json_sr_fields"]
    with pytest.raises(UnknownPlanVersionError) as refused:
        read_plan(json.dumps(document))
    assert refused.value.unknown == "the SQL functions json_sr_fields"


def test_a_users_string_that_names_a_function_adds_only_the_catalogs_own_names() -> None:
    query = ("CREATE STREAM T AS SELECT ID, 'metastore_functions.no_such(1) "
             "metastore_functions.kafka_double(x)' AS S FROM S;")
    plan = read_plan(_query(_image(query)).plan)
    assert plan.functions == ("json_fields", "kafka_double", "kafka_int")
