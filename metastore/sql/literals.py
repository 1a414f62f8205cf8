"""ksqlDB's range rules for numeric literals (its ``ParserUtil``), checked when a statement is
prepared: ksqlDB's grammar accepts any digits, its AST builder then refuses the literal, so the
statements before it in a request have run.

An integer literal (digits only, its minus sign included) must be a Java ``long``: ksqlDB reads
it with ``Long.parseLong`` and refuses one beyond BIGINT as an invalid numeric literal. A literal
with an exponent is a DOUBLE and must be finite. ksqlDB's grammar reads a minus sign before a
number as part of the literal, so ``-9223372036854775808`` is the smallest BIGINT. Its messages
point at the literal with ksqlDB's column (one past the 1-based one: its ``ParsingException``
counts the column twice).
"""

from __future__ import annotations

import math

from sqlglot import exp

from metastore.sql import statements as st
from metastore.sql.exceptions import PrepareError

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_LONG_DIGITS = len(str(_LONG_MAX))


def check_statement(statement: st.Statement) -> None:
    """Raise :class:`PrepareError` for the first numeric literal of ``statement`` that ksqlDB
    refuses."""
    trees: list[exp.Expr] = []
    query = getattr(statement, "query", None)
    if isinstance(query, st.Query):
        trees += [query.select, *query.partition_by]
    if isinstance(statement, st.InsertValues):
        trees += list(statement.values)
    for tree in trees:
        check_numeric_literals(tree)


def fits_long(text: str) -> bool:
    """Whether the integer literal ``text`` (digits, an optional minus sign) is a Java ``long``;
    its digits are counted before converting (Python refuses to convert very long texts)."""
    digits = text.removeprefix("-").lstrip("0")
    if len(digits) > _LONG_DIGITS:
        return False
    return _LONG_MIN <= int(text) <= _LONG_MAX


def check_numeric_literals(tree: exp.Expr) -> None:
    for literal in tree.find_all(exp.Literal):
        if literal.is_string:
            continue
        text = str(literal.this)
        negative = isinstance(literal.parent, exp.Neg)
        shown = f"-{text}" if negative else text
        problem = None
        if any(c in text for c in "eE"):
            if math.isinf(float(text)):
                problem = f"Number overflows DOUBLE: {shown}"
        elif text.isdigit() and not fits_long(shown):
            problem = f"Invalid numeric literal: {shown}"
        if problem is not None:
            line, end = literal.meta.get("line"), literal.meta.get("col")
            if not isinstance(line, int) or not isinstance(end, int):
                line, end = 1, len(shown)
            raise PrepareError(problem, line, end - len(shown) + 2)
