"""The plans the planner wrote for ksqlDB's dev cases, kept per planner version and replayed.

``tests/plans/<version>/cases.jsonl.gz`` holds, for each case of ``ksql-records-dev.jsonl`` that
planner :data:`~metastore.planner.plan_format.PLANNER_VERSION` ran to ksqlDB's expected records,
the case (statements, inputs, expected outputs) and ``"plans"``: the plan document each of its
persistent queries ran, as a command keeps it, on topics named ``qtt-planned-`` + the case's.

- ``save`` runs every dev case through ``metastore test``'s runner on real Kafka, Spark and the
  Schema Registry, and keeps those that pass with the plans they ran (with ksqlDB's test
  functions loaded, as ksqlDB's runner has them); also the upgrade fixture.
- ``replay`` runs the stored plans of every saved version (or ``--version``) through this
  release's runtime, never planning, and checks the same records come out (a case two versions
  planned alike runs once); ``--sample`` takes the cases that cover every plan shape and
  format (:func:`shape_sample`), what the test suite replays.
- ``check`` plans the saved cases again, offline, and names those whose plan changed: a release
  that changes what the planner writes must say so with a new version.
- ``sizes`` prints how large the saved plans are.
- ``changes`` prints, for each saved version after the first, how many of its cases it planned
  differently from the version before (and how many that one did not keep).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
from metastore.testing.cases import QueryTest, from_json, load
from metastore.testing.check import AssumedTopics
from metastore.testing.runner import PASSED, PLANNED_NAMESPACE, CaseResult, case_validator

PLANS_DIR = Path(__file__).resolve().parents[1] / "tests" / "plans"
LANES = 3
"""Cases run at once on the one SparkSession (``metastore test --parallel``)."""


def saved_file(version: int = PLANNER_VERSION) -> Path:
    return PLANS_DIR / str(version) / "cases.jsonl.gz"


def versions_file(version: int = PLANNER_VERSION) -> Path:
    """The planner and node versions a saved version's plans were written with."""
    return PLANS_DIR / str(version) / "versions.json"


def saved_versions() -> list[int]:
    return sorted(int(path.name) for path in PLANS_DIR.iterdir()
                  if path.is_dir() and path.name.isdigit())


