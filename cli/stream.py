"""Printing a query's rows as they arrive (``metastore query`` and SELECT / PRINT in ``metastore
shell``): a table whose rows are printed one by one, or JSON Lines with ``--json``; Ctrl-C stops
the query (closing the connection stops a push query on the node)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import typer

MIN_WIDTH = 12


def print_rows(items: Iterator[Any], json_output: bool) -> int:
    """Print a streamed query (metadata first, then rows) until it ends or Ctrl-C; the number
    of rows printed."""
    count = 0
    widths: list[int] = []
    try:
        for item in items:
            if json_output:
                sys.stdout.write(json.dumps(item) + "\n")
                sys.stdout.flush()
                count += isinstance(item, list)
                continue
            if isinstance(item, dict) and "columnNames" in item:
                names = [str(name) for name in item["columnNames"]]
                widths = [max(len(name), MIN_WIDTH) for name in names]
                _line(widths)
                _cells(names, widths)
                _line(widths)
            elif isinstance(item, list):
                _cells(["null" if c is None else _text(c) for c in item], widths)
                count += 1
    except KeyboardInterrupt:
        items_close = getattr(items, "close", None)
        if items_close is not None:
            items_close()
        if not json_output:
            typer.echo("Query terminated")
        return count
    if not json_output:
        _line(widths)
        typer.echo(f"{count} row(s)")
    return count


def print_lines(lines: Iterator[str], json_output: bool) -> int:
    """Print a PRINT's lines until it ends or Ctrl-C (each a JSON string with --json); the
    number of records printed."""
    count = 0
    try:
        for line in lines:
            sys.stdout.write((json.dumps(line) if json_output else line) + "\n")
            sys.stdout.flush()
            count += line.startswith("rowtime: ")
    except KeyboardInterrupt:
        close = getattr(lines, "close", None)
        if close is not None:
            close()
        if not json_output:
            typer.echo("Topic printing ceased")
    return count


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _line(widths: list[int]) -> None:
    typer.echo("+" + "+".join("-" * (w + 2) for w in widths) + "+")


def _cells(cells: list[str], widths: list[int]) -> None:
    padded = [cell.ljust(width) for cell, width in zip(cells, widths, strict=False)]
    typer.echo("| " + " | ".join(padded) + " |")
    sys.stdout.flush()
