"""Errors of the language layer."""

from __future__ import annotations

from metastore.exceptions import MetastoreError


class ParseError(MetastoreError):
    """Text that is not a valid statement; ``line`` and ``column`` are 1-based."""

    code = "parse_error"

    def __init__(self, description: str, line: int, column: int, statement: str = "") -> None:
        message = f"line {line}:{column}: Syntax Error\n{description}"
        if statement:
            message += f"\nStatement: {statement}"
        super().__init__(message)
        self.description = description
        self.line = line
        self.column = column
        self.statement = statement


class TooComplexError(ParseError):
    """A statement beyond the bounds every node can replay and compile (see metastore.limits)."""

    code = "too_complex"
