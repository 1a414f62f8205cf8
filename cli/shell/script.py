"""Statements run one by one, as ksqlDB's CLI runs a line, ``-e``, ``-f`` and RUN SCRIPT: each
statement is sent on its own, SELECT and PRINT to the query endpoints with their rows printed
(a push query until its LIMIT, ``--query-row-limit``, ``--query-timeout`` or Ctrl-C), SET, UNSET,
DEFINE, UNDEFINE and SHOW VARIABLES kept in the session, every other statement to ``/ksql``. A
run stops at the first statement that fails."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from enum import IntEnum
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from cli.client import ClientError, StatementFailedError
from cli.shell.connection import Connection
from cli.shell.console import Console
from cli.shell.session import Session, SessionError
from cli.stream import print_lines, print_rows

if TYPE_CHECKING:
    from metastore.sql.statements import Statement

MAX_SCRIPT_BYTES = 1 << 20
"""A node refuses a larger request anyway (its body limit)."""


class ScriptError(Exception):
    """A script file that cannot be read."""


class Outcome(IntEnum):
    """How a run ended, as the exit code of ``-e`` and ``-f``."""

    OK = 0
    REJECTED = 1
    UNREACHABLE = 2


def read_script(file: Path) -> str:
    try:
        if file.stat().st_size > MAX_SCRIPT_BYTES:
            raise ScriptError(f"{file} is larger than {MAX_SCRIPT_BYTES} bytes")
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ScriptError(f"cannot read {file}: {error}") from error


def statement_texts(text: str) -> list[str]:
    """Each statement of ``text`` as written (the node substitutes its variables); the whole
    text when it cannot be split (the node then says why)."""
    from metastore.core.exceptions import MetastoreError
    from metastore.sql.parser import split

    try:
        return [chunk_text for _, chunk_text in split(text)]
    except MetastoreError:
        return [text.strip()] if text.strip() else []


def parsed(text: str, session: Session) -> Statement | None:
    """One statement's parse with the session's variables; None when it does not parse here
    (it goes to the node, which answers with its error)."""
    from metastore.core.exceptions import MetastoreError
    from metastore.sql.variables import parse_request

    try:
        statements = parse_request(text, session.variables)
    except MetastoreError:
        return None
    return statements[0] if len(statements) == 1 else None


class ScriptRunner:
    def __init__(self, session: Session, connection: Connection, console: Console) -> None:
        self.session = session
        self.connection = connection
        self.console = console

    def run(self, text: str) -> Outcome:
        """Run every statement of ``text`` until one fails."""
        for statement in statement_texts(text):
            outcome = self.run_statement(statement)
            if outcome is not Outcome.OK:
                return outcome
        return Outcome.OK

    def run_file(self, path: Path) -> Outcome:
        try:
            text = read_script(path)
        except ScriptError as error:
            self.console.echo(f"Error: {error}")
            return Outcome.UNREACHABLE
        return self.run(text)

    def run_statement(self, text: str) -> Outcome:
        try:
            self._dispatch(text, parsed(text, self.session))
        except StatementFailedError as error:
            self.console.echo(f"Error {error.error_code}: {error.message}")
            return Outcome.REJECTED
        except SessionError as error:
            self.console.echo(f"Error: {error}")
            return Outcome.REJECTED
        except ClientError as error:
            self.console.echo(f"Error: {error}")
            return Outcome.UNREACHABLE
        return Outcome.OK

    def _dispatch(self, text: str, statement: Statement | None) -> None:
        from metastore.sql import statements as st

        if isinstance(statement, st.SelectStatement):
            self._select(text)
        elif isinstance(statement, st.PrintTopic):
            self._print(text)
        elif isinstance(statement, st.SetProperty):
            self._set(statement.name, statement.value)
        elif isinstance(statement, st.DefineVariable):
            self.session.define(statement.name, statement.value)
        elif isinstance(statement, st.UndefineVariable):
            warning = self.session.undefine(statement.name)
            if warning:
                self.console.echo(warning)
        elif isinstance(statement, st.ListVariables):
            self.console.entities([self.session.variables_entity(text)])
        else:
            self.console.entities(self.connection.client.ksql(
                text, properties=self.session.properties,
                variables=self.session.variable_values))

    def _select(self, text: str) -> None:
        rows = self.connection.client.stream_query(text, self.session.properties,
                                                   self.session.variable_values)
        with contextlib.suppress(KeyboardInterrupt), interrupted_after(self.session.timeout_ms):
            print_rows(rows, self.console.json, self.session.row_limit)

    def _print(self, text: str) -> None:
        lines = self.connection.client.print_topic(text, self.session.properties,
                                                   self.session.variable_values)
        print_lines(lines, self.console.json)

    def _set(self, name: str, value: str | None) -> None:
        if value is None:
            self.console.echo(self.session.unset_property(name))
            return
        self.connection.check_property(name)
        self.console.echo(self.session.set_property(name, value))


@contextlib.contextmanager
def interrupted_after(milliseconds: int | None) -> Iterator[None]:
    """Interrupt what runs within after ``milliseconds``, as Ctrl-C would (``--query-timeout``:
    the query stops and its connection closes)."""
    if milliseconds is None:
        yield
        return

    def interrupt(_signal: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, milliseconds / 1000)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
