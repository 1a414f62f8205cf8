"""The startup options of ``metastore shell`` that need reading, as ksqlDB's CLI reads them:
``--define NAME=VALUE`` (session variables), ``--config-file`` (a Java properties file of ksql.*
and streams properties, sent with each request) and ``--output``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from cli.shell.console import OutputFormat, output_format

CLIENT_SIDE_PREFIXES = ("ssl.", "sasl.")
CLIENT_SIDE_NAMES = frozenset({"security.protocol"})
"""Properties of a config file for the client's own connection, never sent to the node (ksqlDB's
CLI keeps them out of the request)."""
MAX_CONFIG_BYTES = 1 << 20
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPED = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_BLANKS = " \t\f"


class OptionError(Exception):
    """A startup option that cannot be used (exit 2)."""


def parse_defines(given: list[str] | None) -> dict[str, str]:
    """``--define NAME=VALUE`` options as session variables."""
    variables: dict[str, str] = {}
    for pair in given or []:
        parts = pair.split("=")
        if len(parts) != 2:
            raise OptionError(f"Failed to parse argument {pair}: variables must be defined using "
                              "'=' (i.e. var=val).")
        variables[parts[0]] = parts[1]
    return variables


def parse_output(name: str) -> OutputFormat:
    try:
        return output_format(name)
    except ValueError as error:
        raise OptionError(str(error)) from error


def load_config_file(path: Path) -> dict[str, str]:
    """The request properties of a config file: its properties but the client-side ones."""
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise OptionError(f"Failed to load properties file: {path} (larger than "
                              f"{MAX_CONFIG_BYTES} bytes)")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise OptionError(f"Failed to load properties file: {path} ({error})") from error
    return {name: value for name, value in parse_properties(text).items()
            if not name.startswith(CLIENT_SIDE_PREFIXES) and name not in CLIENT_SIDE_NAMES}


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file: ``name=value``, ``name: value`` or ``name value`` lines, ``#`` and
    ``!`` comments, a trailing backslash continuing a line, backslash escapes."""
    return dict(_name_and_value(line) for line in _logical_lines(text))


def _logical_lines(text: str) -> Iterator[str]:
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(_BLANKS)
        if pending is None and (not line or line[0] in "#!"):
            continue
        joined = line if pending is None else pending + line
        if _continues(line):
            pending = joined[:-1]
            continue
        pending = None
        yield joined
    if pending:
        yield pending


def _continues(line: str) -> bool:
    """Whether the line ends with an odd number of backslashes."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _name_and_value(line: str) -> tuple[str, str]:
    end = 0
    while end < len(line) and line[end] not in "=:" + _BLANKS:
        end += 2 if line[end] == "\\" else 1
    rest = line[end:].lstrip(_BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANKS)
    return _unescaped(line[:end]), _unescaped(rest)


def _unescaped(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        escaped = match.group(1)
        if len(escaped) == 5:
            return chr(int(escaped[1:], 16))
        return _ESCAPED.get(escaped, escaped)

    return _ESCAPE.sub(one, text)
