"""What the planner writes is versioned: a stored plan is what every node runs, so a release
that plans any of ksqlDB's dev cases differently must say so with a new planner version and save
that version's plans (``python -m integration.plans save``), keeping the older ones."""

from __future__ import annotations

import json

from integration.plans import PLANS_DIR, case_digests, changed, digests_file, upgrade_fixture
from metastore.planner.plan_format import NODE_VERSIONS, PLANNER_VERSION


def test_the_planner_writes_the_plans_its_version_saved() -> None:
    saved = json.loads(digests_file().read_text(encoding="utf-8"))
    assert saved["planner"] == PLANNER_VERSION
    assert saved["nodes"] == dict(NODE_VERSIONS), (
        "node versions changed: bump PLANNER_VERSION and run python -m integration.plans save")
    now = case_digests()
    assert len(now) >= 850, f"only {len(now)} dev cases planned"
    differ = changed(saved["cases"], now)
    assert not differ, (
        f"{len(differ)} dev cases plan differently from planner version {PLANNER_VERSION}: bump "
        "PLANNER_VERSION (and the versions of the nodes whose meaning changed) and run "
        f"python -m integration.plans save; first: {differ[:5]}")


def test_every_planner_version_keeps_its_saved_plans_and_its_upgrade_fixture() -> None:
    kept = sorted(int(path.name) for path in PLANS_DIR.iterdir() if path.is_dir())
    assert kept == list(range(1, PLANNER_VERSION + 1))
    for version in kept:
        assert digests_file(version).is_file() and upgrade_fixture(version).is_file()


def test_a_changed_missing_or_new_plan_is_named() -> None:
    saved = {"1:a": ["x"], "2:b": ["y"], "3:c": ["z"]}
    assert changed(saved, {"1:a": ["x"], "2:b": ["y2"], "4:d": ["w"]}) == ["2:b", "3:c", "4:d"]
    assert changed(saved, dict(saved)) == []
