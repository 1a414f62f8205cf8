"""Where a shell's output goes, as ksqlDB's console sends it: to the terminal, in the OUTPUT
format (TABULAR or JSON), with tables fitted to the terminal's width, and while SPOOL is on, a
copy into the spool file (the lines entered too, after the prompt)."""

from __future__ import annotations

import shutil
import sys
from enum import StrEnum
from pathlib import Path
from typing import Any, TextIO

import typer

from cli.output import print_json
from cli.render import render_entity

PROMPT = "metastore> "
CONTINUATION = "        -> "


class OutputFormat(StrEnum):
    JSON = "JSON"
    TABULAR = "TABULAR"


VALID_FORMATS = ", ".join(f"'{name}'" for name in OutputFormat)


def output_format(name: str) -> OutputFormat:
    try:
        return OutputFormat(name.upper())
    except ValueError:
        raise ValueError(f"Invalid output format: '{name}' (valid formats: "
                         f"{VALID_FORMATS})") from None


class SpoolError(Exception):
    """The spool file cannot be written."""


class _Copied:
    """Standard output that also writes into the spool file."""

    def __init__(self, terminal: TextIO, spool: TextIO) -> None:
        self.terminal = terminal
        self.spool = spool

    def write(self, text: str) -> int:
        self.spool.write(text)
        return self.terminal.write(text)

    def flush(self) -> None:
        self.spool.flush()
        self.terminal.flush()

    def isatty(self) -> bool:
        return self.terminal.isatty()

    @property
    def encoding(self) -> str:
        return self.terminal.encoding


class Console:
    def __init__(self, output: OutputFormat) -> None:
        self.output = output
        self._spool: tuple[Path, TextIO, TextIO] | None = None

    @property
    def json(self) -> bool:
        return self.output is OutputFormat.JSON

    @staticmethod
    def width() -> int:
        """The terminal's width (80 when the output is not a terminal, as a dumb terminal's)."""
        return shutil.get_terminal_size().columns

    @staticmethod
    def echo(text: str = "") -> None:
        typer.echo(text)

    def entities(self, entities: list[dict[str, Any]]) -> None:
        """A /ksql answer: its entities as tables and text, or as JSON."""
        if self.json:
            print_json(entities)
            return
        for entity in entities:
            render_entity(entity)

    def read_line(self, continued: bool) -> str:
        """The next line entered after the prompt; the spool file gets both once it is read."""
        prompt = CONTINUATION if continued else PROMPT
        if self._spool is None:
            return input(prompt)
        spooled = sys.stdout
        sys.stdout = self._spool[2]  # the prompt goes to the terminal only
        try:
            line = input(prompt)
        finally:
            sys.stdout = spooled
        self._spool[1].write(prompt + line + "\n")
        return line

    def spool_to(self, path: Path) -> None:
        self.spool_off(quiet=True)
        try:
            file = path.open("w", encoding="utf-8")
        except OSError as error:
            raise SpoolError(f"Cannot SPOOL to file: {path} ({error.strerror})") from error
        self._spool = (path, file, sys.stdout)
        sys.stdout = _Copied(sys.stdout, file)
        self.echo(f"Session will be spooled to {path.absolute()}")
        self.echo("Enter SPOOL OFF to disable")

    def spool_off(self, quiet: bool = False) -> None:
        if self._spool is None:
            return
        path, file, terminal = self._spool
        self._spool = None
        sys.stdout = terminal
        file.close()
        if not quiet:
            self.echo(f"Spool written to {path.absolute()}")
