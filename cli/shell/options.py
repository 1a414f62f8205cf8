"""The startup options of ``metastore shell`` that need reading, as ksqlDB's CLI reads them:
``--define NAME=VALUE`` (session variables), ``--config-file`` (a Java properties file of ksql.*
and streams properties, sent with each request) and ``--output``."""

from __future__ import annotations

from pathlib import Path

from cli.shell.console import OutputFormat, output_format
from metastore.core.java_properties import PropertiesFormatError, parse_properties

CLIENT_SIDE_PREFIXES = ("ssl.", "sasl.")
CLIENT_SIDE_NAMES = frozenset({"security.protocol"})
"""Properties of a config file for the client's own connection, never sent to the node (ksqlDB's
CLI keeps them out of the request)."""
MAX_CONFIG_BYTES = 1 << 20


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
    try:
        entries = parse_properties(text)
    except PropertiesFormatError as error:
        raise OptionError(f"Failed to load properties file: {path} ({error})") from error
    return {name: value for name, value in entries.items()
            if not name.startswith(CLIENT_SIDE_PREFIXES) and name not in CLIENT_SIDE_NAMES}
