"""Turn ksqlDB text into statements: ``parse(text) -> list[Statement]``."""

from __future__ import annotations

import functools

from sqlglot import Token, TokenType
from sqlglot.errors import TokenError

from metastore.core.limits import MAX_NESTING, MAX_STATEMENT_CHARS
from metastore.sql.dialect import Ksql, KsqlParser, KsqlTokenizer
from metastore.sql.exceptions import ParseError, TooComplexError
from metastore.sql.statements import CreateConnector, Statement
from metastore.sql.types import SqlType


def _position(sql: str, offset: int) -> tuple[int, int]:
    line = sql.count("\n", 0, offset) + 1
    return line, offset - (sql.rfind("\n", 0, offset) + 1) + 1


def tokenize(sql: str) -> list[Token]:
    try:
        return KsqlTokenizer(dialect=Ksql).tokenize(sql)
    except TokenError as error:
        offset = getattr(error, "start", None)
        line, column = _position(sql, offset) if isinstance(offset, int) else (1, 1)
        raise ParseError(f"Cannot read the text: {error}", line, column) from error


def split(sql: str) -> list[tuple[list[Token], str]]:
    """Each statement's tokens (without the ';') and its text (with it)."""
    chunks: list[tuple[list[Token], str]] = []
    current: list[Token] = []
    for token in tokenize(sql):
        if token.token_type == TokenType.SEMICOLON:
            if current:
                chunks.append((current, sql[current[0].start:token.end + 1]))
            current = []
        else:
            current.append(token)
    if current:
        chunks.append((current, sql[current[0].start:current[-1].end + 1]))
    return chunks


_OPENING = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE})
_CLOSING = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE})


def parse(sql: str) -> list[Statement]:
    """Every statement of ``sql``; the first syntax error raises :class:`ParseError`.

    A statement beyond the bounds of :mod:`metastore.core.limits` raises :class:`TooComplexError`
    before the (recursive) parser sees it, so parsing never depends on the interpreter's stack.
    """
    parser = KsqlParser()
    return [parse_chunk(parser, chunk, text, sql) for chunk, text in split(sql)]


def parse_chunk(parser: KsqlParser, chunk: list[Token], text: str, sql: str) -> Statement:
    """One statement of :func:`split` (its tokens and text) from the whole text ``sql``."""
    try:
        _check_bounds(chunk, text, sql)
        statement = parser.parse_ksql(chunk, sql)
    except TooComplexError as error:
        raise TooComplexError(error.description, error.line, error.column, text) from None
    except ParseError as error:
        raise type(error)(error.description, error.line, error.column, text) from None
    except RecursionError:
        line, column = _position(sql, chunk[0].start)
        raise TooComplexError("The statement is nested too deeply to parse", line, column,
                              text) from None
    return _with_text(statement, text)


def _check_bounds(chunk: list[Token], text: str, sql: str) -> None:
    if len(text) > MAX_STATEMENT_CHARS:
        line, column = _position(sql, chunk[0].start)
        raise TooComplexError(f"The statement is {len(text)} characters long; the limit is "
                              f"{MAX_STATEMENT_CHARS}", line, column)
    depth = 0
    for token in chunk:
        if token.token_type in _OPENING:
            depth += 1
            if depth > MAX_NESTING:
                line, column = _position(sql, token.start)
                raise TooComplexError(f"Parentheses nested deeper than {MAX_NESTING} levels",
                                      line, column)
        elif token.token_type in _CLOSING:
            depth -= 1


def _with_text(statement: Statement, text: str) -> Statement:
    """``statement`` with its own text; a CREATE CONNECTOR keeps the masked text it was given."""
    from dataclasses import replace

    if isinstance(statement, CreateConnector):
        return statement
    return replace(statement, text=text)


@functools.lru_cache(maxsize=4096)
def parse_type(text: str) -> SqlType:
    """A type from its text, e.g. ``ARRAY<STRUCT<A INTEGER>>`` (types are immutable: cached)."""
    tokens = tokenize(text)
    if not tokens:
        raise ParseError("Expecting a type", 1, 1)
    return KsqlParser().parse_type(tokens, text)
