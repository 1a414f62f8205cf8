"""ksqlDB's session variables: ``DEFINE``, ``UNDEFINE``, ``SHOW VARIABLES`` and ``${name}``.

A request starts with the variables of its ``sessionVariables`` (names case-insensitive, as
ksqlDB's ``SessionProperties`` keeps them); each ``DEFINE`` / ``UNDEFINE`` changes them for the
statements after it, and each statement is substituted with those in force before it is parsed
(ksqlDB's ``RequestHandler`` prepares every statement with the session's variables). Nothing of
this reaches the log: a statement is written as substituted.

:func:`substitute` follows ksqlDB's ``VariableSubstitutor``:

- inside a 'string' (a literal, a SET or DEFINE value, a topic name), ``${name}`` of a defined
  variable is replaced by its value, single quotes doubled; an undefined one is left as written;
  ``$${name}`` is the escaped, literal ``${name}``;
- elsewhere ``${name}`` stands for an identifier (a source, column, type or topic name) or a
  literal (in an expression, a VALUES list, a WITH value). An identifier's value must be a name,
  optionally in double quotes or backticks (``Identifier names cannot start with '@' ...``); a
  literal's a 'string' (its quotes doubled inside), a boolean or a number. Anything else, an
  undefined variable included, is refused as ``Illegal argument at Line: L, Col: C.``, so a
  reference *outside* quotes always stands for exactly one token.

What is not guarded, as in ksqlDB (``ParserUtil.sanitize``): inside a 'string', a value that is
itself quoted (starts and ends with ``'``) keeps those outer quotes, so ``WHERE name = '${n}'``
with ``n`` = ``' OR TRUE OR '`` becomes ``WHERE name = '' OR TRUE OR ''``. Values are trusted
session input, not a defence against SQL injection.

The substituted text of one statement is bounded while it is built: once it would exceed
:data:`~metastore.core.limits.MAX_STATEMENT_CHARS` a :class:`TooComplexError` is raised (the parser's
error for an oversized statement) before more is allocated.

ksqlDB tells identifiers from literals by its grammar; here the words around the reference do
(after STREAM, TABLE, TYPE, FROM, JOIN, INTO, DESCRIBE, FUNCTION, TOPIC, TERMINATE, AS, EXISTS,
COLUMN, ADD, SUBJECT or a '.', before a '.', or in the column list of a CREATE, INSERT or ASSERT
and in the names of a WITH list, a reference is an identifier; elsewhere a literal, as
ksqlDB's grammar prefers a literal in an expression). Comments and quoted identifiers are left
alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from metastore.core.limits import MAX_STATEMENT_CHARS, MAX_SUBSTITUTED_CHARS
from metastore.sql.dialect import KsqlParser
from metastore.sql.exceptions import TooComplexError, VariableError
from metastore.sql.parser import parse_chunk, split
from metastore.sql.statements import DefineVariable, ListVariables, Statement, UndefineVariable

VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_@]*)\}")
"""ksqlDB's VARIABLE token: ``${`` IDENTIFIER ``}``."""
IDENTIFIER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_@]*")
"""ksqlDB's ``VALID_IDENTIFIER_NAMES``: what an identifier's value may be (once unquoted)."""
_NUMBER = re.compile(r"\s*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*")
_WORD = re.compile(r"[A-Za-z0-9_@$]+")

SUBSTITUTION_ENABLED = "ksql.variable.substitution.enable"
"""The setting that turns substitution off (honoured, as by ksqlDB, when a request's
``streamsProperties`` give it as a JSON boolean)."""

IDENTIFIER_ERROR = ("Identifier names cannot start with '@' and may only contain alphanumeric "
                    "values and '_'.")

_NAME_BEFORE = frozenset({
    "STREAM", "TABLE", "TYPE", "FROM", "JOIN", "INTO", "DESCRIBE", "FUNCTION", "TOPIC",
    "TERMINATE", "AS", "EXISTS", "COLUMN", "ADD", "SUBJECT", "CONNECTOR", ".", "->"})
"""Words after which ksqlDB's grammar wants an identifier."""
_LIST_OWNERS = frozenset({"STREAM", "TABLE", "INTO", "VALUES", "EXISTS"})
"""``<word> <name> (``: the parenthesis opens a list of column names."""


