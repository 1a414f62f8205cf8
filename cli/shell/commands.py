"""The CLI's own commands, recognized before a line is parsed as SQL, as ksqlDB's CLI recognizes
them: a line whose first words are a command's name, in any case; its arguments the rest of the
line split at unquoted whitespace, their single quotes removed; a trailing ``;`` ignored. Their
help and messages are ksqlDB's CLI's."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cli.client import ClientError, StatementFailedError
from cli.shell.connection import Connection
from cli.shell.console import VALID_FORMATS, Console, SpoolError, output_format
from cli.shell.history import History
from cli.shell.script import ScriptRunner

_WORD = re.compile(r"(?:'(?:[^']|'')*'|[^\s'])+|'(?:[^']|'')*")


class CommandError(Exception):
    """A CLI command used wrongly (its message ends with the command's help)."""


@dataclass(frozen=True)
class CliCommand:
    name: str
    args: tuple[str, ...]


@dataclass
class Shell:
    console: Console
    connection: Connection
    history: History
    scripts: ScriptRunner
    exiting: bool = False


@dataclass(frozen=True)
class _Spec:
    min_args: int
    max_args: int
    help: str
    run: Callable[[Shell, tuple[str, ...]], None]


def recognize(line: str) -> CliCommand | None:
    """The CLI command ``line`` is, or None when it is SQL."""
    words = _WORD.findall(line.strip().rstrip(";"))
    for name in COMMANDS:
        size = len(name.split())
        if " ".join(words[:size]).lower() == name:
            return CliCommand(name, tuple(_unquoted(word) for word in words[size:]))
    return None


def _unquoted(word: str) -> str:
    if len(word) >= 2 and word[0] == word[-1] == "'":
        return word[1:-1].replace("''", "'")
    return word


def execute(command: CliCommand, shell: Shell) -> None:
    """Run a CLI command (EXIT sets ``shell.exiting``); :class:`CommandError` when misused."""
    spec = COMMANDS[command.name]
    if len(command.args) < spec.min_args:
        raise CommandError(f"Too few parameters\n{spec.help}")
    if len(command.args) > spec.max_args:
        raise CommandError(f"Too many parameters\n{spec.help}")
    spec.run(shell, command.args)


def _help(shell: Shell, _args: tuple[str, ...]) -> None:
    echo = shell.console.echo
    echo()
    echo("Description:")
    echo("\tThe metastore shell is ksqlDB's CLI against a metastore node: a terminal-based "
         "interactive shell for running statements and queries. Each command should be on a "
         "separate line. For the statements' syntax, see ksqlDB's documentation at "
         "https://docs.ksqldb.io/en/latest/developer-guide/syntax-reference/")
    echo()
    for spec in COMMANDS.values():
        echo(spec.help)
        echo()
    echo()
    echo(KEYBOARD_AND_DEFAULTS)


def _clear(shell: Shell, _args: tuple[str, ...]) -> None:
    shell.console.echo("\033[H\033[2J")


def _output(shell: Shell, args: tuple[str, ...]) -> None:
    console = shell.console
    if not args:
        console.echo(f"Current output format: {console.output.value}")
        return
    try:
        console.output = output_format(args[0])
    except ValueError:
        console.echo(f"Invalid output format: '{args[0].upper()}' (valid formats: "
                     f"{VALID_FORMATS})")
        return
    console.echo(f"Output format set to {console.output.value}")


def _history(shell: Shell, _args: tuple[str, ...]) -> None:
    for index, line in enumerate(shell.history.entries(), start=1):
        shell.console.echo(f"{index:4d}: {line}")


def _version(shell: Shell, _args: tuple[str, ...]) -> None:
    try:
        version = shell.connection.server_info().get("version")
    except StatementFailedError as error:
        shell.console.echo(f"Error {error.error_code}: {error.message}")
        return
    except ClientError as error:
        shell.console.echo(f"Error: {error}")
        return
    shell.console.echo(f"Version: {version}")


def _exit(shell: Shell, _args: tuple[str, ...]) -> None:
    shell.exiting = True


def _run_script(shell: Shell, args: tuple[str, ...]) -> None:
    shell.scripts.run_file(Path(args[0]))


def _server(shell: Shell, args: tuple[str, ...]) -> None:
    console = shell.console
    if not args:
        console.echo(shell.connection.url)
        return
    if not args[0].startswith(("http://", "https://")):
        console.echo("Server URL must begin with protocol (e.g., http:// or https://)")
        return
    try:
        shell.connection.switch(args[0])
    except ClientError as error:
        console.echo(f"Error: {error}")
        return
    console.echo(f"Server now: {shell.connection.url}")
    problem = shell.connection.problem()
    if problem:
        console.echo(problem)


def _spool(shell: Shell, args: tuple[str, ...]) -> None:
    if args[0].upper() == "OFF":
        shell.console.spool_off()
        return
    try:
        shell.console.spool_to(Path(args[0]))
    except SpoolError as error:
        shell.console.echo(f"Error: {error}")


COMMANDS: dict[str, _Spec] = {
    "help": _Spec(0, 0, "help:\n\tShow this message.", _help),
    "clear": _Spec(0, 0, "clear:\n\tClear the current terminal.", _clear),
    "output": _Spec(0, 1, "output:\n\tView the current output format.\n\noutput <format>;\n\n"
                          f"\tSet the output format to <format> (valid formats: {VALID_FORMATS})"
                          "\n\n\tFor example: \"output JSON;\"\n", _output),
    "history": _Spec(0, 0, "history:\n\tShow previous lines entered during the current CLI "
                           "session. You can use up and down arrow keys to view previous lines.",
                     _history),
    "version": _Spec(0, 0, "version:\n\tGet the current server version.", _version),
    "exit": _Spec(0, 0, "exit:\n\tExit the CLI.", _exit),
    "run script": _Spec(1, 1, "run script <path_to_sql_file>:\n\tLoad and run the statements in "
                              "the supplied file.\n\tNote: the file must be UTF-8 encoded.",
                        _run_script),
    "server": _Spec(0, 1, "server:\n\tShow the current server\n\nserver <server>:\n\tChange the "
                          "current server to <server>\n\t example: \"server "
                          "http://my.awesome.server.com:9098;\"", _server),
    "spool": _Spec(1, 1, "spool [<path_to_file>|OFF]: \n\tStores issued commands and their "
                         "results into a file. Only one spool may \n\tbe active at a time and "
                         "can be closed by issuing ``SPOOL OFF``. Commands are \n\t prefixed "
                         "with ``metastore> `` to differentiate from output.", _spool),
}
"""The commands, in HELP's order (ksqlDB's CLI's)."""

KEYBOARD_AND_DEFAULTS = """Keyboard shortcuts:

    The metastore shell supports these keyboard shortcuts:

CTRL+D:
\tEnd your shell session.
CTRL+R:
\tSearch your command history.
Up and Down arrow keys:
\tScroll up or down through your command history.

Default behavior:

    Lines are read one at a time and are sent to the server as SQL unless one of the following \
is true:

    1. The line is empty or entirely whitespace. In this case, no request is made to the server.

    2. The line is not an in-built CLI command and does not end with a semi-colon. In this case, \
the shell enters multi-line mode where lines are continuously read until a line is encountered \
that is terminated with a semi-colon; the statements of the lines read are then run one by one.
"""
