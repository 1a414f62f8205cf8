"""Data-driven parser tests: tests/data/parser/{valid,invalid}.sql."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from metastore.sql import statements as st
from metastore.sql.exceptions import ParseError
from metastore.sql.parser import parse, parse_type
from metastore.sql.types import quote

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "parser"


def cases(name: str, directive: str) -> list[tuple[str, str]]:
    """(expectation, statement text) pairs: each ``-- directive:`` line, then its statement."""
    found: list[tuple[str, str]] = []
    expectation: str | None = None
    lines: list[str] = []
    for line in (FIXTURES / name).read_text().splitlines():
        if line.startswith(f"-- {directive}:"):
            if expectation is not None:
                found.append((expectation, "\n".join(lines)))
            expectation, lines = line.split(":", 1)[1].strip(), []
        elif expectation is not None and not (line.startswith("-- ") and not lines):
            lines.append(line)
    if expectation is not None:
        found.append((expectation, "\n".join(lines)))
    return found


def columns(defs: tuple[st.ColumnDef, ...]) -> str:
    rendered = []
    for column in defs:
        text = f"{quote(column.name)} {column.type.sql()}"
        if column.role is st.ColumnRole.HEADER:
            text += f" HEADER('{column.header_key}')"
        elif column.role is not st.ColumnRole.VALUE:
            text += f" {column.role.value}"
        rendered.append(text)
    return "[" + ", ".join(rendered) + "]"


def properties(props: dict[str, st.PropertyValue]) -> str:
    return "{" + ", ".join(f"{k}={props[k]}" for k in sorted(props)) + "}"


def query(q: st.Query) -> str:
    text = f"query={q.select.sql()}"
    if q.partition_by:
        text += " partition_by=[" + ", ".join(e.sql() for e in q.partition_by) + "]"
    if q.window:
        text += f" window={q.window.kind}/{q.window.size_ms}"
    if q.within_ms:
        text += f" within={q.within_ms}"
    if q.emit_changes:
        text += " emit_changes"
    return text


def flags(statement: st.Statement, *names: str) -> str:
    return "".join(f" {n}" for n in names if getattr(statement, n))


def _exists(s: st.AssertTopic | st.AssertSchema) -> str:
    return "" if s.exists else " not_exists"


_SHAPES: list[tuple[Any, Callable[[Any], str]]] = [
    (st.CreateSource, lambda s: f" {s.kind.value} {s.name} {columns(s.columns)} "
                                f"{properties(s.properties)}"
                                + flags(s, "or_replace", "if_not_exists", "is_source")),
    (st.CreateAsSelect, lambda s: f" {s.kind.value} {s.name} {properties(s.properties)} "
                                  f"{query(s.query)}"),
    (st.InsertInto, lambda s: f" {s.target} {query(s.query)}"),
    (st.InsertValues, lambda s: f" {s.target} columns=[{', '.join(s.columns)}]"),
    (st.DropSource, lambda s: f" {s.kind.value} {s.name}" + flags(s, "if_exists",
                                                                   "delete_topic")),
    (st.Terminate, lambda s: f" {s.query_id or 'ALL'}"),
    (st.AlterSource, lambda s: f" {s.kind.value} {s.name} {columns(s.columns)}"),
    (st.CreateType, lambda s: f" {s.name} {s.type.sql()}"),
    (st.DropType, lambda s: f" {s.name}" + flags(s, "if_exists")),
    (st.ListObjects, lambda s: f" {s.what}" + flags(s, "extended", "show_all")),
    (st.ListVariables, lambda s: ""),
    (st.DefineVariable, lambda s: f" {s.name}={s.value}"),
    (st.UndefineVariable | st.DescribeFunction, lambda s: f" {s.name}"),
    (st.Describe, lambda s: f" {s.name}" + flags(s, "extended")),
    (st.SelectStatement, lambda s: f" {query(s.query)}"),
    (st.SetProperty, lambda s: f" {s.name}={s.value}"),
    (st.AssertSource, lambda s: f" {s.kind.value} {s.name} {columns(s.columns)} "
                                f"{properties(s.properties)}"),
    (st.AssertValues, lambda s: f" {s.target} columns=[{', '.join(s.columns)}] "
                                f"values=[{', '.join(v.sql() for v in s.values)}]"
                                + flags(s, "tombstone")),
    (st.AssertTopic, lambda s: f" {s.topic} {properties(s.properties)} "
                               f"timeout={s.timeout_ms}" + _exists(s)),
    (st.AssertSchema, lambda s: f" subject={s.subject} id={s.schema_id} "
                                f"timeout={s.timeout_ms}" + _exists(s)),
]
"""Each statement class's fields, as the fixtures write them after the class's name."""


def render(s: st.Statement) -> str:
    kind = type(s).__name__
    shape = next((shape for classes, shape in _SHAPES if isinstance(s, classes)), None)
    if shape is None:
        raise AssertionError(kind)
    return kind + shape(s)


VALID = cases("valid.sql", "expect")
INVALID = cases("invalid.sql", "error")


@pytest.mark.parametrize(("expected", "text"), VALID,
                         ids=[e.split(" ")[0] + str(i) for i, (e, _) in enumerate(VALID)])
def test_valid_statement_parses_as_expected(expected: str, text: str) -> None:
    [statement] = parse(text)
    assert render(statement) == expected
    assert statement.text == text.strip()


@pytest.mark.parametrize(("expected", "text"), INVALID, ids=[str(i) for i in range(len(INVALID))])
def test_invalid_statement_reports_line_and_column(expected: str, text: str) -> None:
    position, fragment = expected.split(" ", 1)
    line, column = (int(part) for part in position.split(":"))
    with pytest.raises(ParseError) as raised:
        parse(text)
    error = raised.value
    assert (error.line, error.column) == (line, column), error.message
    assert fragment in error.message
    assert error.message.startswith(f"line {line}:{column}: Syntax Error")


def test_fixtures_are_not_empty() -> None:
    assert len(VALID) >= 20 and len(INVALID) >= 10


def test_several_statements_keep_their_own_text_and_position() -> None:
    text = "SHOW STREAMS;\n  DROP STREAM x;\nDESCRIBE y"
    statements = parse(text)
    assert [s.text for s in statements] == ["SHOW STREAMS;", "DROP STREAM x;", "DESCRIBE y"]
    assert [(s.location.line, s.location.column) for s in statements] == [(1, 1), (2, 3), (3, 1)]


def test_an_error_in_a_later_statement_points_into_the_whole_text() -> None:
    with pytest.raises(ParseError) as raised:
        parse("SHOW STREAMS;\nDROP STREAM;")
    assert (raised.value.line, raised.value.column) == (2, 12)


@pytest.mark.parametrize("text", ["ARRAY<STRUCT<A INTEGER, `b c` MAP<STRING, DECIMAL(10, 2)>>>",
                                  "STRUCT<>", "BYTES", "ADDRESS"])
def test_types_round_trip_through_their_text(text: str) -> None:
    parsed = parse_type(text)
    assert parse_type(parsed.sql()) == parsed


def test_sqlglot_command_fallback_is_never_accepted() -> None:
    for text in ("EXECUTE x;", "FETCH x;", "RUN SCRIPT 'x.sql';"):
        with pytest.raises(ParseError, match=re.escape("Unknown statement")):
            parse(text)


@pytest.mark.parametrize(("text", "kind"), [
    ("CREATE TABLE O AS SELECT ID, COUNT(*) AS N FROM I WINDOW SESSION (1 SECONDS) GROUP BY ID;",
     "SESSION"),
    ("CREATE TABLE O AS SELECT ID, COUNT(*) AS N FROM I WINDOW w1 SESSION (1 SECONDS) "
     "GROUP BY ID;", "SESSION"),
    ("CREATE TABLE O AS SELECT ID, COUNT(*) AS N FROM I WINDOW w2 TUMBLING (SIZE 1 SECONDS) "
     "GROUP BY ID;", "TUMBLING"),
])
def test_a_window_may_be_named_as_ksqldb_allows(text: str, kind: str) -> None:
    statement = parse(text)[0]
    assert isinstance(statement, st.CreateAsSelect) and statement.query.window is not None
    assert statement.query.window.kind == kind


def test_explain_takes_a_query_id_or_a_statement_that_runs_a_query() -> None:
    [by_id] = parse("EXPLAIN csas_x_1;")
    assert isinstance(by_id, st.Explain) and by_id.query_id == "CSAS_X_1"
    [of_statement] = parse("EXPLAIN CREATE STREAM B AS SELECT * FROM A;")
    assert isinstance(of_statement, st.Explain) and of_statement.query_id is None
    assert isinstance(of_statement.explained, st.CreateAsSelect)
    assert of_statement.explained.text == "CREATE STREAM B AS SELECT * FROM A"
    [paused] = parse("PAUSE ALL;")
    assert paused == st.PauseResume("PAUSE ALL;", st.Location(1, 1), None, True)


def test_print_keeps_the_topic_name_as_written() -> None:
    [quoted] = parse("PRINT 'my-topic' FROM BEGINNING SAMPLE 2 LIMIT 3;")
    assert quoted == st.PrintTopic("PRINT 'my-topic' FROM BEGINNING SAMPLE 2 LIMIT 3;",
                                   st.Location(1, 1), "my-topic", True, 2, 3)
    [bare] = parse("PRINT MyTopic;")
    assert isinstance(bare, st.PrintTopic) and bare.topic == "MyTopic" and not bare.writes_log
    with pytest.raises(ParseError, match="Expecting a whole number after LIMIT"):
        parse("PRINT t LIMIT many;")
