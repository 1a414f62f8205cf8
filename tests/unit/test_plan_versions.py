"""What the planner writes is versioned: a stored plan is what every node runs, so a release
that plans any of ksqlDB's dev cases differently must say so with a new planner version and save
that version's plans (``python -m integration.plans save``), keeping the older ones, which the
suite replays (``tests/query_tests/test_historical_plans.py``)."""

from __future__ import annotations

import json

from integration.plans import (
    changed,
    saved_cases,
    saved_file,
    saved_versions,
    shape_sample,
    upgrade_fixture,
    versions_file,
)
from metastore.planner.plan_format import NODE_VERSIONS, PLANNER_VERSION

SAVE = "run python -m integration.plans save"


def test_the_planner_writes_the_plans_its_version_saved() -> None:
    saved = json.loads(versions_file().read_text(encoding="utf-8"))
    assert saved == {"planner": PLANNER_VERSION, "nodes": dict(NODE_VERSIONS)}, (
        f"node versions changed: bump PLANNER_VERSION and {SAVE}")
    planned, differ = changed()
    assert planned >= 800, f"only {planned} saved cases planned offline"
    assert not differ, (
        f"{len(differ)} dev cases plan differently from planner version {PLANNER_VERSION}: bump "
        "PLANNER_VERSION (and the versions of the nodes whose meaning changed) and "
        f"{SAVE}; first: {differ[:5]}")


def test_every_planner_version_keeps_its_saved_plans_and_its_upgrade_fixture() -> None:
    assert saved_versions() == list(range(1, PLANNER_VERSION + 1))
    for version in saved_versions():
        assert saved_file(version).is_file() and upgrade_fixture(version).is_file()
        cases = saved_cases(version)
        assert len(cases) >= 800, f"version {version} keeps {len(cases)} cases"
        assert all(case["plans"] and case["outputs"] is not None for case in cases)


def test_the_sample_the_suite_replays_covers_every_plan_shape_and_format() -> None:
    cases = saved_cases()
    sample = shape_sample(cases)
    assert 15 <= len(sample) <= 60, len(sample)
    assert shape_sample(sample) == sample, "no case the others cover"
    assert sample == shape_sample(cases), "the same cases every run"
    formats = {name for case in cases for name in case["formats"]}
    assert formats >= {"AVRO", "PROTOBUF", "JSON_SR", "JSON", "DELIMITED", "KAFKA"}
    assert {name for case in sample for name in case["formats"]} == formats
    used = {name for case in cases for text in case["plans"]
            for name in json.loads(text)["versions"]}
    assert used == {name for case in sample for text in case["plans"]
                    for name in json.loads(text)["versions"]} == set(NODE_VERSIONS), (
        "every plan node, in the saved plans and in the sample")
