"""ksqlDB as a sqlglot dialect: a tokenizer with backtick identifiers and a statement parser.

DDL (CREATE STREAM/TABLE/TYPE, DROP, ALTER, TERMINATE, PAUSE, RESUME, EXPLAIN, SHOW, DESCRIBE,
INSERT, SET) is parsed here
into :mod:`metastore.sql.statements`; the SELECT of persistent and transient queries is parsed by
sqlglot's own SELECT machinery, extended with ksqlDB's WINDOW, WITHIN, PARTITION BY and EMIT
clauses. Nothing falls back to sqlglot's opaque ``Command``: what is not understood is a
:class:`~metastore.sql.exceptions.ParseError` with the line and column of the offending token.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from sqlglot import Token, TokenType, exp, parser, tokens
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy
from sqlglot.errors import ErrorLevel
from sqlglot.errors import ParseError as SqlglotParseError

from metastore.core.limits import MAX_EXPRESSION_DEPTH, MAX_TYPE_DEPTH
from metastore.sql import connector_config, literals
from metastore.sql import statements as st
from metastore.sql import types as ty
from metastore.sql.durations import DurationError, parse_duration_ms
from metastore.sql.exceptions import ParseError, PrepareError, TooComplexError, TypeDefinitionError

T = TypeVar("T")

WORD_TOKENS = frozenset({TokenType.VAR, TokenType.IDENTIFIER})
TYPE_PARAMETER_EXPECTATION = "Expecting {'STRING', INTEGER_VALUE}"
_OUTER_SIDES = frozenset({TokenType.FULL, TokenType.LEFT, TokenType.RIGHT})
"""What ksqlDB's grammar lets OUTER follow (``FULL | LEFT | RIGHT OUTER? JOIN``)."""


class KsqlTokenizer(tokens.Tokenizer):
    IDENTIFIERS: ClassVar[list[str | tuple[str, str]]] = ["`", '"']  # ksqlDB quotes both ways
    QUOTES: ClassVar[list[tuple[str, str] | str]] = ["'"]
    STRING_ESCAPES: ClassVar[list[str]] = ["'"]
    COMMENTS: ClassVar[list[str | tuple[str, str]]] = ["--", ("/*", "*/")]
    # sqlglot reads the rest of a SHOW statement as one string (an opaque command); ksqlDB's
    # SHOW takes words (``SHOW ALL TOPICS EXTENDED``)
    COMMANDS: ClassVar[set[TokenType]] = tokens.Tokenizer.COMMANDS - {TokenType.SHOW}
    # likewise EXPLAIN, which ksqlDB follows with a query id or a statement
    KEYWORDS: ClassVar[dict[str, TokenType]] = {
        word: kind for word, kind in tokens.Tokenizer.KEYWORDS.items() if word != "EXPLAIN"}


