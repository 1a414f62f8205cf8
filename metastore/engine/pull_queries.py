"""ksqlDB's rules for pull queries: a transient SELECT without EMIT reads a source's current state.

ksqlDB checks a pull query in stages, and the first failing one answers:

1. its AST builder: a LIMIT takes an integer (:func:`check_limit`, for every transient query);
2. ``PullQueryValidator``, once the query's sources are resolved: no JOIN, WINDOW, GROUP BY,
   PARTITION BY nor HAVING, a LIMIT only when ``ksql.query.pull.limit.clause.enabled`` and not
   negative, and neither ROWPARTITION nor ROWOFFSET in SELECT or WHERE (:func:`check_clauses`);
3. after the query is typed, a stream is read from its start unless
   ``ksql.query.pull.stream.enabled`` is false; a table's WHERE clause must find its rows by key,
   or scan the table when ``ksql.query.pull.table.scan.enabled`` (the default; ksqlDB's
   ``QueryFilterNode``, :mod:`metastore.engine.pull_filters`);
4. the table must be materialized by a persistent query (a CREATE TABLE AS SELECT or a SOURCE
   table; ``PullQueryExecutionUtil``);
5. the plan (``PullPhysicalPlanBuilder``): key lookups, a range scan on one STRING or BYTES key
   of a non-windowed table when ``ksql.query.pull.range.scan.enabled``, else a table scan,
   which needs table scans enabled.

Messages are ksqlDB's, with its hint on pull queries appended where ksqlDB appends it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from metastore.catalog.exceptions import QueryError, SourceNotFoundError
from metastore.catalog.model import DataSource, PersistentQuery
from metastore.engine import overrides
from metastore.engine.analysis import Analysis, analyse
from metastore.engine.overrides import ConfigOverrides
from metastore.engine.pull_filters import SYNTAX_HELP, KeyFilter, column_references
from metastore.functions.operators import ksql_text
from metastore.sql import literals
from metastore.sql import types as ty
from metastore.sql.exceptions import ParseError
from metastore.sql.statements import Query, SelectStatement, SourceKind

NOT_IN_PULL_QUERIES = ("ROWPARTITION", "ROWOFFSET")
"""ksqlDB's ``SystemColumns.isDisallowedInPullOrScalablePushQueries``."""


@dataclass(frozen=True)
class PullSettings:
    """The switches of ksqlDB's pull queries a request may override (all on by default)."""

    table_scans: bool = True
    range_scans: bool = True
    limit_clause: bool = True
    streams: bool = True

    @classmethod
    def of(cls, config: ConfigOverrides) -> PullSettings:
        return cls(table_scans=config.flag(overrides.PULL_TABLE_SCAN_ENABLED, True),
                   range_scans=config.flag(overrides.PULL_RANGE_SCAN_ENABLED, True),
                   limit_clause=config.flag(overrides.PULL_LIMIT_CLAUSE_ENABLED, True),
                   streams=config.flag(overrides.PULL_STREAM_ENABLED, True))


def result_keys(analysis: Analysis) -> frozenset[str]:
    """The columns of a pull query's result that ksqlDB's header marks ``KEY``: each that
    selects a key column of the table, or a windowed table's window bound, as it is (a
    stream's pull query marks none)."""
    if len(analysis.reads) != 1 or analysis.reads[0].source.kind is not SourceKind.TABLE:
        return frozenset()
    source = analysis.reads[0].source
    keys = {c.name for c in source.key_columns}
    if source.window is not None:
        keys |= {"WINDOWSTART", "WINDOWEND"}
    return frozenset(name for name, expression in analysis.projection
                     if isinstance(expression, exp.Column) and expression.name in keys
                     and name == expression.name)


def is_pull_query(query: Query) -> bool:
    """ksqlDB's ``Query.isPullQuery`` for a transient query: it has no EMIT clause."""
    return not query.emit_changes and not query.emit_final


# -- 1. the AST builder -------------------------------------------------------------------------

def check_limit(query: Query) -> None:
    """ksqlDB's grammar reads ``LIMIT number`` and its AST builder takes only an integer."""
    limit = query.select.args.get("limit")
    value = limit.expression if isinstance(limit, exp.Limit) else None
    if value is None:
        return
    number = value.this if isinstance(value, exp.Neg) else value
    if isinstance(number, exp.Literal) and not number.is_string:
        if not str(number.this).isdigit():
            raise QueryError("Failed to prepare statement: Value must be integer for command: "
                             "LIMIT")
        return
    line, column = _start(value) or (1, 1)
    raise ParseError(f"Expecting an integer after LIMIT, found {ksql_text(value)}", line, column)


def limit_value(query: Query) -> int | None:
    """The query's LIMIT, once :func:`check_limit` accepted it."""
    limit = query.select.args.get("limit")
    value = limit.expression if isinstance(limit, exp.Limit) else None
    if value is None:
        return None
    if isinstance(value, exp.Neg):
        return -int(str(value.this.this))
    return int(str(value.this))


