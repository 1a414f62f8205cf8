"""How the parallel phase spreads the tests over pytest-xdist workers (``--dist loadgroup``).

A *unit* is what must stay on one worker: every user of an expensive shared fixture (the
in-process SparkSession, a shared node process, the Schema Registry), or a module whose tests
share a module-scoped fixture, or else a single test. A unit is *heavy* when it runs Spark (or a
Spark cluster); heavy units are packed into a few *lanes*, longest first into the shortest lane,
so that no more Spark JVMs than lanes run at once on a small machine while the other workers
take the light units. Lanes run first, then the light units, longest first, so that the long ones
never start last.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

# Session-scoped fixtures whose users share one worker, so that each starts once per run.
SHARED_FIXTURE_UNITS = {
    "spark": "spark-session",
    "spark_node_process": "spark-node",
    "registry": "schema-registry",
    "registry_node_process": "schema-registry",
    "connect_worker": "kafka-connect",
    "postgres": "kafka-connect",
}
# Fixtures that put Spark in the test's process or in a node process it talks to.
SPARK_FIXTURES = frozenset({"spark", "own_spark", "spark_node_process",
                            "registry_node_process"})
# Modules whose tests start Spark themselves (node processes with Spark, Spark clusters).
SPARK_MODULES = ("tests/spark/", "tests/queries/", "tests/query_tests/",
                 "integration/test_spark_cluster.py",
                 "integration/test_exactly_once_chaos.py", "tests/connect/test_cdc.py")
UNKNOWN_SECONDS = 1.0


@dataclass(frozen=True)
class Test:
    """What the schedule needs of one collected test."""

    nodeid: str
    fixtures: frozenset[str]
    module_scoped: bool  # it uses a fixture of module scope
    group: str | None  # an xdist_group the test names itself

    @property
    def module(self) -> str:
        return self.nodeid.split("::")[0]

    @property
    def heavy(self) -> bool:
        return bool(self.fixtures & SPARK_FIXTURES) or self.module.startswith(SPARK_MODULES)


class Units:
    """The unit of each test: tests that share a fixture unit, or name one group, are one unit,
    and two units a test joins become one (so a fixture never starts on two workers)."""

    def __init__(self, tests: Iterable[Test]) -> None:
        self._parent: dict[str, str] = {}
        for test in tests:
            names = self._named(test)
            for name in names[1:]:
                self._parent[self._root(name)] = self._root(names[0])

    def __call__(self, test: Test) -> str:
        names = self._named(test)
        if names:
            return self._root(names[0])
        return test.module if test.module_scoped else test.nodeid

    @staticmethod
    def _named(test: Test) -> list[str]:
        shared = sorted({unit for fixture, unit in SHARED_FIXTURE_UNITS.items()
                         if fixture in test.fixtures})
        return [*([test.group] if test.group is not None else []), *shared]

    def _root(self, name: str) -> str:
        while self._parent.get(name, name) != name:
            name = self._parent[name]
        return name


@dataclass(frozen=True)
class Plan:
    """Each test's xdist group (None: scheduled on its own) and the order to collect them in."""

    groups: Mapping[str, str | None]
    order: list[str]
    lanes: Mapping[str, float]  # each lane's expected seconds


def plan(tests: Iterable[Test], known: Mapping[str, float], lanes: int) -> Plan:
    tests = list(tests)
    unit_of = Units(tests)
    seconds: dict[str, float] = defaultdict(float)
    heavy: set[str] = set()
    for test in tests:
        unit = unit_of(test)
        seconds[unit] += known.get(test.nodeid, UNKNOWN_SECONDS)
        if test.heavy:
            heavy.add(unit)
    lane_of = _pack(sorted(heavy, key=lambda u: (-seconds[u], u)), seconds, max(lanes, 1))
    lane_seconds: dict[str, float] = defaultdict(float)
    for unit, lane in lane_of.items():
        lane_seconds[lane] += seconds[unit]

    def group(test: Test) -> str | None:
        unit = unit_of(test)
        if unit in lane_of:
            return lane_of[unit]
        return None if unit == test.nodeid else unit

    groups = {test.nodeid: group(test) for test in tests}

    def rank(indexed: tuple[int, Test]) -> tuple[int, float, str, int]:
        index, test = indexed
        name = groups[test.nodeid]
        if name in lane_seconds:
            return (0, -lane_seconds[name], name, index)
        key = name or test.nodeid
        return (1, -seconds[unit_of(test)], key, index)

    order = [test.nodeid for _, test in sorted(enumerate(tests), key=rank)]
    return Plan(groups, order, dict(lane_seconds))


def _pack(units: list[str], seconds: Mapping[str, float], lanes: int) -> dict[str, str]:
    """Longest unit first into the lane with the least work so far."""
    heap = [(0.0, index) for index in range(lanes)]
    lane_of: dict[str, str] = {}
    for unit in units:
        load, index = heapq.heappop(heap)
        lane_of[unit] = f"spark-lane-{index + 1}"
        heapq.heappush(heap, (load + seconds[unit], index))
    return lane_of


def is_quick(path: Path, root: Path) -> bool:
    return path.is_relative_to(root / "tests" / "unit")