class Variables:
    """Variable name to value, names case-insensitive (the first spelling is kept), listed in
    ksqlDB's order (its ``TreeMap`` with ``CASE_INSENSITIVE_ORDER``)."""

    def __init__(self, initial: Mapping[str, Any] | Variables | None = None) -> None:
        self._values: dict[str, tuple[str, str]] = {}
        if isinstance(initial, Variables):
            self._values = dict(initial._values)
        else:
            for name, value in (initial or {}).items():
                self.define(str(name), session_value(value))

    def get(self, name: str) -> str | None:
        found = self._values.get(name.lower())
        return found[1] if found else None

    def define(self, name: str, value: str) -> None:
        known = self._values.get(name.lower())
        self._values[name.lower()] = (known[0] if known else name, value)

    def undefine(self, name: str) -> bool:
        """Forget ``name``; whether it was defined."""
        return self._values.pop(name.lower(), None) is not None

    def items(self) -> tuple[tuple[str, str], ...]:
        return tuple(self._values[key] for key in sorted(self._values))

    def __bool__(self) -> bool:
        return bool(self._values)


def session_value(raw: Any) -> str:
    """A ``sessionVariables`` value as ksqlDB keeps it (its ``toString()``)."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if raw is None:
        return "null"
    if isinstance(raw, int | float):
        return str(raw)
    return json.dumps(raw, separators=(",", ":"))


def substitution_enabled(properties: Mapping[str, Any] | None) -> bool:
    """Whether a request's ``streamsProperties`` leave substitution on (ksqlDB's RequestHandler
    reads the setting only when it is a boolean)."""
    value = (properties or {}).get(SUBSTITUTION_ENABLED)
    return value if isinstance(value, bool) else True


def parse_request(sql: str, variables: Mapping[str, Any] | Variables | None = None,
                  substitution: bool = True) -> list[Statement]:
    """Every statement of ``sql``, each substituted with the variables in force before it.

    ``variables``: the request's ``sessionVariables``. UNDEFINE statements come back knowing
    whether their variable was defined, SHOW VARIABLES with the variables at that point."""
    parser = KsqlParser()
    session = Variables(variables)
    statements: list[Statement] = []
    added = 0
    for chunk, text in split(sql):
        start = chunk[0].start
        statement: Statement | None = None
        if substitution and "$" in text:
            replaced = substitute(text, session, sql, start)
            added += len(replaced) - len(text)
            if added > MAX_SUBSTITUTED_CHARS:
                line, column = _position(sql, start)
                raise TooComplexError(
                    f"Variable substitution makes this request more than "
                    f"{MAX_SUBSTITUTED_CHARS} characters longer; the limit is "
                    f"{MAX_SUBSTITUTED_CHARS}. Split the request.", line, column)
            if replaced != text:
                statement = _parse_substituted(parser, sql, start, replaced)
        if statement is None:
            statement = parse_chunk(parser, chunk, text, sql)
        if isinstance(statement, DefineVariable):
            session.define(statement.name, statement.value)
        elif isinstance(statement, UndefineVariable):
            statement = replace(statement, defined=session.undefine(statement.name))
        elif isinstance(statement, ListVariables):
            statement = replace(statement, variables=session.items())
        statements.append(statement)
    return statements


def _parse_substituted(parser: KsqlParser, sql: str, start: int, text: str) -> Statement:
    """Parse a substituted statement on its own, as ksqlDB re-parses a statement after
    substitution: positions in its errors are the statement's own (line 1 is its first line).
    Work per statement is linear in the statement, not in the request before it."""
    padded = text
    chunks = split(padded)
    if len(chunks) != 1:  # values are checked to be one token: never more than one statement
        line, column = _position(sql, start)
        raise VariableError(f"Illegal argument at Line: {line}, Col: {column}.", line, column,
                            text)
    chunk, chunk_text = chunks[0]
    return parse_chunk(parser, chunk, chunk_text, padded)


def substitute(text: str, variables: Variables, sql: str | None = None,
               offset: int = 0) -> str:
    """``text`` (one statement) with its variable references replaced (see the module's doc).

    ``sql`` and ``offset``: the whole request and where ``text`` starts in it, for the line and
    column of an error."""
    whole = sql if sql is not None else text
    out = _Bounded(whole, offset)
    words: list[str] = []  # the significant tokens so far, upper-cased
    lists: list[str] = []  # per open parenthesis: "names", "with" or "values"
    i, size = 0, len(text)
    while i < size:
        char = text[i]
        if text.startswith("--", i) or text.startswith("/*", i):
            end = (_end(text, "\n", i) if char == "-" else _end(text, "*/", i + 2))
            out.append(text[i:end])
            i = end
            continue
        if char in "'\"`":
            end = _quoted_end(text, i, char)
            quoted = text[i:end]
            if char == "'":
                _in_string(quoted, variables, out)
            else:
                out.append(quoted)
            words.append("'" if char == "'" else "NAME")
            i = end
            continue
        match = VARIABLE.match(text, i)
        if match:
            line, column = _position(whole, offset + i)
            out.append(_value(match, variables, _wants_identifier(words, lists, text,
                                                                   match.end()), line, column))
            words.append("NAME")
            i = match.end()
            continue
        if char.isspace():
            out.append(char)
            i += 1
            continue
        word = _WORD.match(text, i)
        token = word.group(0) if word else text[i:i + 2] if text[i:i + 2] == "->" else char
        if token == "(":
            lists.append(_list_kind(words))
        elif token == ")" and lists:
            lists.pop()
        words.append(token.upper())
        out.append(token)
        i += len(token)
    return out.text()


class _Bounded:
    """The substituted text being built, refused (:class:`TooComplexError`) as soon as it would
    exceed :data:`MAX_STATEMENT_CHARS`, before the part that would exceed it is kept."""

    def __init__(self, sql: str, offset: int) -> None:
        self._parts: list[str] = []
        self._size = 0
        self._sql = sql
        self._offset = offset

    def append(self, part: str) -> None:
        self._size += len(part)
        if self._size > MAX_STATEMENT_CHARS:
            line, column = _position(self._sql, self._offset)
            raise TooComplexError(f"The statement is more than {MAX_STATEMENT_CHARS} characters "
                                  f"long once its variables are substituted; the limit is "
                                  f"{MAX_STATEMENT_CHARS}", line, column)
        self._parts.append(part)

    def text(self) -> str:
        return "".join(self._parts)


def _end(text: str, marker: str, start: int) -> int:
    found = text.find(marker, start)
    return len(text) if found < 0 else found + len(marker)


def _quoted_end(text: str, start: int, quote: str) -> int:
    """Past the closing quote of the quoted text at ``start`` (a doubled quote is escaped)."""
    i = start + 1
    while i < len(text):
        if text[i] == quote:
            if text.startswith(quote * 2, i):
                i += 2
                continue
            return i + 1
        i += 1
    return len(text)


def _in_string(quoted: str, variables: Variables, out: _Bounded) -> None:
    """Append a 'string' with the defined variables it names replaced (ksqlDB's
    lookupVariables: a value's single quotes doubled, ``$${name}`` kept as the text
    ``${name}``), piece by piece so that ``out`` bounds its size."""
    if not variables:
        out.append(quoted)
        return
    last = 0
    for match in _IN_STRING.finditer(quoted):
        out.append(quoted[last:match.start()])
        last = match.end()
        if match.group(1):
            out.append(match.group(0)[1:])
            continue
        value = variables.get(match.group(2))
        out.append(match.group(0) if value is None else sanitize(value))
    out.append(quoted[last:])


_IN_STRING = re.compile(r"(\$)?\$\{([A-Za-z_][A-Za-z0-9_@]*)\}")


def _list_kind(words: list[str]) -> str:
    if words and words[-1] == "WITH":
        return "with"
    if len(words) >= 2 and words[-2] in _LIST_OWNERS and _is_name(words[-1]):
        return "names"
    return "values"


def _is_name(word: str) -> bool:
    return word == "NAME" or bool(IDENTIFIER_NAME.fullmatch(word))


def _wants_identifier(words: list[str], lists: list[str], text: str, end: int) -> bool:
    previous = words[-1] if words else ""
    if previous in _NAME_BEFORE:
        return True
    if text[end:].lstrip().startswith("."):
        return True
    return bool(lists) and lists[-1] in ("names", "with") and previous in ("(", ",")


def _value(match: re.Match[str], variables: Variables, identifier: bool, line: int,
           column: int) -> str:
    """The replacement of one ``${name}`` outside quotes, checked as ksqlDB checks it."""
    value = variables.get(match.group(1))
    if value is None:
        value = match.group(0)
    where = f"Illegal argument at Line: {line}, Col: {column}."
    if identifier:
        if not IDENTIFIER_NAME.fullmatch(_unquoted_identifier(value)):
            raise VariableError(f"{where} {IDENTIFIER_ERROR} Got: '{value}'", line, column)
        return value
    if not _is_literal(value):
        raise VariableError(f"{where} Got: '{value}'", line, column)
    return sanitize(value)


def _unquoted_identifier(value: str) -> str:
    for quote in ('"', "`"):
        if len(value) >= 2 and value[0] == quote and value[-1] == quote:
            return value[1:-1].replace(quote * 2, quote)
    return value


def _is_literal(value: str) -> bool:
    if len(value) >= 2 and value[0] == "'" and value[-1] == "'":
        return True
    return value.lower() in ("true", "false") or bool(_NUMBER.fullmatch(value))


def sanitize(value: str) -> str:
    """ksqlDB's ``ParserUtil.sanitize``: single quotes doubled (inside the quotes of a quoted
    value), so a value never ends the string it is put in."""
    if len(value) >= 2 and value[0] == "'" and value[-1] == "'":
        return "'" + value[1:-1].replace("''", "'").replace("'", "''") + "'"
    return value.replace("'", "''")


def _position(sql: str, offset: int) -> tuple[int, int]:
    line = sql.count("\n", 0, offset) + 1
    return line, offset - (sql.rfind("\n", 0, offset) + 1) + 1

