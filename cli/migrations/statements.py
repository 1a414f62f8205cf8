"""The statements of a migration file, as ksqlDB's ``CommandParser`` takes them.

:func:`split_sql` splits a file's text at semicolons outside 'strings', dropping ``--`` and
``/* */`` comments; text after the last semicolon is an error. Each statement is then checked
(:func:`check_supported`: a statement starting with SELECT, DESCRIBE, EXPLAIN, PRINT, SHOW or
LIST, or RUN SCRIPT, is refused; so is anything the parser refuses), substituted with the
variables in force before it and parsed with the project's parser (:func:`parse_command`).
Everything else a node accepts may be in a migration: CREATE / DROP / ALTER of streams, tables
and types, CREATE ... AS SELECT, INSERT INTO ... SELECT / VALUES, TERMINATE, PAUSE, RESUME,
ASSERT, SET, UNSET, DEFINE and UNDEFINE.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cli.migrations.errors import MigrationError, usage_error

if TYPE_CHECKING:
    from metastore.sql.statements import Statement

UNSUPPORTED = ("DESCRIBE", "EXPLAIN", "SELECT", "PRINT", "SHOW", "LIST")
"""The first words of the statements a migration may not contain (besides RUN SCRIPT)."""


def split_sql(text: str) -> list[str]:
    """Each statement of ``text`` with its ';', comments removed, quotes kept as written."""
    statements: list[str] = []
    current: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "'":
            end = _closing(text, "'", index + 1)
            current.append(text[index:end + 1])
            index = end + 1
        elif text.startswith("--", index):
            newline = text.find("\n", index + 2)
            index = len(text) if newline < 0 else newline + 1
        elif text.startswith("/*", index):
            index = _closing(text, "*/", index + 2) + 2
        elif char == ";":
            statements.append("".join(current) + ";")
            current = []
            index += 1
        else:
            current.append(char)
            index += 1
    rest = "".join(current)
    if rest.strip():
        raise MigrationError(f"Unmatched command at end of file; missing semicolon: '{rest}'")
    return statements


def _closing(text: str, token: str, start: int) -> int:
    found = text.find(token, start)
    if found < 0:
        raise MigrationError(f"Invalid sql - failed to find closing token '{token}'")
    return found


def check_supported(statement: str) -> None:
    """Refuse the statement kinds ksqlDB's migrations tool refuses, by their first words."""
    words = statement.upper().split()
    if words and words[0] in UNSUPPORTED:
        raise MigrationError(f"'{words[0]}' statements are not supported.")
    if words[:2] == ["RUN", "SCRIPT"]:
        raise MigrationError("'RUN SCRIPT' statements are not supported.")


@dataclass(frozen=True)
class ParsedCommand:
    """A statement of a migration: ``text`` substituted, as it is sent; ``statement`` parsed."""

    text: str
    statement: Statement


def parse_command(command: str, variables: Mapping[str, str]) -> ParsedCommand:
    """``command`` checked, substituted with ``variables`` and parsed."""
    from metastore.core.exceptions import MetastoreError
    from metastore.sql.variables import parse_request

    check_supported(command)
    try:
        parsed = parse_request(command, variables)
    except MetastoreError as error:
        raise MigrationError(f"Failed to parse the statement. Statement: {command.strip()}. "
                             f"Reason: {error}") from error
    if len(parsed) != 1:
        raise MigrationError(f"Failed to parse the statement. Statement: {command.strip()}. "
                             "Reason: expected exactly one statement")
    return ParsedCommand(parsed[0].text, parsed[0])


def parse_defines(pairs: list[str] | None) -> dict[str, str]:
    """``apply --define name=value`` options, as ksqlDB's ``VariableParser`` reads them."""
    variables: dict[str, str] = {}
    for pair in pairs or []:
        parts = pair.split("=")
        while len(parts) > 1 and not parts[-1]:
            parts.pop()  # Java's String.split drops trailing empty parts
        if len(parts) != 2:
            raise usage_error(f"Failed to parse argument {pair}: variables must be defined "
                              "using '=' (i.e. var=val).")
        variables[parts[0]] = parts[1]
    return variables
