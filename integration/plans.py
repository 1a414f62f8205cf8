"""The plans the planner writes for ksqlDB's dev cases, kept per planner version.

``python -m integration.plans save`` plans every case of ``ksql-records-dev.jsonl`` that
validates without a Schema Registry (with ksqlDB's test functions loaded, as ksqlDB's runner
has them) and writes, for :data:`~metastore.planner.plan_format.PLANNER_VERSION`, the SHA-256
of each query's plan document into ``tests/plans/<version>/digests.json`` beside the node
versions it was written with. ``python -m integration.plans check`` (and
``tests/unit/test_plan_versions.py``) plans them again and names the cases whose plan changed
(``sizes`` prints how large the plans are):
a release that changes what the planner writes must say so with a new version, because a
stored plan is what every node runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from integration.conformance.ksql_suite import TEST_FUNCTIONS
from integration.conformance.records_report import DEFAULT_RECORDS
from metastore.catalog.image import EMPTY_IMAGE
from metastore.core.exceptions import MetastoreError
from metastore.engine import overrides
from metastore.engine.validation import Validator, Write
from metastore.functions import extensions
from metastore.log.record import CommandRecord
from metastore.planner.plan import stored_plan
from metastore.planner.plan_format import NODE_VERSIONS, PLANNER_VERSION
from metastore.planner.support import check_runtime
from metastore.sql.parser import parse
from metastore.testing.cases import QueryTest, load
from metastore.testing.check import AssumedTopics
from metastore.testing.runner import PreexistingTopics

PLANS_DIR = Path(__file__).resolve().parents[1] / "tests" / "plans"


def digests_file(version: int = PLANNER_VERSION) -> Path:
    return PLANS_DIR / str(version) / "digests.json"


def case_digests(records: Path = DEFAULT_RECORDS) -> dict[str, list[str]]:
    """Each plannable case's plans, as SHA-256 digests of their documents in offset order, by
    ``<line>:<name>``."""
    return {key: [hashlib.sha256(plan.encode()).hexdigest() for plan in plans]
            for key, plans in case_plans(records).items()}


def case_plans(records: Path = DEFAULT_RECORDS) -> dict[str, list[str]]:
    """Each plannable case's plan documents, in offset order, by ``<line>:<name>``."""
    with _test_functions():
        return {f"{line}:{test.name}": plans for line, test in enumerate(load([records]))
                if (plans := _plans(test)) is not None}


def _plans(test: QueryTest) -> list[str] | None:
    try:
        statements = parse(test.script)
        validator = Validator(EMPTY_IMAGE, PreexistingTopics(test, statements),
                              runtime_check=check_runtime, planner=stored_plan,
                              config=overrides.resolve(test.properties, strict=False))
        for statement in statements:
            validator.validate(statement)
    except (MetastoreError, overrides.ConfigError):
        return None  # refused, or needs a registry: not a case the runtime runs offline
    queries = sorted(validator.image.queries.values(), key=lambda q: q.offset)
    return [q.plan for q in queries] or None


@contextmanager
def _test_functions() -> Iterator[None]:
    loaded_before = TEST_FUNCTIONS in extensions.loaded()
    extensions.load([TEST_FUNCTIONS])
    try:
        yield
    finally:
        if not loaded_before:
            extensions.unload(TEST_FUNCTIONS)


UPGRADE_SOURCE = ("CREATE STREAM SRC (K INT KEY, G INT) WITH (KAFKA_TOPIC='plan-src', "
                  "VALUE_FORMAT='JSON', PARTITIONS=1);")
"""The source of the upgrade fixture's query; its topic is renamed by the test that runs it."""
UPGRADE_QUERY = ("CREATE TABLE COUNTS WITH (KAFKA_TOPIC='plan-counts', PARTITIONS=1) AS "
                 "SELECT G, COUNT(*) AS N FROM SRC GROUP BY G;")
"""The upgrade fixture's query: an aggregation, whose state a takeover must carry."""


def upgrade_fixture(version: int = PLANNER_VERSION) -> Path:
    """The command record of :data:`UPGRADE_QUERY` with the plan ``version`` wrote, which
    later releases must go on running (``integration/test_plan_upgrade.py``)."""
    return PLANS_DIR / str(version) / "count-by-group.record.json"


def _upgrade_record() -> dict[str, object]:
    image = EMPTY_IMAGE
    validator = Validator(image, AssumedTopics({"plan-src": 1}), runtime_check=check_runtime,
                          planner=stored_plan)
    [source, query] = parse(UPGRADE_SOURCE + UPGRADE_QUERY)
    validator.validate(source)
    outcome = validator.validate(query)
    assert isinstance(outcome, Write)
    return CommandRecord(outcome.command, query.text, "planner-upgrade-fixture").to_json()


def changed(saved: dict[str, list[str]], now: dict[str, list[str]]) -> list[str]:
    """The cases whose plans differ, appeared or disappeared."""
    return sorted(key for key in saved.keys() | now.keys() if saved.get(key) != now.get(key))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m integration.plans", description=__doc__)
    parser.add_argument("action", choices=("save", "check", "sizes"))
    parser.add_argument("--records", type=Path, default=DEFAULT_RECORDS)
    args = parser.parse_args(argv)
    if args.action == "sizes":
        sizes = sorted(len(plan.encode()) for plans in case_plans(args.records).values()
                       for plan in plans)
        print(f"{len(sizes)} plans: median {sizes[len(sizes) // 2]} bytes, p99 "
              f"{sizes[len(sizes) * 99 // 100]}, largest {sizes[-1]}")
        return 0
    now = case_digests(args.records)
    target = digests_file()
    if args.action == "save":
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"planner": PLANNER_VERSION, "nodes": dict(NODE_VERSIONS),
                                      "cases": now}, indent=1, sort_keys=True) + "\n",
                          encoding="utf-8")
        upgrade_fixture().write_text(json.dumps(_upgrade_record(), indent=1, sort_keys=True)
                                     + "\n", encoding="utf-8")
        print(f"saved the plans of {len(now)} cases for planner version {PLANNER_VERSION} "
              f"in {target}, and the upgrade fixture {upgrade_fixture().name}")
        return 0
    if not target.is_file():
        print(f"no plans saved for planner version {PLANNER_VERSION}: run save")
        return 1
    differ = changed(json.loads(target.read_text(encoding="utf-8"))["cases"], now)
    print(f"{len(now)} cases planned; {len(differ)} differ from planner version "
          f"{PLANNER_VERSION}'s" + "".join(f"\n  {key}" for key in differ[:40]))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
