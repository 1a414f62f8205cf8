"""The properties files of a migrations project (``ksql-migrations.properties``, ``apply
--headers``), read as Java reads them (ISO-8859-1, :mod:`metastore.core.java_properties`) and refused
(exit 2) as ksqlDB's ``PropertiesUtil`` refuses them."""

from __future__ import annotations

from pathlib import Path

from cli.migrations.errors import usage_error
from metastore.core.java_properties import PropertiesFormatError
from metastore.core.java_properties import parse_properties as parse_java_properties

_FORBIDDEN_PREFIXES = ("java.", "os.", "sun.", "user.", "line.separator", "path.separator",
                       "file.separator")
"""ksqlDB's ``PropertiesUtil`` refuses a file that sets Java's own system properties."""


def parse_properties(text: str) -> dict[str, str]:
    """Every entry of ``text``; a malformed escape is a usage error (exit 2)."""
    try:
        return parse_java_properties(text)
    except PropertiesFormatError as error:
        raise usage_error(str(error)) from error


def load_properties(path: Path) -> dict[str, str]:
    """The entries of the file at ``path``, refused (exit 2) when it cannot be read or sets a
    Java system property."""
    try:
        text = path.read_bytes().decode("iso-8859-1")
    except OSError as error:
        raise usage_error(f"Failed to load properties file: {path} ({error.strerror})") from error
    entries = parse_properties(text)
    forbidden = sorted(key for key in entries if key.startswith(_FORBIDDEN_PREFIXES))
    if forbidden:
        raise usage_error(f"Property file {path} contains the following blacklisted properties "
                          f"(please remove them and try again): {', '.join(forbidden)}")
    return entries
