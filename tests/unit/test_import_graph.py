"""No import cycle between metastore's top-level units (its subpackages and top-level modules),
and no import upward: each unit belongs to one layer of :data:`LAYERS`, and imports only units of
its own layer or of the layers below.

Every ``import`` and ``from ... import`` counts: at module level, inside functions, and under
``if TYPE_CHECKING:``. A lower layer that needs something of a higher one is given it (a
protocol it defines, implemented above and passed in), never imports it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import metastore

ROOT = Path(metastore.__file__).parent
UNITS = {p.stem for p in ROOT.iterdir()
         if (p / "__init__.py").exists() or (p.suffix == ".py" and p.stem != "__init__")}
TYPE_ONLY_EDGES_ALLOWED: set[tuple[str, str]] = set()
"""Type-only imports (under TYPE_CHECKING) that may close a cycle: none."""
LAYERS: list[tuple[str, set[str]]] = [
    ("core: errors, limits, faults, the command record's codec, the JVM classes' names and jars",
     {"core", "jvm"}),
    ("the launcher's Maven jars and paths, which a node's Spark resolves its connector with",
     {"dev"}),
    ("the language: statements, types, functions", {"sql", "functions"}),
    ("the Schema Registry's client", {"schema_registry"}),
    ("the catalog: model, image, commands", {"catalog"}),
    ("the formats: their rules, the registry formats' schemas and the columns they give",
     {"formats"}),
    ("the engine: analysis, validation, statement rules", {"engine"}),
    ("Kafka Connect: its client and the connector statements", {"connect"}),
    ("the Kafka clients", {"kafka"}),
    ("the command log, its checkpoints and the cluster's members", {"log", "checkpoint", "cluster"}),
    ("Spark: the session, the catalog's projection, source views, pull queries", {"spark"}),
    ("the planner: a query's Spark plan", {"planner"}),
    ("the runtime: persistent, push and pull queries running", {"runtime"}),
    ("the node and its HTTP edge", {"server"}),
    ("metastore test and the offline checks", {"testing"}),
]
"""Bottom to top."""


def _unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "metastore" and len(parts) > 1 and parts[1] in UNITS else None


@functools.cache
def _edges() -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT.parent).with_suffix("").parts
        source = _unit(".".join(relative))
        package = relative[:-1]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        type_only = {sub.lineno for node in ast.walk(tree)
                     if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                     for child in node.body for sub in ast.walk(child) if hasattr(sub, "lineno")}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
                module = ".".join(part for part in (base, node.module or "") if part)
                targets = ([f"{module}.{alias.name}" for alias in node.names]
                           if module == "metastore" else [module])
            else:
                continue
            for target in targets:
                destination = _unit(target)
                if source and destination and destination != source:
                    if node.lineno in type_only and (source, destination) in TYPE_ONLY_EDGES_ALLOWED:
                        continue
                    edges.setdefault((source, destination), []).append(f"{path}:{node.lineno}")
    return edges


def _cycles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """Strongly connected components of more than one unit (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for source, destination in edges:
        graph.setdefault(source, set()).add(destination)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for other in sorted(graph.get(unit, ())):
            if other not in index:
                visit(other)
                low[unit] = min(low[unit], low[other])
            elif other in stack:
                low[unit] = min(low[unit], index[other])
        if low[unit] == index[unit]:
            component = []
            while stack[-1] != unit:
                component.append(stack.pop())
            component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for unit in sorted(graph):
        if unit not in index:
            visit(unit)
    return found


def test_no_import_cycle_between_subpackages() -> None:
    edges = _edges()
    assert ("catalog", "sql") in edges and ("planner", "engine") in edges  # the walk sees imports
    cycles = _cycles(edges)
    shown = [f"{component}: " + "; ".join(f"{a}->{b} at {edges[(a, b)][0]}" for a in component
                                          for b in component if (a, b) in edges)
             for component in cycles]
    assert not cycles, shown


def _layer_of() -> dict[str, int]:
    return {unit: level for level, (_, units) in enumerate(LAYERS) for unit in units}


def test_every_unit_has_one_layer() -> None:
    placed = [unit for _, units in LAYERS for unit in units]
    assert sorted(placed) == sorted(set(placed)), "a unit in two layers"
    assert set(placed) == UNITS, f"place these in LAYERS: {sorted(UNITS - set(placed))}; " \
                                 f"gone: {sorted(set(placed) - UNITS)}"


def _upward(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    level = _layer_of()
    return [f"{source} ({LAYERS[level[source]][0]}) -> {target} ({LAYERS[level[target]][0]}) "
            f"at {where[0]}"
            for (source, target), where in sorted(edges.items())
            if level[source] < level[target]]


def test_no_unit_imports_a_layer_above_its_own() -> None:
    edges = _edges()
    assert ("server", "log") in edges and ("log", "kafka") in edges  # the walk sees imports
    assert not _upward(edges), _upward(edges)


def test_an_import_from_a_layer_above_is_refused_and_one_within_a_layer_is_not() -> None:
    assert _upward({("log", "runtime"): ["metastore/log/writer.py:93"],
                    ("checkpoint", "log"): ["metastore/checkpoint/store.py:29"]}) == [
        "log (the command log, its checkpoints and the cluster's members) -> runtime (the "
        "runtime: persistent, push and pull queries running) at metastore/log/writer.py:93"]