class KsqlParser(parser.Parser):
    """sqlglot's parser, plus ksqlDB statements and SELECT clauses."""

    QUERY_MODIFIER_PARSERS: ClassVar = {
        **parser.Parser.QUERY_MODIFIER_PARSERS,
        TokenType.PARTITION_BY: lambda self: (
            "ksql_partition_by", self._parse_partition_by_clause()),
        TokenType.WINDOW: lambda self: ("ksql_window", self._parse_ksql_window()),
    }
    # Every function call is an exp.Anonymous with its arguments as written (CAST excepted):
    # metastore.functions types and translates ksqlDB's functions, sqlglot's builders would
    # rename them, reorder or drop arguments and refuse ksqlDB's arities.
    FUNCTIONS: ClassVar = {}
    FUNCTION_PARSERS: ClassVar = {"CAST": parser.Parser.FUNCTION_PARSERS["CAST"]}
    # ksqlDB's lambdas: x => x + 1, (k, v) => ... (variables stay columns; the typer binds them)
    LAMBDAS: ClassVar = {TokenType.FARROW: lambda self, expressions: self.expression(
        exp.Lambda(this=self._parse_disjunction(), expressions=expressions))}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(error_level=ErrorLevel.IMMEDIATE, **kwargs)
        self._window: st.WindowSpec | None = None
        self._type_depth = 0
        self._type_rules = True
        """Whether a type ksqlDB cannot build fails the parse: a statement's types, never a
        stored one (a record written before the rule was enforced must still decode)."""

    def _parse_in(self, this: exp.Expr | None, alias: bool = False) -> exp.In:
        """ksqlDB's IN list has at least one expression: ``IN ()`` is a syntax error."""
        if (self._curr and self._curr.token_type == TokenType.L_PAREN and self._next
                and self._next.token_type == TokenType.R_PAREN):
            self._fail("Expecting an expression in the IN list, found ')'", self._next)
        return super()._parse_in(this, alias)

    def _parse_types(self, *args: Any, **kwargs: Any) -> exp.Expr | None:
        """The type of ``CAST(x AS type)`` is a type name: ``AS NULL`` is a syntax error there
        (ksqlDB's NoViableAlt wording)."""
        if (self._prev and self._prev.token_type == TokenType.ALIAS and self._curr
                and self._curr.token_type == TokenType.NULL):
            line, column = self._position(self._curr)
            self._fail(f"Syntax error at or near '{self._curr.text}' at line {line}:{column}")
        return super()._parse_types(*args, **kwargs)

    # -- driver --------------------------------------------------------------------------------
    def _load(self, chunk: list[Token], sql: str) -> None:
        """Point the parser at ``chunk``, tokens taken from the full ``sql`` text."""
        self.reset()
        self.sql = sql
        self._tokens = chunk
        self._tokens_size = len(chunk)
        self._index = -1
        self._advance()
        self._window = None
        self._type_depth = 0

    def parse_ksql(self, chunk: list[Token], sql: str) -> st.Statement:
        """Parse one statement's tokens (without the semicolon) from the full ``sql`` text."""
        self._load(chunk, sql)
        start = chunk[0]
        try:
            statement = self._statement(start)
        except SqlglotParseError as error:
            raise self._convert(error) from error
        if self._curr:
            self._fail(f"Unexpected '{self._curr.text}' after the end of the statement", self._curr)
        return statement

    def parse_type(self, chunk: list[Token], sql: str) -> ty.SqlType:
        self._load(chunk, sql)
        self._type_rules = False
        parsed = self._type()
        if self._curr:
            self._fail(f"Unexpected '{self._curr.text}' after the type", self._curr)
        return parsed

    def _convert(self, error: SqlglotParseError) -> ParseError:
        detail = error.errors[0] if error.errors else {}
        token = self._curr or self._prev
        line, column = self._position(token) if token else (1, 1)
        return ParseError(str(detail.get("description") or error), line, column)

    def _position(self, token: Token) -> tuple[int, int]:
        line_start = self.sql.rfind("\n", 0, token.start) + 1
        return token.line, token.start - line_start + 1

    def _fail(self, description: str, token: Token | None = None) -> Any:
        """Raise a ParseError at ``token``, the current token, or just after the last one."""
        token = token or self._curr
        if token:
            line, column = self._position(token)
        elif self._prev:
            line, column = self._position(self._prev)
            column += self._prev.end - self._prev.start + 1
        else:
            line, column = 1, 1
        raise ParseError(description, line, column)

    def _fail_type(self, description: str, token: Token) -> Any:
        """Raise the TypeDefinitionError of a type that starts at ``token`` (in a statement)."""
        if not self._type_rules:
            return None
        line, column = self._position(token)
        raise TypeDefinitionError(description, line, column)

    def _expect_text(self, *words: str) -> None:
        for word in words:
            if not self._match_text_seq(word):
                found = f"'{self._curr.text}'" if self._curr else "end of statement"
                self._fail(f"Expecting {word}, found {found}")

    def _expect(self, token_type: TokenType, what: str) -> Token:
        if not self._match(token_type):
            found = f"'{self._curr.text}'" if self._curr else "end of statement"
            self._fail(f"Expecting {what}, found {found}")
        return self._prev

    def _text(self, start: Token) -> str:
        end = self._tokens[self._tokens_size - 1]
        return self.sql[start.start:end.end + 1]

    # -- statements ----------------------------------------------------------------------------
    def _statement(self, start: Token) -> st.Statement:
        word = start.text.upper()
        handler = self._HANDLERS.get(word)
        if handler is None:
            self._fail(f"Unknown statement '{start.text}'", start)
        self._advance()
        assert handler is not None
        return handler(self, start)

    def _where(self, start: Token) -> st.Location:
        line, column = self._position(start)
        return st.Location(line, column)

    def _create(self, start: Token) -> st.Statement:
        or_replace = self._match_text_seq("OR", "REPLACE")
        is_source = self._match_text_seq("SOURCE")
        if not or_replace and (is_source or self._match_text_seq("SINK")):
            if self._match_text_seq("CONNECTOR"):
                return self._create_connector(
                    start, st.ConnectorKind.SOURCE if is_source else st.ConnectorKind.SINK)
            if not is_source:
                self._fail("Expecting CONNECTOR after SINK", self._prev)
        if self._match_text_seq("TYPE"):
            if or_replace or is_source:
                self._fail("CREATE TYPE takes neither OR REPLACE nor SOURCE", self._prev)
            if_not_exists = self._match_text_seq("IF", "NOT", "EXISTS")
            name = self._identifier("a type name")
            self._expect_text("AS")
            return st.CreateType(self._text(start), self._where(start), name, self._type(),
                                 if_not_exists)
        kind = self._source_kind()
        if_not_exists = self._match_text_seq("IF", "NOT", "EXISTS")
        name = self._identifier(f"a {kind.label} name")
        columns: tuple[st.ColumnDef, ...] = ()
        if self._match(TokenType.L_PAREN):
            columns = tuple(self._csv(self._column_def))
            if not self._match(TokenType.R_PAREN):  # ANTLR's expectation after an element
                self._fail("Expecting {',', ')'}")
        properties = self._with_properties()
        if self._match(TokenType.ALIAS):
            if columns:
                self._fail("A CREATE ... AS SELECT statement cannot declare columns", self._prev)
            if is_source:
                self._fail("SOURCE is not supported with CREATE ... AS SELECT", self._prev)
            query = self._query()
            return st.CreateAsSelect(self._text(start), self._where(start), kind, name, query,
                                     properties, or_replace, if_not_exists)
        return st.CreateSource(self._text(start), self._where(start), kind, name, columns,
                               properties, or_replace, if_not_exists, is_source)

    def _source_kind(self) -> st.SourceKind:
        if self._match_text_seq("STREAM"):
            return st.SourceKind.STREAM
        if self._match_text_seq("TABLE"):
            return st.SourceKind.TABLE
        found = f"'{self._curr.text}'" if self._curr else "end of statement"
        return self._fail(f"Expecting STREAM or TABLE, found {found}")  # type: ignore[no-any-return]

    def _drop(self, start: Token) -> st.Statement:
        if self._match_text_seq("CONNECTOR"):
            if_exists = self._match_text_seq("IF", "EXISTS")
            return st.DropConnector(self._text(start), self._where(start),
                                    self._identifier("a connector name"), if_exists)
        if self._match_text_seq("TYPE"):
            if_exists = self._match_text_seq("IF", "EXISTS")
            return st.DropType(self._text(start), self._where(start),
                               self._identifier("a type name"), if_exists)
        kind = self._source_kind()
        if_exists = self._match_text_seq("IF", "EXISTS")
        name = self._identifier(f"a {kind.label} name")
        delete_topic = self._match_text_seq("DELETE", "TOPIC")
        return st.DropSource(self._text(start), self._where(start), kind, name, if_exists,
                             delete_topic)

    def _terminate(self, start: Token) -> st.Statement:
        if self._match_text_seq("ALL"):
            return st.Terminate(self._text(start), self._where(start), None)
        return st.Terminate(self._text(start), self._where(start),
                            self._identifier("a query id").upper())

    def _explain(self, start: Token) -> st.Statement:
        token = self._curr
        if token is not None and token.text.upper() in self._HANDLERS:
            return st.Explain(self._text(start), self._where(start), None,
                              self._statement(token))
        return st.Explain(self._text(start), self._where(start),
                          self._identifier("a query id or a statement").upper(), None)

    def _print(self, start: Token) -> st.Statement:
        """PRINT topic [FROM BEGINNING] [(INTERVAL | SAMPLE) n] [LIMIT n]: a quoted or unquoted
        topic name is kept as written (topic names are case-sensitive)."""
        token = self._curr
        if not self._match(TokenType.STRING):
            self._identifier("a topic name")
        assert token is not None
        from_beginning = self._match_text_seq("FROM", "BEGINNING")
        interval = self._print_number("INTERVAL") if (
            self._match_text_seq("INTERVAL") or self._match_text_seq("SAMPLE")) else None
        limit = self._print_number("LIMIT") if self._match_text_seq("LIMIT") else None
        return st.PrintTopic(self._text(start), self._where(start), token.text, from_beginning,
                             interval, limit)

    def _print_number(self, clause: str) -> int:
        token = self._curr
        if token is None or token.token_type != TokenType.NUMBER or not token.text.isdigit():
            found = f"'{token.text}'" if token else "end of statement"
            self._fail(f"Expecting a whole number after {clause}, found {found}")
        assert token is not None
        self._advance()
        return int(token.text)

    def _pause(self, start: Token) -> st.Statement:
        return self._pause_resume(start, pause=True)

    def _resume(self, start: Token) -> st.Statement:
        return self._pause_resume(start, pause=False)

    def _pause_resume(self, start: Token, pause: bool) -> st.Statement:
        query_id = None if self._match_text_seq("ALL") else self._identifier("a query id").upper()
        return st.PauseResume(self._text(start), self._where(start), query_id, pause)

    def _alter(self, start: Token) -> st.Statement:
        kind = self._source_kind()
        name = self._identifier(f"a {kind.label} name")
        columns: list[st.ColumnDef] = []
        while True:
            self._expect_text("ADD")
            self._match(TokenType.COLUMN)
            column_name = self._identifier("a column name")
            columns.append(st.ColumnDef(column_name, self._type()))
            if not self._match(TokenType.COMMA):
                break
        return st.AlterSource(self._text(start), self._where(start), kind, name, tuple(columns))

    LISTABLE: ClassVar[frozenset[str]] = frozenset(
        {"STREAMS", "TABLES", "QUERIES", "TOPICS", "TYPES", "PROPERTIES", "FUNCTIONS", "VARIABLES"})

    EXTENDABLE: ClassVar[frozenset[str]] = frozenset({"STREAMS", "TABLES", "QUERIES", "TOPICS"})
    """What ksqlDB's grammar lets SHOW ... EXTENDED list."""

    def _list(self, start: Token) -> st.Statement:
        connectors = self._list_connectors(start)
        if connectors is not None:
            return connectors
        show_all = self._match_text_seq("ALL")
        if show_all and not (self._curr and self._curr.text.upper() == "TOPICS"):
            found = f"'{self._curr.text}'" if self._curr else "end of statement"
            self._fail(f"Expecting TOPICS, found {found}")
        if not self._curr or self._curr.text.upper() not in self.LISTABLE:
            found = f"'{self._curr.text}'" if self._curr else "end of statement"
            listable = sorted({*self.LISTABLE, "CONNECTORS", "CONNECTOR PLUGINS"})
            self._fail(f"Expecting one of {', '.join(listable)}, found {found}")
        what = self._curr.text.upper()
        self._advance()
        if what == "VARIABLES":
            return st.ListVariables(self._text(start), self._where(start))
        extended = what in self.EXTENDABLE and self._match_text_seq("EXTENDED")
        return st.ListObjects(self._text(start), self._where(start), what, extended, show_all)

    def _describe(self, start: Token) -> st.Statement:
        if self._curr and self._curr.text.upper() in ("STREAMS", "TABLES") and (
                not self._next or self._next.text.upper() == "EXTENDED"):
            what = self._curr.text.upper()
            self._advance()
            extended = self._match_text_seq("EXTENDED")
            return st.ListObjects(self._text(start), self._where(start), what, extended)
        if (self._curr and self._curr.text.upper() == "CONNECTOR"
                and self._curr.token_type != TokenType.IDENTIFIER and self._next):
            self._advance()
            return st.DescribeConnector(self._text(start), self._where(start),
                                        self._identifier("a connector name"))
        if (self._curr and self._curr.text.upper() == "FUNCTION"
                and self._curr.token_type != TokenType.IDENTIFIER and self._next):
            self._advance()
            return st.DescribeFunction(self._text(start), self._where(start),
                                       self._identifier("a function name"))
        name = self._identifier("a source name")
        extended = self._match_text_seq("EXTENDED")
        return st.Describe(self._text(start), self._where(start), name, extended)

    def _insert(self, start: Token) -> st.Statement:
        self._expect(TokenType.INTO, "INTO")
        target = self._identifier("a stream or table name")
        if (self._curr and self._curr.token_type == TokenType.L_PAREN) or (
                self._curr and self._curr.token_type == TokenType.VALUES):
            columns: list[str] = []
            if self._match(TokenType.L_PAREN):
                columns = self._csv(lambda: self._identifier("a column name"))
                self._expect(TokenType.R_PAREN, "')'")
            self._expect(TokenType.VALUES, "VALUES")
            self._expect(TokenType.L_PAREN, "'('")
            values = self._csv(self._value_expression)
            self._expect(TokenType.R_PAREN, "')'")
            return st.InsertValues(self._text(start), self._where(start), target,
                                   tuple(columns), tuple(values))
        properties = self._with_properties()
        return st.InsertInto(self._text(start), self._where(start), target, self._query(),
                             properties)

    def _value_expression(self) -> exp.Expr:
        start = self._curr
        value = self._parse_assignment()
        if value is None:
            self._fail("Expecting a value")
        assert value is not None and start is not None
        self._check_depth(value, start)
        return value

    def _check_depth(self, tree: exp.Expr, start: Token) -> None:
        if expression_depth(tree) > MAX_EXPRESSION_DEPTH:
            line, column = self._position(start)
            raise TooComplexError(
                f"Expression nested deeper than {MAX_EXPRESSION_DEPTH} levels", line, column)

    def _select_statement(self, start: Token) -> st.Statement:
        self._retreat(self._index - 1)
        return st.SelectStatement(self._text(start), self._where(start), self._query())

    def _set(self, start: Token) -> st.Statement:
        name = self._string_literal("a property name")
        self._expect(TokenType.EQ, "'='")
        return st.SetProperty(self._text(start), self._where(start), name,
                              self._string_literal("a property value"))

    def _unset(self, start: Token) -> st.Statement:
        return st.SetProperty(self._text(start), self._where(start),
                              self._string_literal("a property name"), None)

    def _define(self, start: Token) -> st.Statement:
        """DEFINE name = 'value' (ksqlDB's ``variableName``: an unquoted identifier, kept as
        written; its ``variableValue``: a string)."""
        name = self._variable_name()
        self._expect(TokenType.EQ, "'='")
        return st.DefineVariable(self._text(start), self._where(start), name,
                                 self._string_literal("a variable value"))

    def _undefine(self, start: Token) -> st.Statement:
        return st.UndefineVariable(self._text(start), self._where(start), self._variable_name())

    def _variable_name(self) -> str:
        token = self._curr
        if (token is None or token.token_type in (TokenType.IDENTIFIER, TokenType.STRING)
                or not _VARIABLE_NAME.fullmatch(token.text)):
            found = f"'{token.text}'" if token else "end of statement"
            return self._fail(f"Expecting a variable name, found {found}")  # type: ignore[no-any-return]
        self._advance()
        return token.text

    def _assert(self, start: Token) -> st.Statement:
        """ksqlDB's ASSERT statements: VALUES, NULL VALUES, STREAM and TABLE (its sql-test
        grammar, ``assertStatement``), TOPIC and SCHEMA (its server's)."""
        if self._match(TokenType.VALUES):
            return self._assert_values(start, tombstone=False)
        if self._match(TokenType.NULL):
            self._expect(TokenType.VALUES, "VALUES")
            return self._assert_values(start, tombstone=True)
        if self._curr and self._curr.token_type not in (TokenType.STRING, TokenType.IDENTIFIER) \
                and self._curr.text.upper() in ("STREAM", "TABLE"):
            kind = self._source_kind()
            name = self._identifier(f"a {kind.label} name")
            columns: tuple[st.ColumnDef, ...] = ()
            if self._match(TokenType.L_PAREN):
                columns = tuple(self._csv(self._column_def))
                self._expect(TokenType.R_PAREN, "')'")
            return st.AssertSource(self._text(start), self._where(start), kind, name, columns,
                                   self._with_properties())
        exists = not self._match_text_seq("NOT", "EXISTS")
        if self._match_text_seq("TOPIC"):
            topic = self._resource_name("a topic name")
            properties = self._with_properties()
            return st.AssertTopic(self._text(start), self._where(start), topic, exists,
                                  properties, self._timeout())
        if self._match_text_seq("SCHEMA"):
            subject = self._resource_name("a subject name") if self._match_text_seq(
                "SUBJECT") else None
            schema_id = self._schema_id() if self._match_text_seq("ID") else None
            timeout = self._timeout()
            if subject is None and schema_id is None:
                line, column = self._position(start)
                raise PrepareError("ASSERT SCHEMA statements much include a subject name or an "
                                   "id", line, column)
            return st.AssertSchema(self._text(start), self._where(start), subject, schema_id,
                                   exists, timeout)
        found = f"'{self._curr.text}'" if self._curr else "end of statement"
        return self._fail(  # type: ignore[no-any-return]
            f"Expecting VALUES, NULL VALUES, STREAM, TABLE, TOPIC or SCHEMA, found {found}")

    def _assert_values(self, start: Token, tombstone: bool) -> st.Statement:
        target = self._identifier("a stream or table name")
        columns: list[str] = []
        if self._match(TokenType.L_PAREN):
            columns = self._csv(lambda: self._identifier("a column name"))
            self._expect(TokenType.R_PAREN, "')'")
        if tombstone:
            self._expect_text("KEY")
        else:
            self._expect(TokenType.VALUES, "VALUES")
        self._expect(TokenType.L_PAREN, "'('")
        values: list[exp.Expr] = []
        if not self._match(TokenType.R_PAREN):
            values = self._csv(self._value_expression)
            self._expect(TokenType.R_PAREN, "')'")
        return st.AssertValues(self._text(start), self._where(start), target, tuple(columns),
                               tuple(values), tombstone)

    def _resource_name(self, what: str) -> str:
        """A topic or subject name: a 'string', or an identifier kept as written."""
        if self._match(TokenType.STRING):
            return self._prev.text
        token = self._curr
        self._identifier(what)
        assert token is not None
        return token.text

    def _schema_id(self) -> int:
        token = self._curr
        if token is None:
            self._fail("Expecting a schema id, found end of statement")
        assert token is not None
        self._advance()
        if token.token_type != TokenType.NUMBER or not token.text.isdigit() \
                or len(token.text) > 10 or int(token.text) > 2**31 - 1:  # a Java Integer
            line, column = self._position(token)
            raise PrepareError("ID must be an integer", line, column)
        return int(token.text)

    def _timeout(self) -> int | None:
        return self._duration() if self._match_text_seq("TIMEOUT") else None

    _HANDLERS: ClassVar[dict[str, Callable[[KsqlParser, Token], st.Statement]]] = {
        "CREATE": _create, "DROP": _drop, "TERMINATE": _terminate, "ALTER": _alter,
        "PAUSE": _pause, "RESUME": _resume, "EXPLAIN": _explain, "PRINT": _print,
        "SHOW": _list, "LIST": _list, "DESCRIBE": _describe, "INSERT": _insert,
        "SELECT": _select_statement, "SET": _set, "UNSET": _unset, "ASSERT": _assert,
        "DEFINE": _define, "UNDEFINE": _undefine,
    }

    # -- connectors ----------------------------------------------------------------------------
    def _create_connector(self, start: Token, kind: st.ConnectorKind) -> st.Statement:
        """CREATE SOURCE|SINK CONNECTOR [IF NOT EXISTS] name WITH (key = literal, ...): the
        statement's text is masked (:func:`connector_config.masked_create`)."""
        if_not_exists = self._match_text_seq("IF", "NOT", "EXISTS")
        name = self._identifier("a connector name")
        if not self._match(TokenType.WITH):
            found = f"'{self._curr.text}'" if self._curr else "end of statement"
            self._fail(f"Expecting WITH, found {found}")
        self._expect(TokenType.L_PAREN, "'('")
        config = self._property_list(self._connector_key, self._connector_value)
        text = connector_config.masked_create(kind.value, name, config, if_not_exists)
        return st.CreateConnector(text, self._where(start), kind, name,
                                  connector_config.with_name(config, name), if_not_exists)

    def _connector_key(self) -> str:
        """A connector property's key: a string as written, an identifier normalised."""
        return (self._prev.text if self._match(TokenType.STRING)
                else self._identifier("a property name"))

    def _connector_value(self) -> str:
        """A property's literal as the Connect string ksqlDB makes of it: NULL is ``null``."""
        if self._match(TokenType.NULL):
            return "null"
        text = self._number_text()
        if text is not None:
            if any(c in text for c in "eE") and not math.isfinite(float(text)):
                return self._fail(f"Number overflows DOUBLE: {text[:100]}")  # type: ignore[no-any-return]
            return connector_config.java_number(text)
        value = self._property_value()
        return str(value).lower() if isinstance(value, bool) else str(value)

    def _list_connectors(self, start: Token) -> st.Statement | None:
        """SHOW | LIST [SOURCE | SINK] CONNECTORS, SHOW | LIST CONNECTOR PLUGINS; None when the
        statement lists something else."""
        if self._match_text_seq("CONNECTOR", "PLUGINS"):
            return st.ListConnectorPlugins(self._text(start), self._where(start))
        for kind in (st.ConnectorKind.SOURCE, st.ConnectorKind.SINK, None):
            words = ("CONNECTORS",) if kind is None else (kind.value, "CONNECTORS")
            if self._match_text_seq(*words):
                return st.ListConnectors(self._text(start), self._where(start), kind)
        return None

    # -- pieces --------------------------------------------------------------------------------
    def _csv(self, item: Callable[[], T]) -> list[T]:
        items = [item()]
        while self._match(TokenType.COMMA):
            items.append(item())
        return items

    def _identifier(self, what: str) -> str:
        token = self._curr
        if not token:
            return self._fail(f"Expecting {what}, found end of statement")  # type: ignore[no-any-return]
        if token.token_type == TokenType.IDENTIFIER:
            self._advance()
            return token.text
        if token.token_type in WORD_TOKENS or (
                token.text.replace("_", "").isalnum() and not token.text[0].isdigit()
                and token.token_type not in self._RESERVED):
            self._advance()
            return token.text.upper()
        return self._fail(f"Expecting {what}, found '{token.text}'")  # type: ignore[no-any-return]

    _RESERVED: ClassVar[frozenset[TokenType]] = frozenset({
        TokenType.NULL, TokenType.TRUE, TokenType.FALSE, TokenType.SELECT, TokenType.FROM,
        TokenType.WHERE, TokenType.ALIAS, TokenType.WITH, TokenType.L_PAREN, TokenType.R_PAREN,
        TokenType.COMMA, TokenType.STRING, TokenType.NUMBER})

    def _string_literal(self, what: str) -> str:
        if not self._match(TokenType.STRING):
            found = f"'{self._curr.text}'" if self._curr else "end of statement"
            self._fail(f"Expecting {what} in single quotes, found {found}")
        return self._prev.text

    def _column_def(self) -> st.ColumnDef:
        at = self._where(self._curr) if self._curr else None
        name = self._identifier("a column name")
        column_type = self._type()
        if self._match(TokenType.PRIMARY_KEY) or self._match_text_seq("PRIMARY", "KEY"):
            return st.ColumnDef(name, column_type, st.ColumnRole.PRIMARY_KEY, location=at)
        if self._match_text_seq("KEY"):
            return st.ColumnDef(name, column_type, st.ColumnRole.KEY, location=at)
        if self._match_text_seq("HEADERS"):
            return st.ColumnDef(name, column_type, st.ColumnRole.HEADERS, location=at)
        if self._match_text_seq("HEADER"):
            self._expect(TokenType.L_PAREN, "'('")
            header_key = self._string_literal("a header key")
            self._expect(TokenType.R_PAREN, "')'")
            return st.ColumnDef(name, column_type, st.ColumnRole.HEADER, header_key, location=at)
        return st.ColumnDef(name, column_type, location=at)

    def _type(self) -> ty.SqlType:
        if self._type_depth >= MAX_TYPE_DEPTH:
            line, column = self._position(self._curr) if self._curr else (1, 1)
            raise TooComplexError(f"Type nested deeper than {MAX_TYPE_DEPTH} levels", line, column)
        self._type_depth += 1
        try:
            return self._nested_type()
        finally:
            self._type_depth -= 1

    def _nested_type(self) -> ty.SqlType:
        token = self._curr
        if not token:
            return self._fail("Expecting a type, found end of statement")  # type: ignore[no-any-return]
        word = token.text.upper()
        if token.token_type == TokenType.IDENTIFIER:
            self._advance()
            return ty.TypeRef(token.text)
        if word == "ARRAY" and self._next and self._next.token_type == TokenType.LT:
            self._advance(2)
            element = self._type()
            self._expect(TokenType.GT, "'>'")
            return ty.ArrayType(element)
        if word == "MAP" and self._next and self._next.token_type == TokenType.LT:
            self._advance(2)
            key = self._type()
            self._expect(TokenType.COMMA, "','")
            value = self._type()
            self._expect(TokenType.GT, "'>'")
            return ty.MapType(key, value)
        if word == "STRUCT" and self._next and self._next.token_type in (TokenType.LT,
                                                                          TokenType.NEQ):
            self._advance(2)
            if self._prev.token_type == TokenType.NEQ:
                return ty.StructType(())
            fields: list[tuple[str, ty.SqlType]] = []
            if not self._match(TokenType.GT):
                while True:
                    field_name = self._identifier("a field name")
                    fields.append((field_name, self._type()))
                    if not self._match(TokenType.COMMA):
                        break
                self._expect(TokenType.GT, "'>'")
            problem = ty.struct_fields_problem(fields)
            if problem:
                self._fail_type(problem, token)
            return ty.StructType(tuple(fields))
        if token.token_type in self._RESERVED:
            return self._fail(f"Expecting a type, found '{token.text}'")  # type: ignore[no-any-return]
        self._advance()
        parameters = self._type_parameters()
        if word == "DECIMAL":
            if len(parameters) != 2 or not all(isinstance(p, int) for p in parameters):
                self._fail("DECIMAL requires a precision and a scale: DECIMAL(p, s)", token)
            precision, scale = int(parameters[0]), int(parameters[1])
            problem = ty.decimal_problem(precision, scale)
            if problem:
                self._fail_type(problem, token)
            return ty.DecimalType(precision, scale)
        # ksqlDB's grammar lets any base type take parameters (``VARCHAR(STRING)``,
        # ``INT(10)``) and ignores them
        primitive = ty.PRIMITIVE_ALIASES.get(word)
        return ty.Primitive(primitive) if primitive else ty.TypeRef(word)

    def _type_parameters(self) -> list[int | str]:
        if not self._match(TokenType.L_PAREN):
            return []
        parameters: list[int | str] = []
        while True:
            if self._match(TokenType.NUMBER) and self._prev.text.isdigit():
                parameters.append(int(self._prev.text))
            elif (self._curr and self._curr.text.upper() == "STRING"
                  and self._curr.token_type not in (TokenType.STRING, TokenType.IDENTIFIER)):
                # the keyword STRING, neither a 'literal' nor a `quoted` identifier
                self._advance()
                parameters.append("STRING")
            else:
                self._fail(TYPE_PARAMETER_EXPECTATION)
            if not self._match(TokenType.COMMA):
                break
        self._expect(TokenType.R_PAREN, "')'")
        return parameters

    def _with_properties(self) -> dict[str, st.PropertyValue]:
        if not self._match(TokenType.WITH):
            return {}
        self._expect(TokenType.L_PAREN, "'('")
        if self._match(TokenType.R_PAREN):
            return {}
        return self._property_list(lambda: self._identifier("a property name").upper(),
                                   self._property_value)

    def _property_list(self, key: Callable[[], str], value: Callable[[], T]) -> dict[str, T]:
        """``key = value (, key = value)* )`` after a WITH's '(': each key once."""
        properties: dict[str, T] = {}
        while True:
            key_token = self._curr
            name = key()
            self._expect(TokenType.EQ, "'='")
            if name in properties:
                self._fail(f"Duplicate property: {name}", key_token)
            properties[name] = value()
            if not self._match(TokenType.COMMA):
                break
        self._expect(TokenType.R_PAREN, "')'")
        return properties

    def _property_value(self) -> st.PropertyValue:
        if self._match(TokenType.STRING):
            return self._prev.text
        if self._match(TokenType.TRUE):
            return True
        if self._match(TokenType.FALSE):
            return False
        text = self._number_text()
        if text is not None:
            return float(text) if any(c in text for c in ".eE") else int(text)
        found = f"'{self._curr.text}'" if self._curr else "end of statement"
        return self._fail(f"Expecting a property value, found {found}")  # type: ignore[no-any-return]

    def _number_text(self) -> str | None:
        """A signed numeric literal's text, a whole one within a long (ksqlDB's ParserUtil); None
        when no number follows (a '-' is taken only before one)."""
        negative = (self._curr is not None and self._curr.token_type == TokenType.DASH
                    and self._next is not None and self._next.token_type == TokenType.NUMBER)
        if negative:
            self._advance()
        if not self._match(TokenType.NUMBER):
            return None
        text = ("-" if negative else "") + self._prev.text
        if not any(c in text for c in ".eE") and not literals.fits_long(text):
            return self._fail(f"Invalid numeric literal: {text[:100]}")  # type: ignore[no-any-return]
        return text

    # -- queries -------------------------------------------------------------------------------
    def _query(self) -> st.Query:
        start = self._curr
        if not start or start.token_type != TokenType.SELECT:
            found = f"'{start.text}'" if start else "end of statement"
            self._fail(f"Expecting SELECT, found {found}")
        within, join_windows = self._strip_within()
        emit = self._strip_emit()
        select = self._parse_select()
        if select is None or not isinstance(select, exp.Select):
            self._fail("Expecting a SELECT query", start)
        assert isinstance(select, exp.Select)
        emit_changes, emit_final = emit == "CHANGES", emit == "FINAL"
        partition_by = self._grouping_list(select.args.pop("ksql_partition_by", None),
                                           "PARTITION BY", start)
        group = select.args.get("group")
        if group is not None:
            group.set("expressions", self._grouping_list(group.expressions, "GROUP BY", start))
        select.args.pop("ksql_window", None)
        self._check_depth(select, start)
        for expression in partition_by or ():
            self._check_depth(expression, start)
        _normalise_identifiers(select)
        _map_keys_as_columns(select)
        for expression in partition_by or ():
            _normalise_identifiers(expression)
            _map_keys_as_columns(expression)
        text = self._text(start)
        return st.Query(select=select, window=self._window,
                        partition_by=tuple(partition_by or ()), emit_changes=emit_changes,
                        emit_final=emit_final, within_ms=within, join_windows=join_windows,
                        text=text)

    def _grouping_list(self, expressions: list[exp.Expr] | None, clause: str,
                       start: Token) -> list[exp.Expr] | None:
        """GROUP BY / PARTITION BY take expressions, or one parenthesised list of them
        (``GROUP BY (a, b)``), which must not be empty."""
        if not expressions or len(expressions) != 1 or not isinstance(expressions[0], exp.Tuple):
            elements = list(expressions or ())
        else:
            elements = list(expressions[0].expressions)
            if not elements:
                self._fail(f"{clause} requires at least one expression", start)
        for element in elements:  # ksqlDB's grammar: valueExpressions, no bare predicates
            if isinstance(element, exp.Tuple) and element.expressions:  # a list among others
                self._fail("missing ')' at ','", self._comma_after(element.expressions[0]))
            if isinstance(element, _PREDICATES):
                self._fail(f"Syntax error: {clause} takes value expressions, not the condition "
                           f"{element.sql(dialect=Ksql)}", start)
        return elements or expressions

    def _comma_after(self, expression: exp.Expr) -> Token | None:
        """The first ',' token after ``expression`` (by the positions its nodes recorded)."""
        ends = [n.meta["end"] for n in expression.walk() if isinstance(n.meta.get("end"), int)]
        end = max(ends, default=-1)
        return next((t for t in self._tokens
                     if t.token_type == TokenType.COMMA and t.start > end), None)

    def _strip_emit(self) -> str | None:
        """Remove ``EMIT CHANGES | EMIT FINAL`` (which sqlglot would read as an alias)."""
        tokens = self._tokens
        for i in range(self._index, len(tokens) - 1):
            if (tokens[i].token_type == TokenType.VAR and tokens[i].text.upper() == "EMIT"
                    and tokens[i + 1].text.upper() in ("CHANGES", "FINAL")):
                kind = tokens[i + 1].text.upper()
                index = self._index
                self._tokens = tokens[:i] + tokens[i + 2:]
                self._tokens_size = len(self._tokens)
                self._retreat(index)
                self._advance(0)
                return kind
        return None

    def _skip_grace_period(self, tokens: list[Token], index: int) -> tuple[int, int | None]:
        """Past a join window's ``GRACE PERIOD <duration>`` (ksqlDB's gracePeriodClause) at
        ``index``, if there is one there, and its duration (None: no GRACE PERIOD)."""
        if not (index + 1 < len(tokens) and tokens[index].text.upper() == "GRACE"
                and tokens[index + 1].text.upper() == "PERIOD"):
            return index, None
        if index + 3 >= len(tokens) or tokens[index + 2].token_type != TokenType.NUMBER:
            self._fail("Expecting a duration after GRACE PERIOD", tokens[index + 1])
        try:
            grace = parse_duration_ms(f"{tokens[index + 2].text} {tokens[index + 3].text}")
        except DurationError as error:
            self._fail(str(error), tokens[index + 3])
        return index + 4, grace

    def _strip_within(self) -> tuple[int | None, tuple[st.JoinWindow, ...]]:
        """Remove ``WITHIN <duration> | WITHIN (<before>, <after>) [GRACE PERIOD <duration>]``
        from the remaining tokens: the longest duration, and each join's window."""
        within: int | None = None
        windows: list[st.JoinWindow] = []
        joins = 0
        tokens_left = self._tokens
        index = self._index
        kept: list[Token] = list(tokens_left[:index])
        i = index
        while i < len(tokens_left):
            token = tokens_left[i]
            if token.token_type == TokenType.JOIN:
                joins += 1
            if token.token_type == TokenType.OUTER and (i == 0 or tokens_left[i - 1].token_type
                                                        not in _OUTER_SIDES):
                line, column = self._position(token)  # ksqlDB: FULL, LEFT or RIGHT [OUTER] JOIN
                self._fail(f"Syntax error at or near 'OUTER' at line {line}:{column}", token)
            if token.token_type == TokenType.VAR and token.text.upper() == "WITHIN":
                j = i + 1
                durations: list[int] = []
                parenthesised = j < len(tokens_left) and tokens_left[j].token_type == TokenType.L_PAREN
                if parenthesised:
                    j += 1
                while j + 1 < len(tokens_left) and tokens_left[j].token_type == TokenType.NUMBER:
                    text = f"{tokens_left[j].text} {tokens_left[j + 1].text}"
                    try:
                        durations.append(parse_duration_ms(text))
                    except DurationError as error:
                        self._fail(str(error), tokens_left[j + 1])
                    j += 2
                    more = j < len(tokens_left) and tokens_left[j].token_type == TokenType.COMMA
                    if parenthesised and more:
                        j += 1
                        continue
                    break
                if parenthesised:
                    if j >= len(tokens_left) or tokens_left[j].token_type != TokenType.R_PAREN:
                        self._fail("Expecting ')' after the WITHIN durations", token)
                    j += 1
                if not durations:
                    self._fail("Expecting a duration after WITHIN", token)
                within = max(durations)
                j, grace = self._skip_grace_period(tokens_left, j)
                windows.append(st.JoinWindow(max(joins - 1, 0), durations[0], durations[-1],
                                             grace))
                i = j
                continue
            kept.append(token)
            i += 1
        self._tokens = kept
        self._tokens_size = len(kept)
        self._retreat(index)
        self._advance(0)
        return within, tuple(windows)

    def _parse_partition_by_clause(self) -> list[exp.Expr]:
        self._advance()
        return [e for e in self._parse_csv(self._parse_assignment) if e is not None]

    def _parse_ksql_window(self) -> exp.Expr:
        window_token = self._curr
        self._advance()
        kind_token = self._curr
        kind = kind_token.text.upper() if kind_token else ""
        following = self._next.text.upper() if self._next else ""
        if kind not in ("TUMBLING", "HOPPING", "SESSION") and following in (
                "TUMBLING", "HOPPING", "SESSION"):  # ksqlDB's grammar lets a window be named
            self._advance()
            kind_token = self._curr
            kind = following
        if kind not in ("TUMBLING", "HOPPING", "SESSION"):
            self._fail("Expecting TUMBLING, HOPPING or SESSION after WINDOW", kind_token or window_token)
        self._advance()
        self._expect(TokenType.L_PAREN, "'('")
        values: dict[str, int] = {}
        while True:
            if kind == "SESSION" and not values and self._curr and self._curr.token_type == TokenType.NUMBER:
                values["GAP"] = self._duration()
            else:
                name_token = self._curr
                name = self._identifier("SIZE, ADVANCE BY, RETENTION or GRACE PERIOD").upper()
                if name == "ADVANCE":
                    self._expect_text("BY")
                elif name == "GRACE":
                    self._expect_text("PERIOD")
                if name not in ("SIZE", "ADVANCE", "RETENTION", "GRACE"):
                    self._fail(f"Unknown window property {name}", name_token)
                values[name] = self._duration()
            if not self._match(TokenType.COMMA):
                break
        self._expect(TokenType.R_PAREN, "')'")
        if kind in ("TUMBLING", "HOPPING") and "SIZE" not in values:
            self._fail(f"{kind} windows require a SIZE", kind_token)
        if kind == "HOPPING" and "ADVANCE" not in values:
            self._fail("HOPPING windows require ADVANCE BY", kind_token)
        self._window = st.WindowSpec(kind=kind, size_ms=values.get("SIZE"),
                                     advance_ms=values.get("ADVANCE"), gap_ms=values.get("GAP"),
                                     retention_ms=values.get("RETENTION"),
                                     grace_ms=values.get("GRACE"))
        return exp.Var(this=kind)

    def _duration(self) -> int:
        number = self._curr
        if not self._match(TokenType.NUMBER):
            self._fail("Expecting a duration such as 1 MINUTE")
        unit = self._curr
        if not unit:
            return self._fail("Expecting a time unit")  # type: ignore[no-any-return]
        self._advance()
        try:
            return parse_duration_ms(f"{number.text} {unit.text}")
        except DurationError as error:
            return self._fail(str(error), unit)  # type: ignore[no-any-return]


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_@]*")
"""ksqlDB's IDENTIFIER token, what a variable name is."""

