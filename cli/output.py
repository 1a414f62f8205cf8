"""Printing for the CLI: JSON for scripts, aligned tables for people.

A table is as wide as its widest cells, unless :func:`tables_within` gives a width (the shell's
terminal): then its widest columns are narrowed to fit and their cells wrapped over several lines,
as ksqlDB's console wraps them."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any

MIN_CELL_WIDTH = 5
"""ksqlDB's narrowest cell."""
_TABLE_WIDTH: ContextVar[int | None] = ContextVar("table_width", default=None)


@contextlib.contextmanager
def tables_within(width: int | None) -> Iterator[None]:
    """Tables printed within fit in ``width`` characters (None: no limit)."""
    token = _TABLE_WIDTH.set(width)
    try:
        yield
    finally:
        _TABLE_WIDTH.reset(token)


def table_width() -> int | None:
    return _TABLE_WIDTH.get()


def fitted_widths(natural: Sequence[int], width: int | None) -> list[int]:
    """Column widths whose table, borders included, fits in ``width``: the natural ones when they
    fit, else the widest narrowed to one cap (never below :data:`MIN_CELL_WIDTH`)."""
    if width is None:
        return list(natural)
    room = width - 3 * len(natural) - 1
    cap = max(natural, default=0)
    while cap > MIN_CELL_WIDTH and sum(min(w, cap) for w in natural) > room:
        cap -= 1
    return [min(w, cap) for w in natural]


def table_line(widths: Sequence[int]) -> str:
    return "+" + "+".join("-" * (w + 2) for w in widths) + "+"


def table_row(cells: Sequence[str], widths: Sequence[int], wrap: bool) -> list[str]:
    """The printed lines of one row: each cell cut into its width's pieces when ``wrap``."""
    pieces = [_pieces(cell, width) if wrap else [cell] for cell, width in zip(cells, widths,
                                                                              strict=False)]
    height = max((len(p) for p in pieces), default=1)
    return ["| " + " | ".join((p[line] if line < len(p) else "").ljust(width)
                              for p, width in zip(pieces, widths, strict=False)) + " |"
            for line in range(height)]


def _pieces(cell: str, width: int) -> list[str]:
    return [line[i:i + width] for line in cell.split("\n")
            for i in range(0, max(len(line), 1), width)]


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(h) for h in headers], *[[("" if c is None else str(c)) for c in r] for r in rows]]
    width = table_width()
    widths = fitted_widths([max(len(row[i]) for row in cells) for i in range(len(headers))], width)
    line = table_line(widths)
    print(line)
    print("\n".join(table_row(cells[0], widths, width is not None)))
    print(line)
    for row in cells[1:]:
        print("\n".join(table_row(row, widths, width is not None)))
    print(line)


def fail(message: str, code: int = 1) -> None:
    print(f"Error: {message}", file=sys.stderr)
    raise SystemExit(code)


FUNCTION_MODULE_HELP = ("A Python module of user-defined functions (exporting FUNCTIONS, see "
                        "metastore.functions.extensions) to load; repeatable. Every node of a "
                        "service must load the same modules.")


def load_function_modules(modules: Sequence[str] | None) -> None:
    """Load ``--function-module`` modules; a module that cannot be loaded exits 2."""
    from metastore.functions.extensions import ExtensionError, load

    try:
        load(modules or ())
    except ExtensionError as error:
        fail(str(error), 2)
