"""Errors of the language layer."""

from __future__ import annotations

from metastore.core.exceptions import MetastoreError


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


class PrepareError(ParseError):
    """A statement that parses but that ksqlDB's AST builder refuses (an integer literal beyond
    BIGINT, a DOUBLE literal beyond DOUBLE): ksqlDB words it as a failure to prepare the
    statement, at the literal's position, not as a syntax error."""

    code = "prepare_error"
    located = True
    """Whether the message gives the position, as ksqlDB's ParsingException does."""

    def __init__(self, description: str, line: int, column: int, statement: str = "") -> None:
        super().__init__(description, line, column, statement)
        where = f"line {line}:{column}: " if self.located else ""
        message = f"Failed to prepare statement: {where}{description}"
        if statement:
            message += f"\nStatement: {statement}"
        self.message = message
        self.args = (message,)


class TypeDefinitionError(PrepareError):
    """A type ksqlDB's SqlTypeParser refuses as it builds it (a DECIMAL's precision and scale,
    a STRUCT's repeated field name): a failure to prepare the statement, worded without a
    position, as ksqlDB's type classes raise it."""

    code = "type_definition_error"
    located = False


class TooComplexError(ParseError):
    """A statement beyond the bounds every node can replay and compile (see metastore.core.limits)."""

    code = "too_complex"


class VariableError(ParseError):
    """A ``${name}`` reference whose value (or, undefined, whose own text) cannot stand where it
    is used: ksqlDB's ``VariableSubstitutor`` refusal, ``Illegal argument at Line: L, Col: C.``"""

    code = "variable_error"

    def __init__(self, description: str, line: int, column: int, statement: str = "") -> None:
        super().__init__(description, line, column, statement)
        self.message = description
        self.args = (description,)
