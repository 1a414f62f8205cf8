"""The ``metastore shell`` command: ksqlDB's CLI options, an interactive session, or ``-e`` /
``-f`` statements run once with an exit code (0, 1 when a statement was rejected, 2 when the
node could not be reached or an option or file could not be used)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from cli.client import server_url
from cli.options import Server, User, basic_auth
from cli.output import tables_within
from cli.shell.commands import CommandError, Shell, execute, recognize
from cli.shell.connection import Connection
from cli.shell.console import Console
from cli.shell.history import History, history_file
from cli.shell.options import OptionError, load_config_file, parse_defines, parse_output
from cli.shell.script import ScriptError, ScriptRunner, read_script
from cli.shell.session import Session

Define = Annotated[list[str] | None, typer.Option(
    "--define", "-d", help="A session variable NAME=VALUE, as DEFINE (repeatable).")]
RowLimit = Annotated[int | None, typer.Option(
    "--query-row-limit", min=1, help="Stop a query after this many rows.")]
Timeout = Annotated[int | None, typer.Option(
    "--query-timeout", min=1, help="Stop a query after this many milliseconds.")]
ConfigFile = Annotated[Path | None, typer.Option(
    "--config-file", help="A properties file of ksql.* and streams properties sent with each "
    "request (ssl.*, sasl.* and security.protocol are left out).")]
Execute = Annotated[str | None, typer.Option(
    "--execute", "-e", help="Run these statements and exit.")]
File = Annotated[Path | None, typer.Option("--file", "-f", help="Run this file's statements "
                                                                "and exit.")]
Output = Annotated[str, typer.Option("--output", help="TABULAR or JSON (OUTPUT changes it).")]


def shell(server: Server = None, user: User = None, define: Define = None,
          query_row_limit: RowLimit = None, query_timeout: Timeout = None,
          config_file: ConfigFile = None, execute_: Execute = None, file: File = None,
          output: Output = "TABULAR") -> None:
    """ksqlDB's CLI: an interactive session (statements end with ';'; HELP lists the CLI's
    commands; EXIT or Ctrl-D leaves), or with -e / -f statements run one by one, then exit."""
    try:
        session = Session(properties=load_config_file(config_file) if config_file else {},
                          row_limit=query_row_limit, timeout_ms=query_timeout)
        for name, value in parse_defines(define).items():
            session.define(name, value)
        console = Console(parse_output(output))
        if execute_ is not None and file is not None:
            raise OptionError("-e and -f cannot be given together")
        script = read_script(file) if file is not None else None
    except (OptionError, ScriptError) as error:
        typer.echo(f"Error: {error}", err=True)
        raise typer.Exit(2) from error
    with opened(session, console, server, user) as opened_shell:
        if execute_ is not None or script is not None:
            raise typer.Exit(run_once(opened_shell, _with_semicolon(execute_) or script or ""))
        interact(opened_shell)


@contextlib.contextmanager
def opened(session: Session, console: Console, server: str | None,
           user: str | None) -> Iterator[Shell]:
    connection = Connection(server_url(server), basic_auth(user))
    history = History(history_file())
    try:
        with tables_within(console.width()):
            yield Shell(console, connection, history, ScriptRunner(session, connection, console))
    finally:
        console.spool_off(quiet=True)
        connection.close()


def run_once(shell: Shell, text: str) -> int:
    """``-e`` or ``-f``: warn when the node does not answer, run the statements, the exit code."""
    problem = shell.connection.problem()
    if problem:
        shell.console.echo(problem)
    return int(shell.scripts.run(text))


def _with_semicolon(statements: str | None) -> str | None:
    """``-e`` text ends with ';' (ksqlDB's CLI appends it)."""
    if statements is None or statements.rstrip().endswith(";") or not statements.strip():
        return statements
    return statements + ";"


def interact(shell: Shell) -> None:
    welcome(shell)
    buffer: list[str] = []
    while True:
        try:
            line = shell.console.read_line(continued=bool(buffer))
        except EOFError:
            shell.console.echo("")
            break
        except KeyboardInterrupt:
            shell.console.echo("^C")
            buffer = []
            continue
        shell.history.add(line)
        try:
            buffer = take_line(shell, buffer, line)
        except KeyboardInterrupt:
            shell.console.echo("^C")
            buffer = []
        if shell.exiting:
            break
    shell.console.echo("Exiting metastore.")
    shell.history.save()


def take_line(shell: Shell, buffer: list[str], line: str) -> list[str]:
    """Run a CLI command, or the statements that ``line`` completes; the lines still waiting for
    their ';'."""
    command = recognize(line) if not buffer else None
    if command is not None:
        try:
            execute(command, shell)
        except CommandError as error:
            shell.console.echo(f"Error: {error}")
        return []
    text = "\n".join([*buffer, line]).strip()
    if not text:
        return []
    if not text.endswith(";"):
        return [*buffer, line]
    shell.scripts.run(text)
    return []


def welcome(shell: Shell) -> None:
    from metastore import __version__

    version, status = shell.connection.versions()
    echo = shell.console.echo
    echo(f"CLI v{__version__}, Server v{version} located at {shell.connection.url}")
    echo(f"Server Status: {status}")
    echo()
    echo("Having trouble? Type 'help' (case-insensitive) for a rundown of how things work!")
    echo()
    problem = shell.connection.problem()
    if problem:
        echo(problem)
