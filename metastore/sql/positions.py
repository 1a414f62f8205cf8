"""Where a parsed node starts in the script: ksqlDB's NodeLocation, as ``(line, column)``.

The tokenizer reads the whole script, so lines count from the script's first line (as ksqlDB's
do: it parses a request's statements together) and columns from 1 within that line. sqlglot
records on each identifier the line, the column of its last character and its character span;
a node starts where its first identifier does (a qualified column at its qualifier).
"""

from __future__ import annotations

from sqlglot import exp

Position = tuple[int, int]


def start(node: exp.Expr) -> Position | None:
    """Where ``node`` starts; None when the parser recorded no position for it."""
    if isinstance(node, exp.Column):
        table = node.args.get("table")
        first = table if isinstance(table, exp.Identifier) else node.this
        return _identifier_start(first) if isinstance(first, exp.Expr) else None
    if isinstance(node, exp.Identifier):
        return _identifier_start(node)
    for identifier in node.find_all(exp.Identifier, bfs=False):
        return _identifier_start(identifier)
    return None


def _identifier_start(identifier: exp.Expr) -> Position | None:
    meta = identifier.meta
    line, end_column = meta.get("line"), meta.get("col")
    first, last = meta.get("start"), meta.get("end")
    if not all(isinstance(v, int) for v in (line, end_column, first, last)):
        return None
    assert isinstance(line, int) and isinstance(end_column, int)
    assert isinstance(first, int) and isinstance(last, int)
    return line, end_column - (last - first)