_PREDICATES = (exp.Connector, exp.Not, exp.Predicate)
"""Boolean expressions ksqlDB's grammar only allows as (or within parentheses in) a
``booleanExpression``: AND, OR, NOT, comparisons, IN, BETWEEN, LIKE, IS [NOT] NULL."""


def _normalise_identifiers(tree: exp.Expr) -> None:
    """Upper-case unquoted identifiers, as ksqlDB does."""
    for identifier in tree.find_all(exp.Identifier):
        if not identifier.args.get("quoted"):
            identifier.set("this", identifier.name.upper())


def _map_keys_as_columns(tree: exp.Expr) -> None:
    """A bare name before ``:=`` in ``MAP(k := v)`` is an expression, a column reference (in
    ``STRUCT(f := v)`` it names a field and stays an identifier)."""
    for call in tree.find_all(exp.Anonymous):
        if str(call.name).upper() != "MAP":
            continue
        for entry in call.expressions:
            if isinstance(entry, exp.PropertyEQ) and isinstance(entry.this, exp.Identifier):
                entry.set("this", exp.Column(this=entry.this))


class Ksql(Dialect):
    """The ksqlDB dialect: backtick identifiers, upper-cased unquoted names."""

    NORMALIZATION_STRATEGY = NormalizationStrategy.UPPERCASE
    IDENTIFIERS_CAN_START_WITH_DIGIT = True  # ksqlDB's DIGIT_IDENTIFIER: `AS 1R` names a column
    tokenizer_class = KsqlTokenizer
    parser_class = KsqlParser  # type: ignore[assignment]  # sqlglot types it as its BaseParser


def expression_depth(tree: exp.Expr) -> int:
    """The depth of ``tree``, measured without recursion (the tree may be arbitrarily deep)."""
    deepest = 0
    pending: list[tuple[exp.Expr, int]] = [(tree, 1)]
    while pending:
        node, depth = pending.pop()
        deepest = max(deepest, depth)
        for child in node.iter_expressions():
            pending.append((child, depth + 1))
    return deepest