def _start(node: exp.Expr) -> tuple[int, int] | None:
    """Where ``node`` starts (line, column from 1), from the positions sqlglot recorded."""
    parens = 0
    while isinstance(node, exp.Paren):
        node, parens = node.this, parens + 1
    for leaf in node.dfs():
        meta = leaf.meta
        line, end, first, last = (meta.get(k) for k in ("line", "col", "start", "end"))
        if all(isinstance(v, int) for v in (line, end, first, last)):
            assert isinstance(line, int) and isinstance(end, int)
            assert isinstance(first, int) and isinstance(last, int)
            return line, end - (last - first) - parens
    return None


def check_select(statement: SelectStatement, sources: Mapping[str, DataSource],
                 custom_types: Mapping[str, ty.SqlType], queries: Mapping[str, PersistentQuery],
                 config: ConfigOverrides) -> Analysis:
    """A transient SELECT checked as ksqlDB prepares and plans it, its analysis when accepted:
    the one list of checks of both the statement validator and ``POST /query``."""
    literals.check_statement(statement)
    pull = check_query(statement.query, sources, config)
    analysis = analyse(statement.query, sources, custom_types, transient=True)
    if pull:
        check_plan(analysis, queries, config)
    return analysis


def check_query(query: Query, sources: Mapping[str, DataSource], config: ConfigOverrides) -> bool:
    """The checks of a transient query before it is typed; whether it is a pull query."""
    check_limit(query)
    if not is_pull_query(query):
        return False
    check_clauses(query, sources, PullSettings.of(config))
    return True


# -- 2. PullQueryValidator -----------------------------------------------------------------------

def check_clauses(query: Query, sources: Mapping[str, DataSource],
                  settings: PullSettings) -> None:
    """ksqlDB's ``PullQueryValidator``, in its order, once the query's sources exist."""
    select = query.select
    joins = list(select.args.get("joins") or [])
    for table in query.read_tables:
        if table.name not in sources:
            raise SourceNotFoundError(f"{table.name} does not exist.", table.name)
    limit = limit_value(query)
    refusals = (
        (bool(joins), "Pull queries don't support JOIN clauses."),
        (query.window is not None, "Pull queries don't support WINDOW clauses."),
        (select.args.get("group") is not None, "Pull queries don't support GROUP BY clauses."),
        (bool(query.partition_by), "Pull queries don't support PARTITION BY clauses."),
        (select.args.get("having") is not None, "Pull queries don't support HAVING clauses."),
        (limit is not None and not settings.limit_clause,
         "LIMIT clause in pull queries is currently disabled. You can enable them by setting "
         "ksql.query.pull.limit.clause.enabled=true."),
        (limit is not None and limit < 0,
         "Pull queries don't support negative integers in the LIMIT clause."),
    )
    for refused, message in refusals:
        if refused:
            raise QueryError(message + SYNTAX_HELP)
    items = [item for item in select.expressions if not _is_star(item)]
    where = select.args.get("where")
    for clause, trees in (("SELECT", items), ("WHERE", [where.this] if where else [])):
        names = dict.fromkeys(column.name for tree in trees for column in column_references(tree)
                              if column.name in NOT_IN_PULL_QUERIES)
        if names:
            shown = ", ".join(f"`{name}`" for name in names)
            raise QueryError(f"Pull queries don't support the following columns in {clause} "
                             f"clauses: {shown}\n{SYNTAX_HELP}")


def _is_star(item: exp.Expr) -> bool:
    return isinstance(item, exp.Star) or (isinstance(item, exp.Column)
                                          and isinstance(item.this, exp.Star))


# -- 3.-5. the plan ------------------------------------------------------------------------------

def check_plan(analysis: Analysis, queries: Mapping[str, PersistentQuery],
               config: ConfigOverrides) -> None:
    """What ksqlDB checks once the pull query is typed, up to choosing how to read its source."""
    settings = PullSettings.of(config)
    source = analysis.reads[0].source
    if source.kind is SourceKind.STREAM:
        if not settings.streams:
            raise QueryError("Pull queries on streams are disabled. To create a push query on "
                             "the stream, add EMIT CHANGES to the end. To enable pull queries "
                             "on streams, set the ksql.query.pull.stream.enabled config to "
                             "'true'.")
        return
    where = analysis.query.select.args.get("where")
    table = KeyFilter(source, settings.table_scans, settings.range_scans)
    if where is None:
        if not settings.table_scans:
            raise table.where_error("Missing WHERE clause")
        scan = True
    else:
        scan = table.needs_scan(where.this)
    if not source.is_source and not any(q.sink == source.name for q in queries.values()):
        name = source.name
        raise QueryError(f"The `{name}` table isn't queryable. To derive a queryable table, you "
                         f"can do 'CREATE TABLE QUERYABLE_{name} AS SELECT * FROM {name}'."
                         + SYNTAX_HELP)
    if scan and not settings.table_scans:
        raise QueryError("Query requires table scan to be enabled. Table scans can be enabled "
                         "by setting ksql.query.pull.table.scan.enabled=true")


