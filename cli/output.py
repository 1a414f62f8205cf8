"""Printing for the CLI: JSON for scripts, aligned tables for people."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(h) for h in headers], *[[("" if c is None else str(c)) for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    print(line)
    print("| " + " | ".join(h.ljust(w) for h, w in zip(cells[0], widths, strict=True)) + " |")
    print(line)
    for row in cells[1:]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
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
