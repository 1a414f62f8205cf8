"""No import cycle between metastore's top-level units (its subpackages and top-level modules).

Every ``import`` and ``from ... import`` counts: at module level, inside functions, and under
``if TYPE_CHECKING:``. A lower layer that needs something of a higher one is given it (a
protocol it defines, implemented above and passed in), never imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import metastore

ROOT = Path(metastore.__file__).parent
UNITS = {p.stem for p in ROOT.iterdir()
         if (p / "__init__.py").exists() or (p.suffix == ".py" and p.stem != "__init__")}
TYPE_ONLY_EDGES_ALLOWED: set[tuple[str, str]] = set()
"""Type-only imports (under TYPE_CHECKING) that may close a cycle: none."""


def _unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "metastore" and len(parts) > 1 and parts[1] in UNITS else None


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
    assert ("catalog", "sql") in edges and ("queries", "catalog") in edges  # the walk sees imports
    cycles = _cycles(edges)
    shown = [f"{component}: " + "; ".join(f"{a}->{b} at {edges[(a, b)][0]}" for a in component
                                          for b in component if (a, b) in edges)
             for component in cycles]
    assert not cycles, shown
