"""The test suite's tiers, groups and durations, set in one place for tests/ and integration/.

- Tiers: everything under ``tests/unit`` is marked ``quick`` (pure: no broker, no Spark, no
  node process); ``-m quick`` runs that tier alone. Tests marked ``serial`` measure the machine
  (fork counts, a process's memory, time bounds, topics left behind) and run in a phase of their
  own, after the parallel phase (``integration.bootstrap test`` runs both).
- Groups, for pytest-xdist's ``--dist loadgroup`` (``tests/support/schedule.py``): the users of
  an expensive shared fixture (the in-process SparkSession, a shared node process, the Schema
  Registry) stay on one worker, so each starts once; the tests that run Spark are packed into
  two lanes, so that no more than two Spark streams share the machine's cores, while the other
  workers take the rest; lanes start first, then the rest longest first, by the durations the
  last runs kept (``tests/data/durations.json`` on a clean clone).
- One broker: under xdist the controller starts the broker before the workers and hands its
  address to them through ``KAFKA_BOOTSTRAP_SERVERS``; without xdist the session fixture starts
  it when a test first needs it.
- Durations: each run merges its per-test durations (setup, call and teardown) into
  ``.cache/test-durations.json`` and prints the 25 slowest and the total.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.support import schedule, xdist_groups

pytest_plugins = ["tests.support.kafka", "tests.support.registry", "tests.support.servers",
                  "tests.support.spark", "tests.support.connect", "tests.support.browser"]

ROOT = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("METASTORE_CACHE_DIR", ROOT / ".cache"))
DURATIONS_FILE = CACHE / "test-durations.json"
LAST_RUN_FILE = CACHE / "test-durations-last.json"
SHIPPED_DURATIONS = ROOT / "tests" / "data" / "durations.json"
SLOWEST_SHOWN = 25


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--chaos-seconds", type=float, default=45.0,
                     help="length of the chaos run (CI runs the short default)")
    parser.addoption("--show-schedule", action="store_true",
                     help="print the Spark lanes and their expected seconds")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "quick: a pure test (tests/unit): no broker, Spark or node")
    config.addinivalue_line("markers", "serial: measures the machine; runs alone, after the "
                                       "parallel phase")
    if not config.pluginmanager.hasplugin("xdist"):  # its marker, also when run with -p no:xdist
        config.addinivalue_line("markers", "xdist_group(name): tests that share one worker")
    if _is_controller(config):
        _quicker_jvms()
    if _is_controller(config) and _runs_workers(config):
        xdist_groups.run_id(config)
        if "KAFKA_BOOTSTRAP_SERVERS" not in os.environ:
            _start_shared_broker(config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    return xdist_groups.GroupScheduling(config, log, xdist_groups.groups_file(CACHE, config))


def pytest_unconfigure(config: pytest.Config) -> None:
    cluster = config.stash.get(_broker_key, None)
    if cluster is not None:
        cluster.stop()
        os.environ.pop("KAFKA_BOOTSTRAP_SERVERS", None)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if schedule.is_quick(Path(str(item.path)), ROOT):
            item.add_marker(pytest.mark.quick)
    tests = {item.nodeid: _scheduled(item) for item in items}
    made = schedule.plan(tests.values(), _known_durations(), _lanes(config))
    for item in items:
        group = made.groups[item.nodeid]
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
    position = {nodeid: index for index, nodeid in enumerate(made.order)}
    items.sort(key=lambda item: position[item.nodeid])
    if not _is_controller(config):
        xdist_groups.publish(xdist_groups.groups_file(CACHE, config), made.groups)
    if config.getoption("show_schedule"):
        _show(made, items)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _DURATIONS[xdist_groups.plain_nodeid(report.nodeid)] += report.duration


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not _is_controller(config):
        return
    durations = dict(_DURATIONS)
    if not durations:
        return
    _keep(durations, {outcome: len(terminalreporter.stats.get(outcome, ()))
                      for outcome in ("passed", "failed", "error", "skipped")})
    wall = time.monotonic() - _STARTED
    write = terminalreporter.write_line
    terminalreporter.section(f"{SLOWEST_SHOWN} slowest tests (setup + call + teardown)")
    for nodeid, seconds in sorted(durations.items(), key=lambda kv: -kv[1])[:SLOWEST_SHOWN]:
        write(f"{seconds:8.1f}s  {nodeid}")
    write(f"{len(durations)} tests took {sum(durations.values()):.0f}s of test time in "
          f"{wall:.0f}s of wall time; kept in {DURATIONS_FILE}")


_STARTED = time.monotonic()
_DURATIONS: dict[str, float] = defaultdict(float)  # this process's reports, by node id
_broker_key = pytest.StashKey[Any]()


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def _runs_workers(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None))


# The suite starts dozens of short-lived JVMs (the broker, Spark in nodes and in-process, Spark
# clusters, the registry) on two cores; C1 alone and one GC thread each spend far less CPU on
# warming up than the default C2 and one GC thread per core, and do the same work.
# METASTORE_TEST_JVM_OPTIONS replaces them ("" for the JVM's defaults).
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ParallelGCThreads=1 -XX:ConcGCThreads=1"


def _quicker_jvms() -> None:
    """Every JVM the run starts, and the workers' in turn, reads JAVA_TOOL_OPTIONS; the user's
    own options stay, after these."""
    options = os.environ.get("METASTORE_TEST_JVM_OPTIONS", TEST_JVM_OPTIONS)
    own = os.environ.get("JAVA_TOOL_OPTIONS", "")
    if options not in own:
        os.environ["JAVA_TOOL_OPTIONS"] = f"{options} {own}".strip()


def _start_shared_broker(config: pytest.Config) -> None:
    import tempfile

    from metastore.dev.kafka_cluster import LocalKafkaCluster

    cluster = LocalKafkaCluster(Path(tempfile.mkdtemp(prefix="metastore-test-kafka-")), brokers=1)
    state = cluster.start()
    config.stash[_broker_key] = cluster
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = state.bootstrap_servers


def _scheduled(item: pytest.Item) -> schedule.Test:
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    marker = item.get_closest_marker("xdist_group")
    return schedule.Test(
        nodeid=item.nodeid, fixtures=frozenset(getattr(item, "fixturenames", ())),
        module_scoped=any(d[-1].scope == "module" for d in definitions),
        group=None if marker is None else str(marker.args[0] if marker.args
                                                else marker.kwargs.get("name", "default")))


def _show(made: schedule.Plan, items: list[pytest.Item]) -> None:
    """The lanes and what each holds (``pytest --collect-only -q --show-schedule``)."""
    for lane, seconds in sorted(made.lanes.items()):
        modules = sorted({item.nodeid.split("::")[0] for item in items
                          if made.groups[item.nodeid] == lane})
        print(f"{lane}: about {seconds:.0f}s: {', '.join(modules)}")


def _lanes(config: pytest.Config) -> int:
    """Heavy lanes: as many as workers less one for the light tests, at most two by default
    (two Spark streams at once is what two cores bear), or METASTORE_TEST_SPARK_LANES."""
    given = os.environ.get("METASTORE_TEST_SPARK_LANES")
    if given:
        return int(given)
    workers = (getattr(config, "workerinput", {}).get("workercount")
               or getattr(config.option, "numprocesses", None))
    return max(1, min(2, int(workers) - 1)) if workers else 2


def _known_durations() -> dict[str, float]:
    for path in (DURATIONS_FILE, SHIPPED_DURATIONS):
        try:
            loaded = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(loaded, dict):
            return {str(k): float(v) for k, v in loaded.items() if isinstance(v, int | float)}
    return {}


def _keep(durations: dict[str, float], outcomes: dict[str, int]) -> None:
    """Merge this run's durations over the kept ones (a run of one file keeps the others')."""
    try:
        kept = json.loads(DURATIONS_FILE.read_text())
    except (OSError, ValueError):
        kept = {}
    kept.update({k: round(v, 2) for k, v in durations.items()})
    xdist_groups.replace_json(DURATIONS_FILE, dict(sorted(kept.items())))
    xdist_groups.replace_json(LAST_RUN_FILE, {"durations": dict(sorted(durations.items())),
                                              "outcomes": outcomes})