def saved_cases(version: int = PLANNER_VERSION) -> list[dict[str, Any]]:
    """A version's saved cases, each a dev case with its ``plans``, in the dev file's order."""
    with gzip.open(saved_file(version), "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


# -- save ---------------------------------------------------------------------------------------
def save(records: Path = DEFAULT_RECORDS, lanes: int = LANES) -> int:
    """Run every case of ``records`` and keep those that pass, with the plans they ran."""
    raw = [json.loads(line) for line in records.read_text(encoding="utf-8").splitlines()
           if line.strip()]
    results = run_cases(load([records]), lanes)
    kept = [{**case, "plans": list(result.plans)} for case, result in zip(raw, results, strict=True)
            if result.status == PASSED and result.plans]
    target = saved_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(target, "wb", mtime=0) as out:  # the same plans, the same bytes
        out.write("".join(json.dumps(case, sort_keys=True) + "\n" for case in kept).encode())
    versions_file().write_text(json.dumps(
        {"planner": PLANNER_VERSION, "nodes": dict(NODE_VERSIONS)}, indent=1, sort_keys=True)
        + "\n", encoding="utf-8")
    upgrade_fixture().write_text(json.dumps(_upgrade_record(), indent=1, sort_keys=True) + "\n",
                                 encoding="utf-8")
    passed = sum(result.status == PASSED for result in results)
    print(f"{passed} of {len(results)} cases passed; saved the {len(kept)} whose queries ran "
          f"from plans, for planner version {PLANNER_VERSION}, in {target}, and the upgrade "
          f"fixture {upgrade_fixture().name}")
    return 0


# -- replay -------------------------------------------------------------------------------------
def replay(versions: Sequence[int], sample: bool, lanes: int = LANES,
           bootstrap: str | None = None, registry_url: str | None = None
           ) -> dict[int, list[CaseResult]]:
    """Each version's saved cases (those of :func:`shape_sample` with ``sample``) run from their stored
    plans by this release: every result should pass."""
    chosen = {version: (shape_sample if sample else list)(saved_cases(version))
              for version in versions}
    distinct = {_replayed(case): case for version in versions for case in chosen[version]}
    results = dict(zip(distinct, run_cases(as_tests(list(distinct.values())), lanes, bootstrap,
                                           registry_url), strict=True))
    return {version: [results[_replayed(case)] for case in chosen[version]]
            for version in versions}


def _replayed(case: dict[str, Any]) -> str:
    """What a replay of a saved case runs: a case whose plans two versions wrote alike (most
    cases, where a version changed some plans only) runs once for both."""
    return json.dumps([case["id"], case["plans"]])


def shape_sample(cases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cases, in order, that each bring a plan shape or a format no case before them in
    the sample has: every shape (the node classes a plan uses, its output mode, batch stage,
    kept state and windowed sink) and every format of the saved plans, in few cases."""
    covered: set[object] = set()
    chosen = []
    for case in cases:
        features = _features(case)
        if not features <= covered:
            chosen.append(case)
            covered |= features
    return chosen


def _features(case: dict[str, Any]) -> set[object]:
    features: set[object] = {("format", name) for name in case.get("formats") or ()}
    for text in case["plans"]:
        document = json.loads(text)
        plan = document["plan"]
        features.add((tuple(sorted(document["versions"])), plan["output_mode"],
                      plan["batch"] is not None, plan.get("table_state"),
                      plan.get("stream_state"), plan.get("window_key_bytes")))
    return features


def as_tests(cases: Sequence[dict[str, Any]]) -> list[QueryTest]:
    """Saved cases as the runner's tests, each with its stored plans."""
    return [from_json(case, str(saved_file())) for case in cases]


def run_cases(tests: Sequence[QueryTest], lanes: int = LANES, bootstrap: str | None = None,
              registry_url: str | None = None) -> list[CaseResult]:
    """``tests`` through ``metastore test``'s runner with ksqlDB's test functions, on Kafka at
    ``bootstrap`` and the registry at ``registry_url`` (by default the local ones, started if
    needed)."""
    from metastore.testing.session import kafka_bootstrap, run_tests, schema_registry_url

    def progress(index: int, total: int, result: CaseResult) -> None:
        if result.status != PASSED or index % 50 == 0 or index == total:
            print(f"[{index}/{total}] {result.status} {result.test_id}"
                  + (f": {result.reason.splitlines()[0][:200]}" if result.reason else ""),
                  file=sys.stderr, flush=True)

    with _test_functions():
        return run_tests(tests, kafka_bootstrap(bootstrap), progress,
                         registry_url=schema_registry_url(registry_url, tests),
                         parallel=lanes).results


# -- check --------------------------------------------------------------------------------------
def changed(version: int = PLANNER_VERSION) -> tuple[int, list[str]]:
    """How many saved cases plan offline, and the ids of those whose plans this release writes
    differently from the saved ones. A case the dev file marks ``needs_schema_registry`` (its
    columns come from the registry's schemas) is left to ``replay``."""
    cases = [case for case in saved_cases(version) if not case.get("needs_schema_registry")]
    with _test_functions():
        planned = [(case, _plans(test)) for case, test in
                   zip(cases, as_tests(cases), strict=True)]
    offline = [(case, plans) for case, plans in planned if plans is not None]
    return len(offline), [case["id"] for case, plans in offline if plans != case["plans"]]


def _plans(test: QueryTest) -> list[str] | None:
    """The plans a test's queries get, on :data:`PLANNED_NAMESPACE`'s topics, as a run plans
    them; None when it needs a Schema Registry to validate, or is refused."""
    try:
        statements = parse(test.script)
        validator = case_validator(test, statements, overrides.resolve(test.properties,
                                                                       strict=False),
                                   lambda topic: PLANNED_NAMESPACE + topic)
        for statement in statements:
            validator.validate(statement)
    except (MetastoreError, overrides.ConfigError):
        return None
    return [q.plan for q in sorted(validator.image.queries.values(), key=lambda q: q.offset)]


@contextmanager
def _test_functions() -> Iterator[None]:
    loaded_before = TEST_FUNCTIONS in extensions.loaded()
    extensions.load([TEST_FUNCTIONS])
    try:
        yield
    finally:
        if not loaded_before:
            extensions.unload(TEST_FUNCTIONS)


# -- the upgrade fixture ------------------------------------------------------------------------
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
    validator = Validator(EMPTY_IMAGE, AssumedTopics({"plan-src": 1}),
                          runtime_check=check_runtime, planner=stored_plan)
    [source, query] = parse(UPGRADE_SOURCE + UPGRADE_QUERY)
    validator.validate(source)
    outcome = validator.validate(query)
    assert isinstance(outcome, Write)
    return CommandRecord(outcome.command, query.text, "planner-upgrade-fixture").to_json()


# -- the command --------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m integration.plans", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("save", "replay", "check", "sizes", "changes"))
    parser.add_argument("--records", type=Path, default=DEFAULT_RECORDS,
                        help="the cases save runs (default: the dev records file)")
    parser.add_argument("--version", type=int, action="append",
                        help="replay this saved version (repeatable; default: every one)")
    parser.add_argument("--sample", action="store_true",
                        help="replay the cases that cover every plan shape and format")
    parser.add_argument("--parallel", type=int, default=LANES, help="cases run at once")
    args = parser.parse_args(argv)
    if args.action == "save":
        return save(args.records, args.parallel)
    if args.action == "replay":
        return _print_replay(replay(args.version or saved_versions(), args.sample,
                                    args.parallel))
    if args.action == "changes":
        for version in saved_versions()[1:]:
            before = {case["id"]: case["plans"] for case in saved_cases(version - 1)}
            cases = saved_cases(version)
            differ = sum(case["id"] in before and before[case["id"]] != case["plans"]
                         for case in cases)
            new = sum(case["id"] not in before for case in cases)
            print(f"planner version {version}: {len(cases)} cases, {differ} planned differently "
                  f"from version {version - 1}, {new} it did not keep")
        return 0
    if args.action == "sizes":
        sizes = sorted(len(plan.encode()) for case in saved_cases() for plan in case["plans"])
        print(f"{len(sizes)} plans: median {sizes[len(sizes) // 2]} bytes, p99 "
              f"{sizes[len(sizes) * 99 // 100]}, largest {sizes[-1]}")
        return 0
    planned, differ = changed()
    print(f"{planned} saved cases planned offline; {len(differ)} plan differently from planner "
          f"version {PLANNER_VERSION}'s" + "".join(f"\n  {key}" for key in differ[:40]))
    return 1 if differ else 0


def _print_replay(results: dict[int, list[CaseResult]]) -> int:
    failing = 0
    for version, version_results in results.items():
        passed = sum(result.status == PASSED for result in version_results)
        failing += len(version_results) - passed
        print(f"planner version {version}: {passed} of {len(version_results)} stored plans "
              "replayed to the saved records")
        for result in version_results:
            if result.status != PASSED:
                print(f"  {result.status} {result.test_id}: {result.reason[:300]}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
