"""A CREATE CONNECTOR's properties as Kafka Connect takes them, and its text as answers show it.

ksqlDB hands Connect each property's literal as a string (``literal.toString()`` in Java: a
boolean is ``true``/``false``, NULL is ``null``, a decimal keeps its digits, a number with an
exponent is a Java double's text) and sets ``name`` to the connector's name. The statement's
text is shown masked wherever it appears (answers, errors, logs), as ksqlDB's QueryMask does:
every value but ``connector.class`` is ``'[string]'``, so a password in a connector's config is
never echoed.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

CONNECTOR_CLASS = "connector.class"
MASK = "'[string]'"


def with_name(config: dict[str, str], name: str) -> dict[str, str]:
    """``config`` with ``name`` set to the connector's (over any the user gave)."""
    return {**config, "name": name}


def java_number(text: str) -> str:
    """A numeric literal's Java text: an integer as written, a decimal (``1.50``, ``.5``) as
    Java's BigDecimal prints it, a number with an exponent as Java's ``Double.toString``."""
    if not any(c in text for c in ".eE"):
        return str(int(text))
    if "e" not in text.lower():
        try:
            return str(Decimal(text))
        except InvalidOperation:
            return text
    return java_double(float(text))


def java_double(value: float) -> str:
    """``Double.toString`` of a finite ``value``: plain between 10^-3 and 10^7 (with a fraction
    digit), else computerized scientific notation (``1.5E10``, ``1.0E-4``); both with the
    shortest digits that read back as ``value``, as Java's and Python's repr choose them."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else f"{text}.0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    shown = "".join(map(str, digits))
    mantissa = f"{shown[0]}.{shown[1:] or '0'}"
    return f"{'-' if sign else ''}{mantissa}E{exponent + len(shown) - 1}"


def masked_create(kind: str, name: str, config: dict[str, str], if_not_exists: bool) -> str:
    """The text a CREATE CONNECTOR is shown with: its values masked but the class."""
    pairs = ", ".join(f"{_quoted(key)}={_quoted(value) if key == CONNECTOR_CLASS else MASK}"
                      for key, value in config.items())
    exists = " IF NOT EXISTS" if if_not_exists else ""
    return f"CREATE {kind} CONNECTOR{exists} {_identifier(name)} WITH ({pairs});"


_CREATE_CONNECTOR = re.compile(r"\bCREATE\s+(?:SOURCE|SINK)\s+CONNECTOR\b", re.IGNORECASE)
_PROPERTY = re.compile(r"""(?P<key>'(?:[^']|'')*'|"(?:[^"]|"")*"|`(?:[^`]|``)*`|[\w.]+)"""
                       r"""(?P<equals>\s*=\s*)(?P<value>'(?:[^']|'')*'|[^,)\s]+)""")
_FOUND = re.compile(r"(?P<found>found |Got: )'(?:[^']|'')*'?")
"""What a parse error quotes of the text (``found 'x'``, ``Got: 'x'``), which may be a value."""


def masked_text(text: str) -> str:
    """``text`` with every ``key = value`` masked but ``connector.class``'s, and what a parse
    error quotes of it, when it holds a CREATE CONNECTOR (as ksqlDB's QueryMask does with a text
    it cannot parse): what an error shows of a request that may hold a connector's
    credentials."""
    if not _CREATE_CONNECTOR.search(text):
        return text

    def mask(match: re.Match[str]) -> str:
        key = match.group("key").strip("'\"`")
        value = match.group("value") if key.lower() == CONNECTOR_CLASS else MASK
        return f"{match.group('key')}{match.group('equals')}{value}"

    return _FOUND.sub(lambda match: f"{match.group('found')}{MASK}", _PROPERTY.sub(mask, text))


def _identifier(name: str) -> str:
    plain = name.isupper() and name.replace("_", "").isalnum() and not name[0].isdigit()
    return name if plain else "`" + name.replace("`", "``") + "`"


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


__all__ = ["CONNECTOR_CLASS", "java_double", "java_number", "masked_create", "masked_text",
           "with_name"]
