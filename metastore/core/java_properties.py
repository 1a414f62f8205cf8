"""Java's ``.properties`` format, as ``java.util.Properties.load`` reads it: the format of
``ksql-migrations.properties``, of ``migrations apply --headers`` files, of the shell's
``--config-file`` and of a node's Kafka Connect credentials file.

A logical line continues onto the next natural line after an odd number of trailing
backslashes; blank lines and lines whose first visible character is ``#`` or ``!`` are comments;
the key ends at the first unescaped ``=``, ``:`` or blank, and one ``=`` or ``:`` (with blanks
around it) separates it from the value; ``\\t``, ``\\n``, ``\\r``, ``\\f`` and ``\\uXXXX`` are
escapes and a backslash before any other character stands for that character.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

BLANKS = " \t\f"
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|u|.|$)", re.DOTALL)
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesFormatError(ValueError):
    """Text Java's ``Properties.load`` refuses (a malformed ``\\uXXXX``)."""


def parse_properties(text: str) -> dict[str, str]:
    """Every entry of ``text``; a later entry of the same key wins."""
    entries: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_entry(line)
        entries[_unescape(key)] = _unescape(value)
    return entries


def _logical_lines(text: str) -> Iterator[str]:
    pending: str | None = None
    for natural in re.split(r"\r\n|\r|\n", text):
        line = natural.lstrip(BLANKS)
        if pending is None:
            if not line or line[0] in "#!":
                continue
            pending = ""
        if _continues(line):
            pending += line[:-1]
            continue
        yield pending + line
        pending = None
    if pending:
        yield pending


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_entry(line: str) -> tuple[str, str]:
    index, size = 0, len(line)
    while index < size and line[index] not in "=:" + BLANKS:
        index += 2 if line[index] == "\\" else 1
    key = line[:min(index, size)]
    rest = line[min(index, size):].lstrip(BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(BLANKS)
    return key, rest


def _unescape(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        escaped = match.group(1)
        if escaped == "u":
            raise PropertiesFormatError("Malformed \\uxxxx encoding in a properties file")
        if len(escaped) == 5:
            return chr(int(escaped[1:], 16))
        return _SIMPLE_ESCAPES.get(escaped, escaped)

    return _ESCAPE.sub(replace, text)
