"""Printing a query's rows as they arrive (``metastore query`` and SELECT / PRINT in ``metastore
shell``): a table whose rows are printed one by one, or JSON Lines with ``--json``; Ctrl-C stops
the query (closing the connection stops a push query on the node)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import typer

from cli.output import fitted_widths, table_line, table_row, table_width

MIN_WIDTH = 12


def print_rows(items: Iterator[Any], json_output: bool, row_limit: int | None = None) -> int:
    """Print a streamed query (metadata first, then rows) until it ends, ``row_limit`` rows were
    printed, or Ctrl-C; the number of rows printed."""
    table = _StreamedTable()
    try:
        for item in items:
            if json_output:
                sys.stdout.write(json.dumps(item) + "\n")
                sys.stdout.flush()
            else:
                table.show(item)
            table.count += isinstance(item, list)
            if row_limit is not None and table.count >= row_limit:
                break
        else:
            if not json_output:
                typer.echo(table_line(table.widths))
                typer.echo(f"{table.count} row(s)")
            return table.count
    except KeyboardInterrupt:
        pass
    close = getattr(items, "close", None)
    if close is not None:
        close()
    if not json_output:
        typer.echo("Query terminated")
    return table.count


class _StreamedTable:
    """A table printed row by row: its widths are fixed by the header (fitted to the width of
    :func:`cli.output.tables_within`, whose cells wrap)."""

    def __init__(self) -> None:
        self.widths: list[int] = []
        self.count = 0
        self.wrap = table_width() is not None

    def show(self, item: Any) -> None:
        if isinstance(item, dict) and "columnNames" in item:
            names = [str(name) for name in item["columnNames"]]
            self.widths = _widths(names, table_width())
            typer.echo(table_line(self.widths))
            self._cells(names)
            typer.echo(table_line(self.widths))
        elif isinstance(item, list):
            self._cells(["null" if c is None else _text(c) for c in item])

    def _cells(self, cells: list[str]) -> None:
        typer.echo("\n".join(table_row(cells, self.widths, self.wrap)))
        sys.stdout.flush()


def _widths(names: list[str], width: int | None) -> list[int]:
    """The columns' widths: each as wide as its name (at least :data:`MIN_WIDTH`); within a
    width, an equal share of it, as ksqlDB's console shares it (rows are not known yet)."""
    natural = [max(len(name), MIN_WIDTH) for name in names]
    if width is None or not names:
        return natural
    share = (width - 3 * len(names) - 1) // len(names)
    return fitted_widths([max(w, share) for w in natural], width)


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
