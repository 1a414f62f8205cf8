"""Derive what a SELECT produces: result kind, output columns with types, key columns, sources.

A small type checker over sqlglot's tree, following ksqlDB's rules for naming (aliases, column
names, generated ``KSQL_COL_n`` and struct field names that never repeat an input column's),
projections (``*``, ``alias.*``, ``struct->*``; after PARTITION BY ``*`` selects the new key
first and the old key last), keys (source key, PARTITION BY, GROUP BY, join key: each selected
exactly once, with a value left), aggregation (every selected expression grouped or aggregated)
and result kinds (aggregations and tables produce tables; anything reading a stream produces a
stream).

:func:`analyse` is the one place that works out what a query reads: its :class:`Analysis`
carries the sources (with their aliases and table nodes), the joins' shape, whether it
aggregates and its windowing, so validation, the runtime check, the planner and pull queries
all work from one analysis and none walks the tree for sources again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from types import MappingProxyType

from sqlglot import exp

from metastore.catalog import aggregation, alternatives, ddl_rules, pseudo_columns, references, source_rules
from metastore.catalog import joins as join_rules
from metastore.catalog.exceptions import PREPARING, QueryError, SourceNotFoundError
from metastore.catalog.model import Column, DataSource, WindowInfo
from metastore.catalog.overrides import NEW_QUERY_PLANNER
from metastore.catalog.pseudo_columns import PSEUDO_COLUMNS, WINDOW_BOUNDS
from metastore.functions import casts, operators
from metastore.functions import library as functions
from metastore.functions.datetime import partial_timestamp_millis
from metastore.functions.registry import (
    TIME_UNITS,
    Argument,
    FunctionError,
    LambdaArgument,
    UnitArgument,
)
from metastore.sql import positions
from metastore.sql import types as ty
from metastore.sql.statements import ColumnRole, PropertyValue, Query, SourceKind, WindowSpec


@dataclass(frozen=True)
class SourceRead:
    """One source a query reads: its FROM table (the first) or a JOIN's, in the order written."""

    alias: str
    """The name the query's columns qualify it by: its alias, else its name."""
    source: DataSource
    table: exp.Table
    """Its table node in the analysed query's tree (a runtime rewrites it to what it reads)."""


@dataclass(frozen=True)
class JoinShape:
    """One JOIN of a query, as written: ``side`` is '', LEFT, RIGHT or FULL and ``kind`` '',
    INNER, OUTER or CROSS (upper-cased); ``right`` is the source it joins."""

    side: str
    kind: str
    right: SourceRead


@dataclass(frozen=True)
class Analysis:
    """What a query reads and produces, derived once from the query and the catalog."""

    query: Query
    """The analysed query; ``reads`` and ``projection`` point into its tree."""
    kind: SourceKind
    columns: tuple[Column, ...]
    sources: tuple[str, ...]
    """The names of the sources the query depends on, each once, in the order written."""
    reads: tuple[SourceRead, ...]
    """Every FROM and JOIN table with the catalog source it names, in the order written."""
    joins: tuple[JoinShape, ...]
    window: WindowInfo | None
    """The result's windowing (a windowed aggregation's, or its first source's: a projection
    keeps its source's windows, a join of windowed sources its left source's)."""
    aggregate: bool
    projection: tuple[tuple[str, exp.Expr], ...] = ()
    """Each output column's name and the expression computing it, in SELECT order (``*``
    expanded); what a runtime compiles the projection from."""
    aggregate_step: aggregation.Summary | None = None
    """A persistent aggregation's aggregate step, as a query replacing it must keep it."""
    foreign_key_join: bool = False
    """Whether a join is a foreign-key table-table join."""
    synthetic_key: tuple[str, exp.Expr] | None = None
    """A join's synthetic key column (``ROWKEY``) and its value: the last join's key, from
    whichever side has one (ksqlDB repartitions both sides by their join expressions)."""

    @property
    def key_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.is_key)

    @property
    def windowing(self) -> WindowSpec | None:
        """The query's WINDOW clause, as written."""
        return self.query.window

    @property
    def windowed(self) -> bool:
        """Whether the query aggregates per window (its result is keyed by the window too)."""
        return self.aggregate and self.query.window is not None


_NOTHING_DERIVED: Mapping[str, ty.SqlType] = MappingProxyType({})


@dataclass(frozen=True)
class _Scope:
    """The sources a query reads, by alias, and their columns."""

    by_alias: Mapping[str, DataSource]
    order: tuple[str, ...]
    windowed: bool
    reads: tuple[SourceRead, ...]
    joins: tuple[JoinShape, ...]
    infos: tuple[join_rules.JoinInfo, ...] = ()
    """Each JOIN's criteria, oriented as ksqlDB's join tree (:mod:`metastore.catalog.joins`)."""
    derived: Mapping[str, ty.SqlType] = field(default_factory=lambda: _NOTHING_DERIVED)
    """Columns the query's plan adds: a join's synthetic key (a new scope once the join is
    planned, :func:`_with_join_key`)."""

    @property
    def source_names(self) -> tuple[str, ...]:
        """The sources the aliases name, each once (an alias given twice names the last)."""
        return tuple(dict.fromkeys(s.name for s in self.by_alias.values()))

    def resolve(self, name: str, qualifier: str | None, clause: str,
                node: exp.Expr | None = None) -> tuple[str, ty.SqlType]:
        """The alias of the source that has column ``name`` (qualified by ``qualifier``), and
        its type; refused as ksqlDB's AstSanitizer (an ambiguous name) and
        ColumnReferenceValidator (an unknown one) refuse it, at ``node``'s location."""
        at = positions.start(node) if node is not None else None
        if qualifier:
            source = self.by_alias.get(qualifier)
            found = self._column_of(source, name) if source is not None else None
            if found is None:
                raise _unknown_column(clause, f"{qualifier}.{name}", at)
            return qualifier, found
        self._check_unambiguous(name, at)
        matches = [(alias, t) for alias in self.order
                   if (t := self._column_of(self.by_alias[alias], name)) is not None]
        if not matches and name in self.derived:
            return "", self.derived[name]
        if len(matches) != 1:  # none, or the window bounds of a windowed join (ksqlDB #5931)
            raise _unknown_column(clause, name, at)
        return matches[0]

    def _check_unambiguous(self, name: str, at: positions.Position | None) -> None:
        """ksqlDB's AstSanitizer: an unqualified name is a column of one source at most (every
        source has the pseudo columns, a windowed source the window bounds)."""
        having = [alias for alias in self.order if self._has(self.by_alias[alias], name)]
        if len(having) > 1:
            raise QueryError(f"Column '{name}' is ambiguous. Could be "
                             f"{_listed(sorted(f'{a}.{name}' for a in having), 'or')}.",
                             location=at, stage=PREPARING)

    def _has(self, source: DataSource, name: str) -> bool:
        return (source.column(name) is not None or name in PSEUDO_COLUMNS
                or (source.window is not None and name in WINDOW_BOUNDS))

    def clashes(self, name: str) -> bool:
        """Whether a qualified column ``name`` is selected as ``ALIAS_NAME``: in a join, a
        pseudo column or a column two sources have (ksqlDB's DataSourceExtractor)."""
        return len(self.order) > 1 and (name in PSEUDO_COLUMNS or self.is_ambiguous(name))

    def check_references(self, query: Query, transient: bool) -> None:
        """ksqlDB's checks of a query's column references before anything is typed: no
        unqualified name is ambiguous (AstSanitizer, in its order: SELECT, JOIN criteria, WHERE,
        GROUP BY, PARTITION BY, HAVING), SELECT items are not named like system columns
        (Analyzer.validateSelect), and every column is known (ColumnReferenceValidator: WHERE,
        GROUP BY, PARTITION BY, HAVING, SELECT)."""
        select = query.select
        where, having = select.args.get("where"), select.args.get("having")
        group = select.args.get("group")
        clauses: dict[str, list[exp.Expr]] = {
            "SELECT": [e for e in select.expressions if not _is_star(e)],
            "JOIN ON": [j.args["on"] for j in select.args.get("joins") or [] if j.args.get("on")],
            "WHERE": [where.this] if where is not None else [],
            "GROUP BY": list(group.expressions) if group is not None else [],
            "PARTITION BY": list(query.partition_by),
            "HAVING": [having.this] if having is not None else [],
        }
        for expressions in clauses.values():
            for expression in expressions:
                for column in references.columns(expression):
                    if not column.table and not _is_null(column):
                        self._check_unambiguous(column.name, positions.start(column))
        pseudo_columns.check_select_names(select.expressions, self.clashes, not transient)
        synthetic = len(self.order) > 1 and group is None
        for clause in ("WHERE", "GROUP BY", "PARTITION BY", "HAVING", "SELECT"):
            for expression in clauses[clause]:
                for column in references.columns(expression):
                    if _is_null(column) or self._is_unit(column) or (
                            synthetic and clause == "SELECT" and not column.table
                            and column.name.startswith(_SYNTHETIC_JOIN_KEY)):
                        continue  # validated once the join's key is known (FinalProjectNode)
                    self.resolve(column.name, column.table or None, clause, column)

    def _is_unit(self, column: exp.Column) -> bool:
        """Whether ``column`` is a time unit passed to a function (``SECONDS``), not a column."""
        return (not column.table and column.name.upper() in TIME_UNITS
                and isinstance(column.parent, exp.Func)
                and all(self._column_of(s, column.name) is None for s in self.by_alias.values()))

    def is_ambiguous(self, name: str) -> bool:
        return sum(self.by_alias[a].column(name) is not None for a in self.order) > 1

    def _column_of(self, source: DataSource, name: str) -> ty.SqlType | None:
        column = source.column(name)
        if column is not None:
            return column.type
        if name in PSEUDO_COLUMNS:
            return PSEUDO_COLUMNS[name]
        if (source.window is not None or self.windowed) and name in WINDOW_BOUNDS:
            return WINDOW_BOUNDS[name]
        return None


def analyse(query: Query, sources: Mapping[str, DataSource],
            custom_types: Mapping[str, ty.SqlType], sink: str = "the result",
            transient: bool = False, new_planner: bool = False,
            sink_properties: Mapping[str, PropertyValue] | None = None,
            target: Sequence[Column] | None = None) -> Analysis:
    """What ``query`` produces; a ``transient`` query (a pull query) has no key to keep;
    ``new_planner``: ksqlDB's ``ksql.new.query.planner.enabled``, under which a persistent query
    is a projection of a stream's columns, keyed by the keys it selects in the SELECT's order;
    ``sink_properties``: a C*AS's WITH clause, whose TIMESTAMP column ksqlDB's LogicalPlanner
    checks in the query's output before the keys the sink must keep; ``target``: the columns
    of the existing sink an INSERT INTO writes, which a numeric literal selected for a DECIMAL
    column is cast to (:func:`_implicitly_cast`)."""
    select = query.select
    assert isinstance(select, exp.Select)
    if new_planner and not transient:
        _check_new_planner(query)
    scope = _scope(query, sources)
    if new_planner and not transient and any(
            read.source.kind is SourceKind.TABLE for read in scope.reads):
        raise QueryError("Input TABLES are not supported by the new planner")
    typer = _Typer(scope, dict(custom_types))
    group = select.args.get("group")
    group_by: list[exp.Expr] = list(group.expressions) if group is not None else []
    aggregate = bool(group_by) or any(
        _is_aggregate(e) for item in select.expressions for e in item.find_all(exp.Func))
    for clause, expressions in (("GROUP BY", group_by), ("PARTITION BY", query.partition_by)):
        aggregation.check_distinct(expressions, clause, _same, typer.qualified_text)
    scope.check_references(query, transient)
    source_rules.check_sources([(r.alias, r.source) for r in scope.reads], select.expressions,
                               grouped=bool(group_by), joined=bool(select.args.get("joins")),
                               persistent=not transient, text=typer.text)
    where = select.args.get("where")
    if where is not None:
        typer.check_filter(where.this, "WHERE")
    for clause, expressions in (("GROUP BY", group_by), ("PARTITION BY", query.partition_by)):
        typer.clause = clause
        for expression in expressions:
            if not _is_null(expression):
                typer.type_of(expression)
    new_keys = None
    if query.partition_by and not group_by and not transient:
        new_keys = _partition_keys(query.partition_by, scope, typer)
    if not aggregate and query.window is not None:
        raise QueryError("WINDOW clause requires a GROUP BY clause.")
    joined = _plan_joins(select, scope, typer)
    scope = typer.scope = _with_join_key(scope, joined)
    typer.clause = "SELECT"
    projected = _project(select, scope, typer, new_keys, transient)
    if target is not None:
        projected = _implicitly_cast(projected, target)
    calls = _check_grouping(projected, group_by, select, scope, typer, query.window is not None)
    if query.emit_final and not (aggregate and query.window is not None):
        raise QueryError("EMIT FINAL is only supported for windowed aggregations.")
    kinds = {source.kind for source in scope.by_alias.values()}
    kind = SourceKind.TABLE if aggregate or kinds == {SourceKind.TABLE} else SourceKind.STREAM
    if aggregate and kinds == {SourceKind.TABLE} and not transient:
        _check_table_aggregation(select, query.window is not None)

    if transient:
        return Analysis(query=query, kind=kind,
                        columns=tuple(Column(p.name, p.type) for p in projected),
                        sources=scope.source_names, reads=scope.reads, joins=scope.joins,
                        window=None, aggregate=aggregate,
                        projection=tuple((p.name, p.expression) for p in projected))
    if sink_properties is not None:
        ddl_rules.timestamp_column(sink_properties, [(p.name, p.type) for p in projected])
    if aggregate and not group_by:  # ksqlDB's AggregateNode.validateKeyPresent: no key to keep
        listed = ", ".join(aggregation.call_text(c, _rendering(scope, typer)) for c in calls)
        raise QueryError(f"CREATE TABLE AS SELECT statement does not support aggregate function "
                         f"[{listed}] without a GROUP BY clause.")
    if group_by:
        key_exprs, typer.clause, key_kind = list(group_by), "GROUP BY", "grouping expression"
    elif query.partition_by:
        key_exprs, typer.clause = list(query.partition_by), "PARTITION BY"
        key_kind = "partitioning expression"
    elif joined is not None:
        key_exprs, key_kind = [], "join expression"
    else:
        first = scope.by_alias[scope.order[0]]
        key_exprs = [exp.column(c.name, table=scope.order[0], quoted=True)
                     for c in first.key_columns]
        key_kind = "key column"
    if joined is not None and not key_exprs:  # the join's key (ksqlDB's JoinNode)
        columns = join_rules.result_columns(projected, select.expressions, joined, kind,
                                            f"`{sink}`", _join_resolver(scope))
    else:
        columns = _assign_keys(projected, key_exprs, kind, query, f"`{sink}`", key_kind, new_keys,
                               new_planner=new_planner and key_kind == "key column",
                               # ksqlDB writes PARTITION BY as rewritten: columns qualified
                               shown=typer.qualified_text if query.partition_by and not group_by
                               else _shown)
    if joined is not None:
        join_rules.check_physical(joined, scope.reads, query.within_ms is not None,
                                  _join_resolver(scope), typer.type_of)
    window = None
    if query.window is not None and aggregate:
        window = WindowInfo(query.window.kind, query.window.size_ms)
    elif not aggregate:  # a join of windowed sources is keyed by the left one's windows
        window = scope.by_alias[scope.order[0]].window
    summary = None
    if calls:
        where, having = select.args.get("where"), select.args.get("having")
        summary = aggregation.summarise(
            [p.expression for p in projected], where.this if where is not None else None,
            group_by, having.this if having is not None else None, calls,
            _rendering(scope, typer))
    return Analysis(query=query, kind=kind, columns=tuple(columns), sources=scope.source_names,
                    reads=scope.reads, joins=scope.joins, window=window, aggregate=aggregate,
                    projection=tuple((p.name, p.expression) for p in projected),
                    aggregate_step=summary, synthetic_key=_synthetic_key(joined),
                    foreign_key_join=joined is not None and any(joined.foreign))


def _check_new_planner(query: Query) -> None:
    """ksqlDB's newer planner (``ksql.new.query.planner.enabled``) plans only projections of
    one stream's columns: its EngineExecutor and SelectNode refuse anything else."""
    select = query.select
    unsupported = (("WHERE", select.args.get("where")), ("GROUP BY", select.args.get("group")),
                   ("HAVING", select.args.get("having")), ("WINDOWS", query.window),
                   ("PARTITION BY", query.partition_by), ("LIMIT", select.args.get("limit")),
                   ("joins", select.args.get("joins")))
    for clause, present in unsupported:
        if present:
            raise QueryError(f"New query planner does not support {clause}. "
                             f"Set {NEW_QUERY_PLANNER}=false.")
    for item in select.expressions:
        if not isinstance(item.unalias(), exp.Column | exp.Star):
            raise QueryError("New query planner only support column references, no expressions "
                             "or aliases.")


def _synthetic_key(joined: join_rules.JoinPlan | None) -> tuple[str, exp.Expr] | None:
    if joined is None or joined.key.kind != "synthetic":
        return None
    last = joined.infos[-1]
    return joined.key.name, exp.func("coalesce", last.left_expr.copy(), last.right_expr.copy())


_SYNTHETIC_JOIN_KEY = "ROWKEY"
"""How the key column a join synthesises is named (ksqlDB's ColumnNames)."""


def _unknown_column(clause: str, text: str, at: positions.Position | None) -> QueryError:
    """ksqlDB's UnknownColumnException; PARTITION BY applies to the input, the Analyzer adds."""
    message = f"{clause} column '{text}' cannot be resolved."
    if clause == "PARTITION BY":
        message += (f" '{text}' must be a column in the source schema since PARTITION BY is "
                    "applied on the input.")
    return QueryError(message, location=at)


def check_reads(query: Query, sources: Mapping[str, DataSource]) -> None:
    """What ksqlDB checks of the sources a query reads before anything else of the statement
    it is in: its qualifiers name them, and they exist (not yet its join criteria)."""
    _scope(query, sources, criteria=False)


def _scope(query: Query, sources: Mapping[str, DataSource], criteria: bool = True) -> _Scope:
    """The query's sources; its qualified references must name one of them, by name or alias
    (ksqlDB's AST builder), and each must exist (its DataSourceExtractor, with MetaStoreImpl's
    hint at a name differing in case)."""
    select = query.select
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        raise QueryError("A query must read FROM a stream or table.")
    if not isinstance(from_.this, exp.Table):
        raise QueryError("Sub-queries are not supported.")
    joins = list(select.args.get("joins") or [])
    for join in joins:
        if not isinstance(join.this, exp.Table):
            raise QueryError("Sub-queries are not supported.")
    tables = [from_.this, *(join.this for join in joins)]
    references.check_qualifiers(
        [*select.expressions, *(select.args[c].this for c in ("where", "having")
                                if select.args.get(c) is not None),
         *(j.args["on"] for j in joins if j.args.get("on") is not None),
         *(select.args["group"].expressions if select.args.get("group") else []),
         *query.partition_by],
        {name for table in tables for name in (table.name, table.alias_or_name)})
    by_alias: dict[str, DataSource] = {}
    reads: list[SourceRead] = []
    for table in tables:
        name = table.name
        source = sources.get(name)
        if source is None:
            raise SourceNotFoundError(
                f"{name} does not exist.{alternatives.hint(name, sources.values())}", name,
                stage=PREPARING)
        alias = table.alias_or_name
        by_alias[alias] = source
        reads.append(SourceRead(alias, source, table))
    shapes = tuple(JoinShape((join.side or "").upper(), (join.kind or "").upper(), read)
                   for join, read in zip(joins, reads[1:], strict=True))
    scope = _Scope(by_alias, tuple(r.alias for r in reads), query.window is not None,
                   tuple(reads), shapes)
    if not joins or not criteria:
        return scope
    resolve = _join_resolver(scope)
    infos = join_rules.criteria(joins, scope.reads, resolve,
                            lambda e: join_rules.qualified_text(e, resolve))
    return replace(scope, infos=infos)


def _join_resolver(scope: _Scope) -> join_rules.Resolve:
    def resolve(column: exp.Column) -> str:
        return scope.resolve(column.name, column.table or None, "JOIN ON", column)[0]
    return resolve


def _plan_joins(select: exp.Select, scope: _Scope, typer: _Typer) -> join_rules.JoinPlan | None:
    """ksqlDB's LogicalPlanner.buildJoin (:func:`metastore.catalog.joins.plan`); a synthetic
    key becomes a column the projection can select."""
    if not scope.infos:
        return None
    resolve = _join_resolver(scope)
    clause, typer.clause = typer.clause, "JOIN ON"
    try:
        joined = join_rules.plan(scope.infos, scope.reads, select.expressions, resolve, typer.type_of,
                                 lambda e: join_rules.qualified_text(e, resolve, typer.type_of))
    finally:
        typer.clause = clause
    return joined


def _with_join_key(scope: _Scope, joined: join_rules.JoinPlan | None) -> _Scope:
    """``scope`` with the synthetic key of the planned join ``joined``, if it has one."""
    if joined is None or joined.key.kind != "synthetic" or joined.key.type is None:
        return scope
    return replace(scope, derived=MappingProxyType({joined.key.name: joined.key.type}))


@dataclass
class _Projected:
    name: str
    type: ty.SqlType
    expression: exp.Expr


def _implicitly_cast(projected: list[_Projected], target: Sequence[Column]) -> list[_Projected]:
    """ksqlDB's ImplicitlyCastResolver, as its planner applies it to an INSERT INTO's SELECT:
    the i-th item, a numeric literal, selected for the sink's i-th column (keys first), a
    DECIMAL, is that DECIMAL when the literal's own decimal type fits it (no larger scale, no
    more integer digits)."""
    columns = [c for c in target if c.role in (ColumnRole.KEY, ColumnRole.PRIMARY_KEY,
                                               ColumnRole.VALUE)]
    columns.sort(key=lambda c: not c.is_key)
    cast = list(projected)
    for index, (item, column) in enumerate(zip(projected, columns, strict=False)):
        literal = item.expression
        if not (isinstance(column.type, ty.DecimalType) and isinstance(literal, exp.Literal)
                and not literal.is_string):
            continue
        own = operators.decimal_of_value(Decimal(str(literal.this)))
        if own.scale > column.type.scale or (
                own.precision - own.scale > column.type.precision - column.type.scale):
            continue
        to = exp.DataType.build(f"DECIMAL({column.type.precision}, {column.type.scale})")
        cast[index] = _Projected(item.name, column.type, exp.Cast(this=literal.copy(), to=to))
    return cast


_GENERATED_PREFIX = "KSQL_COL"
_NUMBERED_NAME = re.compile(r"(?P<base>.*?)(?:_(?P<number>\d+))?")


def _numbered(name: str) -> tuple[str, int]:
    """A name as ksqlDB's generated names see it: ``KSQL_COL_3`` is (KSQL_COL, 3), ``TOWN``
    (TOWN, 0)."""
    match = _NUMBERED_NAME.fullmatch(name)
    assert match is not None, "the pattern matches every name"
    number = match.group("number")
    return match.group("base"), int(number) if number is not None else 0


class _ColumnAliases:
    """ksqlDB's generated column names (``ColumnNames.columnAliasGenerator``): ``KSQL_COL_n`` for
    an expression, the field's name for a struct field ``a->b`` (``B``, then ``B_1``...), never
    one of the names it was seeded with nor one it gave before."""

    def __init__(self, taken: Iterable[str]) -> None:
        self._taken: dict[str, set[int]] = {}
        for name in taken:
            base, number = _numbered(name)
            self._taken.setdefault(base, set()).add(number)
        self._next: dict[str, int] = {}

    def alias_for(self, expression: exp.Expr) -> str:
        if isinstance(expression, exp.Dot | exp.JSONExtract):
            return self._next_name(_numbered(_deref_name(expression))[0])
        return self._next_name(_GENERATED_PREFIX)

    def _next_name(self, base: str) -> str:
        taken = self._taken.get(base, set())
        index = self._next.get(base, 0)
        while index in taken:
            index += 1
        self._next[base] = index + 1
        return base if index == 0 and base != _GENERATED_PREFIX else f"{base}_{index}"


def partitions_by_null(partition_by: tuple[exp.Expr, ...]) -> bool:
    """Whether a query's PARTITION BY is NULL, which leaves its result without a key (ksqlDB's
    PartitionByParamsFactory.isPartitionByNull: NULL stands alone)."""
    if not any(_is_null(expression) for expression in partition_by):
        return False
    if len(partition_by) > 1:
        raise QueryError("Cannot PARTITION BY multiple columns including NULL")
    return True


def _is_null(expression: exp.Expr) -> bool:
    return isinstance(expression, exp.Null) or (
        isinstance(expression, exp.Column) and not expression.table and expression.name == "NULL")


def _partition_keys(partition_by: tuple[exp.Expr, ...], scope: _Scope,
                    typer: _Typer) -> list[_Projected]:
    """The key columns PARTITION BY makes, in its order (ksqlDB's PartitionByParamsFactory): a
    column (or pseudo column) keeps its name, any other expression is named like a SELECT
    expression, unlike every column of the input (its pseudo columns included); NULL makes none.
    """
    multi = len(scope.order) > 1
    taken: list[str] = []
    for alias in scope.order:
        source = scope.by_alias[alias]
        names = [c.name for c in source.columns] + list(PSEUDO_COLUMNS)
        names += list(WINDOW_BOUNDS) if source.window is not None else []
        taken += [f"{alias}_{name}" if multi else name for name in names]
    aliases = _ColumnAliases(taken)
    keys: list[_Projected] = []
    for expression in partition_by:
        if _is_null(expression):
            continue
        sql_type = typer.type_of(expression)
        if isinstance(expression, exp.Column):
            alias = scope.resolve(expression.name, expression.table or None, "PARTITION BY")[0]
            name = f"{alias}_{expression.name}" if multi else expression.name
        else:
            name = aliases.alias_for(expression)
        keys.append(_Projected(name, sql_type, expression))
    return keys


def _source_columns(scope: _Scope, alias: str, repartitioned: bool,
                    transient: bool = False) -> list[_Projected]:
    """The columns ``alias.*`` selects, key columns first; after a PARTITION BY the source's key
    is a value column, after its value columns (and, in a join, its pseudo columns); a windowed
    source's window bounds after its keys in a join or a transient query (ksqlDB's
    PreJoinProjectNode, and a pull query's key)."""
    source = scope.by_alias.get(alias)
    if source is None:
        raise QueryError(f"'{alias}' is not a valid stream/table name or alias.")
    multi = len(scope.order) > 1
    columns = list(source.columns)  # header columns are value columns, in declared order
    keys = [c for c in columns if c.is_key]
    values = [c for c in columns if not c.is_key]
    if repartitioned:
        pseudo = [Column(name, t) for name, t in PSEUDO_COLUMNS.items()] if multi else []
        columns = values + pseudo + keys
    else:  # a join reads a windowed source's window bounds as columns (PreJoinProjectNode)
        bounds = [Column(name, t) for name, t in WINDOW_BOUNDS.items()
                  if (multi or transient) and source.window is not None]
        columns = keys + bounds + values
    return [_Projected(f"{alias}_{c.name}" if multi else c.name, c.type,
                       exp.column(c.name, table=alias if multi or c.name not in WINDOW_BOUNDS
                                  else None, quoted=True)) for c in columns]


def _star(qualifier: str | None, scope: _Scope, new_keys: list[_Projected] | None,
          transient: bool = False) -> list[_Projected]:
    """``*`` or ``alias.*``; after a PARTITION BY, the new key columns first (ksqlDB's
    UserRepartitionNode.resolveSelectStar)."""
    aliases = [qualifier] if qualifier else list(scope.order)
    columns = [c for alias in aliases
               for c in _source_columns(scope, alias, new_keys is not None, transient)]
    if not new_keys or (qualifier and len(scope.order) > 1):
        return columns
    return new_keys + [c for c in columns
                       if not any(_same(c.expression, key.expression) for key in new_keys)]


def _struct_fields(expression: exp.Expr, typer: _Typer) -> list[_Projected]:
    """``s->*``: a column per field of the struct ``s``, named by the field (ksqlDB's
    SelectionUtil.resolveStructAll)."""
    struct = typer.type_of(expression.this)
    if not isinstance(struct, ty.StructType):
        raise QueryError(f"Column {expression.this.sql()} is not a STRUCT type.")
    fields: list[_Projected] = []
    for name, _ in struct.fields:
        access = expression.copy()
        access.set("expression", exp.column(name, quoted=True))
        fields.append(_Projected(name, typer.type_of(access), access))
    return fields


def _is_star(item: exp.Expr) -> bool:
    return isinstance(item, exp.Star) or (isinstance(item, exp.Column)
                                          and isinstance(item.this, exp.Star))


def _project(select: exp.Select, scope: _Scope, typer: _Typer,
             new_keys: list[_Projected] | None = None,
             transient: bool = False) -> list[_Projected]:
    """Each output column in SELECT order, ``*`` and ``s->*`` expanded; ``new_keys`` are the key
    columns of a PARTITION BY, which ``*`` selects; a ``transient`` query's ``*`` selects a
    windowed source's window bounds."""
    aliases = _ColumnAliases(c.name for read in scope.reads for c in read.source.columns)
    multi = len(scope.order) > 1
    out: list[_Projected] = []
    for item in select.expressions:
        if _is_star(item):
            out += _star(item.table if isinstance(item, exp.Column) else None, scope, new_keys,
                         transient)
            continue
        if isinstance(item, exp.JSONExtract) and isinstance(item.expression, exp.Star):
            out += _struct_fields(item, typer)
            continue
        expression = item.this if isinstance(item, exp.Alias) else item
        sql_type = typer.value_type(expression)
        if isinstance(item, exp.Alias):
            name = item.alias
        elif isinstance(expression, exp.Column):
            name = expression.name
            if expression.table and (scope.is_ambiguous(name)
                                     or (multi and name in PSEUDO_COLUMNS)):
                name = f"{expression.table}_{expression.name}"
        else:
            name = aliases.alias_for(expression)
        out.append(_Projected(name, sql_type, expression))
    seen: set[str] = set()
    for projected in out:
        if projected.name in seen:
            raise QueryError(f"Duplicate value columns found in schema: `{projected.name}` "
                             f"{projected.type.sql()}")
        seen.add(projected.name)
    return out


def _deref_name(expression: exp.Expr) -> str:
    path = expression.expression
    text = path.name if isinstance(path, exp.Expr) else str(path)
    identifier = path.this if isinstance(path, exp.Column) else path
    quoted = isinstance(identifier, exp.Identifier) and bool(identifier.args.get("quoted"))
    name = text.strip("$.").split(".")[-1]
    return (name if quoted else name.upper()) or "KSQL_COL_0"  # a quoted field keeps its case


def _check_grouping(projected: list[_Projected], group_by: list[exp.Expr], select: exp.Select,
                    scope: _Scope, typer: _Typer, windowed: bool) -> list[exp.Expr]:
    """The rules of a query that aggregates (:mod:`metastore.catalog.aggregation`, ksqlDB's
    AggregateAnalyzer), then its HAVING's type; the aggregate calls (none if it does not
    aggregate)."""
    if not group_by and not any(_is_aggregate(e) for p in projected
                                for e in p.expression.find_all(exp.Func)):
        return []
    where, having = select.args.get("where"), select.args.get("having")
    calls = aggregation.check_aggregation(
        [p.expression for p in projected], group_by, where.this if where is not None else None,
        having.this if having is not None else None, windowed, _rendering(scope, typer))
    if having is not None:
        typer.check_filter(having.this, "HAVING")
    return calls


def _rendering(scope: _Scope, typer: _Typer) -> aggregation.Rendering:
    return aggregation.Rendering(same=_same, is_column=lambda c: _is_column(c, scope),
                                 shown=_shown, column=typer.column_text)


def _check_table_aggregation(select: exp.Select, windowed: bool) -> None:
    """ksqlDB aggregates a table's changelog only unwindowed, and only with functions that can
    take a replaced row's value back out."""
    if windowed:
        raise QueryError("Windowing not supported for table aggregations.")
    refused: list[str] = []
    having = select.args.get("having")
    for item in [*select.expressions, *([having] if having is not None else [])]:
        for call in item.find_all(exp.Anonymous):
            found = functions.lookup(function_name(call)) if _is_aggregate(call) else None
            if found is not None and not found.undoable and found.name not in refused:
                refused.append(found.name)
    if refused:
        plural = "s" if len(refused) > 1 else ""
        raise QueryError(f"The aggregation function{plural} {_listed(refused, 'and')} cannot be "
                         "applied to a table source, only to a stream source.")


def _is_column(node: exp.Column, scope: _Scope) -> bool:
    """Whether ``node`` names a column (not a lambda's variable or a time unit)."""
    try:
        scope.resolve(node.name, node.table or None, "SELECT")
    except QueryError:
        return False
    return True


def _unparenthesised(expression: exp.Expr) -> exp.Expr:
    while isinstance(expression, exp.Paren):
        expression = expression.this
    return expression


def _same(a: exp.Expr, b: exp.Expr) -> bool:
    a, b = _unparenthesised(a), _unparenthesised(b)
    if isinstance(a, exp.Column) and isinstance(b, exp.Column):
        return a.name == b.name and (not a.table or not b.table or a.table == b.table)
    return a.sql() == b.sql()


_PARENTHESISED = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.And, exp.Or, exp.EQ, exp.NEQ,
                  exp.GT, exp.GTE, exp.LT, exp.LTE)


def _shown(expression: exp.Expr) -> str:
    """An expression as ksqlDB's messages write it: a column by its name, ``a->b``, binary
    operations in parentheses."""
    if isinstance(expression, exp.Column):
        return expression.name
    holder = exp.Paren(this=expression.copy())  # so that the expression itself can be replaced
    for node in reversed(list(holder.this.find_all(exp.JSONExtract, *_PARENTHESISED))):
        if isinstance(node, exp.JSONExtract):
            node.replace(exp.Var(this=f"{node.this.sql()}->{_deref_name(node)}"))
        else:
            parenthesised = exp.Paren()
            node.replace(parenthesised)
            parenthesised.set("this", node)
    return str(holder.this.sql())


def _listed(items: list[str], last: str) -> str:
    """ksqlDB's GrammaticalJoiner: ``A``, ``A and B``, ``A, B and C``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {last} {items[-1]}"


def _missing_keys(sink: str, key_kind: str, shown: list[str]) -> QueryError:
    """ksqlDB's PlanNode.throwKeysNotIncludedError, every key required (a join's is any of its
    equivalent expressions: :func:`metastore.catalog.joins.missing_key`)."""
    keys = "Keys" if len(shown) > 1 else "Key"
    kinds = key_kind if len(shown) == 1 else f"{key_kind}s"
    return QueryError(f"{keys} missing from projection (ie, SELECT). \nThe query used to "
                      f"build {sink} must include the {kinds} {_listed(shown, 'and')} in its "
                      f"projection (eg, SELECT {', '.join(shown)}...).")


def _key_more_than_once(key_name: str, aliases: list[str], grouped: bool) -> QueryError:
    """ksqlDB's AggregateNode / FinalProjectNode: a key column is selected once."""
    if grouped:
        text = ("The projection contains a key column more than once: "
                f"{_listed([f'`{a}`' for a in aliases], 'and')}.")
    else:
        text = (f"The projection contains a key column (`{key_name}`) more than once, aliased "
                f"as: {_listed(sorted(aliases), 'and')}.")
    return QueryError(f"{text}\nEach key column must only be in the projection once. If you "
                      "intended to copy the key into the value, then consider using the AS_VALUE "
                      "function to indicate which key reference should be copied.")


def _assign_keys(projected: list[_Projected], key_exprs: list[exp.Expr], kind: SourceKind,
                 query: Query, sink: str, key_kind: str,
                 new_keys: list[_Projected] | None, new_planner: bool,
                 shown: Callable[[exp.Expr], str] = _shown) -> list[Column]:
    """The result's columns, keys first: each key expression must be selected exactly once
    (a SELECT expression equal to it names the key), and something must be left for the value.
    The keys are in the order of ``key_exprs`` (GROUP BY, PARTITION BY, the source's keys);
    with ``new_planner`` (a projection of the source's keys under ksqlDB's newer planner), the
    keys it selects, in the order the SELECT lists them (none: the result has no key)."""
    role = ColumnRole.PRIMARY_KEY if kind is SourceKind.TABLE else ColumnRole.KEY
    grouped = bool(query.select.args.get("group"))
    missing: list[exp.Expr] = []
    keys = [key for key in key_exprs if not _is_null(key)]
    key_names = ([k.name for k in new_keys] if new_keys is not None
                 else [k.name for k in keys])
    key_indexes = []
    for key, key_name in zip(keys, key_names, strict=True):
        found = [i for i, p in enumerate(projected) if _same(p.expression, key)]
        if len({projected[i].name for i in found}) > 1:
            raise _key_more_than_once(key_name, [projected[i].name for i in found], grouped)
        if found:
            key_indexes.append(found[0])
        else:
            missing.append(key)
    if new_planner:  # keyed by the source keys it selects, if any
        missing = []
    if missing and not grouped:
        missing = keys
    if len(key_indexes) == len(projected):
        raise QueryError("The projection contains no value columns.")
    if missing:
        raise _missing_keys(sink, key_kind, [shown(k) for k in missing])
    if new_planner:
        key_indexes.sort()
    key_columns = [Column(projected[i].name, projected[i].type, role) for i in key_indexes]
    values = [Column(p.name, p.type) for i, p in enumerate(projected) if i not in key_indexes]
    return key_columns + values


_is_aggregate = functions.is_aggregate
function_name = functions.function_name


class _Typer:
    def __init__(self, scope: _Scope, custom: dict[str, ty.SqlType]) -> None:
        self.scope = scope
        self.custom = custom
        self.clause = "SELECT"
        self.lambda_scopes: list[dict[str, ty.SqlType]] = []

    def type_of(self, node: exp.Expr) -> ty.SqlType:
        """The ksqlDB type of ``node``, also recorded in its ``meta`` for the translation."""
        return functions.annotate(node, self._type_of(node))

    def _type_of(self, node: exp.Expr) -> ty.SqlType:
        if isinstance(node, exp.Column) and not node.table and (
                bound := self._lambda_variable(node.name)) is not None:
            return bound
        if isinstance(node, exp.Paren):
            return self.type_of(node.this)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise QueryError("'*' is only allowed in the projection.")
            if (self.clause == "WHERE" and self.scope.windowed and not node.table
                    and node.name in WINDOW_BOUNDS
                    and all(s.window is None for s in self.scope.by_alias.values())):
                # the filter runs on the unwindowed input: only the aggregation has the bounds
                raise QueryError(f"Error in WHERE expression: Unknown column {node.name}.")
            return self.scope.resolve(node.name, node.table or None, self.clause, node)[1]
        if isinstance(node, exp.Literal):
            return self._literal(node)
        if isinstance(node, exp.Boolean):
            return ty.BOOLEAN
        if isinstance(node, exp.Null):
            return ty.STRING
        if isinstance(node, exp.Neg):
            negated = self.type_of(node.this)
            if isinstance(node.this, exp.Literal) and str(node.this.this).isdigit():
                return _integer_literal_type(-int(str(node.this.this)))  # -2147483648: INTEGER
            return negated
        symbol = operators.arithmetic_symbol(node)
        if symbol is not None and isinstance(node, exp.Binary):  # no extra frame: chains are deep
            self.type_of(node.left)
            self.type_of(node.right)
            return self._arithmetic(symbol, node)
        operator_type = self._operator(node)
        if operator_type is not None:
            return operator_type
        if isinstance(node, exp.Not | exp.And | exp.Or | exp.Predicate | exp.Is | exp.In |
                      exp.Between | exp.Like | exp.ILike | exp.Escape):
            for operand in node.iter_expressions():
                self.type_of(operand)
            return ty.BOOLEAN
        if isinstance(node, exp.DPipe):
            return ty.STRING
        if isinstance(node, exp.Case) and node.args.get("this") is None:
            return self._searched_case(node)
        if isinstance(node, exp.Case):
            for branch in node.iter_expressions():
                self.type_of(branch)
            ifs = node.args.get("ifs") or []
            return self.type_of(ifs[0].args["true"]) if ifs else ty.STRING
        if isinstance(node, exp.If):
            return self.type_of(node.args["true"])
        if isinstance(node, exp.JSONExtract | exp.Dot):
            return self._deref(node)
        if isinstance(node, exp.Bracket):
            container = self.type_of(node.this)
            if isinstance(container, ty.ArrayType):
                return container.element
            if isinstance(container, ty.MapType):
                return container.value
            raise QueryError(f"Cannot index a value of type {container.sql()}.")
        if isinstance(node, exp.Array):
            return self._constructor("ARRAY", list(node.expressions))
        if isinstance(node, exp.PropertyEQ | exp.Alias):
            return self.type_of(node.expression if isinstance(node, exp.PropertyEQ) else node.this)
        if isinstance(node, exp.Func):
            return self._function(node)
        raise QueryError(f"Unsupported expression: {node.sql()}")

    def _operator(self, node: exp.Expr) -> ty.SqlType | None:
        """The type of an operator or CAST, checked by ksqlDB's rules
        (:mod:`metastore.functions.operators`, :mod:`metastore.functions.casts`); None for
        other nodes."""
        comparison = operators.COMPARISONS.get(type(node))
        if comparison is not None and isinstance(node, exp.Binary):
            for column, other in ((node.left, node.right), (node.right, node.left)):
                if self._is_time_column(column):
                    self._as_epoch_millis(other)
                    break
            self._compare(comparison, node, node.left, node.right)
            return ty.BOOLEAN
        if isinstance(node, exp.Between):
            if self._is_time_column(node.this):
                self._as_epoch_millis(node.args["low"])
                self._as_epoch_millis(node.args["high"])
            for bound, kind in ((node.args["low"], exp.GTE), (node.args["high"], exp.LTE)):
                self._compare(operators.COMPARISONS[kind], node, node.this, bound)
            return ty.BOOLEAN
        if isinstance(node, exp.In) and not node.args.get("query"):
            for operand in (node.this, *node.expressions):
                self._operand(operand)
            try:
                operators.in_list_type(node.this, node.expressions, self._operand)
            except operators.OperatorError as error:
                raise self._refusal(error, node) from error
            return ty.BOOLEAN
        if isinstance(node, exp.Cast):
            target = _from_sqlglot(node.to, self.custom)
            try:
                casts.check_cast(self._operand(node.this), target)
            except casts.CastError as error:
                raise self._refusal(operators.OperatorError(str(error), late=True),
                                    node) from error
            return target
        return None

    def _is_time_column(self, node: exp.Expr) -> bool:
        """Whether a filter compares ``node`` as ksqlDB's magic timestamp: ROWTIME, WINDOWSTART
        or WINDOWEND written bare, in WHERE (or HAVING)."""
        return (self.clause in ("WHERE", "HAVING") and isinstance(node, exp.Column)
                and not node.table and node.name.upper() in _TIME_COLUMNS
                and self._lambda_variable(node.name) is None)

    def _as_epoch_millis(self, node: exp.Expr) -> None:
        """A string literal compared with a magic timestamp column is the epoch milliseconds
        of the (possibly partial) timestamp it spells (ksqlDB's
        ``StatementRewriteForMagicPseudoTimestamp``): the tree is rewritten in place."""
        text = node.name if isinstance(node, exp.Literal) and node.is_string else None
        if text is None:
            return
        try:
            millis = partial_timestamp_millis(text)
        except ValueError as error:
            raise QueryError(str(error)) from error
        node.replace(exp.Literal.number(millis))

    def _arithmetic(self, symbol: str, node: exp.Binary) -> ty.SqlType:
        """The type of ``node`` (``left <symbol> right``), its operands already typed."""
        left, right = (None if isinstance(o, exp.Null) else functions.ksql_type(o)
                       for o in (node.left, node.right))
        try:
            return operators.arithmetic_type(symbol, left, right, self.text(node))
        except operators.OperatorError as error:
            raise self._refusal(error, node) from error

    def _operand(self, node: exp.Expr) -> ty.SqlType | None:
        """An operator's operand's type; None for the NULL literal."""
        sql_type = self.type_of(node)
        return None if isinstance(node, exp.Null) else sql_type

    def _compare(self, comparison: operators.Comparison, node: exp.Expr, left: exp.Expr,
                 right: exp.Expr) -> None:
        problem = operators.comparison_problem(
            comparison, self._operand(left), self._operand(right), self.text(left),
            self.text(right))
        if problem is not None:
            raise self._refusal(operators.OperatorError(problem), node)

    def _refusal(self, error: operators.OperatorError, node: exp.Expr) -> QueryError:
        """ksqlDB's wording: an error found when compiling the clause is prefixed with its
        kind, one found when typing a WHERE names the clause and the expression."""
        if error.late:
            return QueryError(operators.COMPILE_PREFIXES.get(self.clause, "") + str(error))
        prefix = f"Error in {self.clause} expression: " if self.clause in _FILTERS else ""
        return QueryError(f"{prefix}{error}\nStatement: {self.text(node)}")

    def text(self, node: exp.Expr) -> str:
        """``node`` as ksqlDB's messages print it once it rewrote the query's column references
        (ColumnReferenceRewriter): unqualified, and in a join named ``ALIAS_COLUMN`` (join
        criteria are typed before that rewrite)."""
        return operators.ksql_text(node, None if self.clause == "JOIN ON" else self.column_text)

    def qualified_text(self, node: exp.Expr) -> str:
        """``node`` as ksqlDB's AST writes it: its columns qualified by their source."""
        def qualified(column: exp.Column) -> str:
            if self._lambda_variable(column.name) is not None:
                return column.name
            return join_rules.qualified_column(column, lambda c: self.scope.resolve(
                c.name, c.table or None, self.clause)[0])
        return operators.ksql_text(node, qualified)

    def column_text(self, node: exp.Column) -> str:
        if self._lambda_variable(node.name) is not None or len(self.scope.order) < 2:
            return node.name
        try:
            alias = self.scope.resolve(node.name, node.table or None, self.clause)[0]
        except QueryError:
            return ".".join(p for p in (node.table, node.name) if p)
        return f"{alias}_{node.name}"

    def value_type(self, expression: exp.Expr) -> ty.SqlType:
        """The type of a selected expression: ksqlDB's SelectionUtil gives none to NULL."""
        sql_type = self.type_of(expression)
        if isinstance(_unparenthesised(expression), exp.Null):
            raise QueryError("Can't infer a type of null. Please explicitly cast it to a required "
                             "type, e.g. CAST(null AS VARCHAR).")
        return sql_type

    def check_filter(self, condition: exp.Expr, clause: str) -> None:
        """ksqlDB's FilterTypeValidator: a WHERE or HAVING condition is a BOOLEAN."""
        self.clause = clause
        sql_type = self._operand(condition)
        if sql_type != ty.BOOLEAN:
            shown = "null" if sql_type is None else sql_type.sql()
            raise QueryError(f"Type error in {clause} expression: Should evaluate to boolean but "
                             f"is {self.text(condition)} ({shown}) instead.")

    def _searched_case(self, node: exp.Case) -> ty.SqlType:
        """``CASE WHEN ... THEN ... ELSE ... END`` by ksqlDB's ExpressionTypeManager: each WHEN
        is a BOOLEAN, the THEN and ELSE results that are not NULL have one type, and NULL
        results take it."""
        result: ty.SqlType | None = None
        for when in node.args.get("ifs") or []:
            condition = self.type_of(when.this)
            if condition.base != "BOOLEAN":
                raise QueryError(f"WHEN operand type should be boolean.\nType for "
                                 f"'{self.text(when.this)}' is {ty.backticked(condition)}")
            then = self._operand(when.args["true"])
            if then is None:
                continue
            if result is not None and then != result:
                raise QueryError(
                    "Invalid Case expression. Type for all 'THEN' clauses should be the same.\n"
                    f"THEN expression 'WHEN {self.text(when.this)} THEN "
                    f"{self.text(when.args['true'])}' has type: {ty.backticked(then)}.\n"
                    f"Previous THEN expression(s) type: {ty.backticked(result)}.")
            result = then
        default = node.args.get("default")
        otherwise = self._operand(default) if default is not None else None
        if result is not None and otherwise is not None and otherwise != result:
            raise QueryError("Invalid Case expression. Type for the default clause should be the "
                             f"same as for 'THEN' clauses.\nTHEN type: {ty.backticked(result)}."
                             f"\nDEFAULT type: {ty.backticked(otherwise)}.")
        common = result or otherwise
        if common is None:
            raise QueryError("Invalid Case expression. All case branches have NULL type")
        for branch in [*(w.args["true"] for w in node.args.get("ifs") or []), default]:
            if isinstance(branch, exp.Null):
                functions.annotate(branch, common)
        return common

    def _deref(self, node: exp.Expr) -> ty.SqlType:
        base = self.type_of(node.this)
        field = _deref_name(node)
        if isinstance(base, ty.StructType):
            found = base.field(field)
            if found is not None:
                return found
            raise QueryError(f"Could not find field '{field}' in '{node.this.sql()}'.")
        raise QueryError(f"Expected STRUCT type, got: {base.sql()}")

    def _literal(self, node: exp.Literal) -> ty.SqlType:
        if node.is_string:
            return ty.STRING
        text = str(node.this)
        if any(c in text for c in "eE"):
            return ty.DOUBLE
        if "." in text:
            return operators.decimal_of_value(Decimal(text))
        return _integer_literal_type(int(text))

    def _function(self, node: exp.Func) -> ty.SqlType:
        name = function_name(node)
        args = functions.arguments(node)
        if name in ("MAP", "STRUCT", "ARRAY"):
            return self._constructor(name, args)
        try:
            resolution = functions.resolve_call(name, [self._argument(a) for a in args])
        except FunctionError as error:
            raise QueryError(str(error)) from error
        init_args = resolution.signature.init_arguments(len(args))  # UdafUtil: literals
        for index in range(len(args) - init_args, len(args)) if init_args else ():
            if not _is_constant(args[index]):
                raise QueryError(f"Parameter {index + 1} passed to function {name} must be a "
                                 "literal constant, but was expression: "
                                 f"'{self.text(args[index])}'")
        for argument, param in zip(args, resolution.params, strict=False):
            if isinstance(argument, exp.Null):
                functions.annotate(argument, param)
        functions.annotate_params(node, resolution.params)
        return resolution.returns

    def _constructor(self, name: str, args: list[exp.Expr]) -> ty.SqlType:
        if name == "STRUCT":
            arg_types = [self.type_of(a) for a in args]
            fields = [(_struct_field_name(a, i), t) for i, (a, t)
                      in enumerate(zip(args, arg_types, strict=True))]
            for index, (field, field_type) in enumerate(fields):  # ksqlDB's SqlStruct.Builder
                first = next(((n, t) for n, t in fields[:index] if n == field), None)
                if first is not None:
                    raise QueryError(
                        "Duplicate field names found in STRUCT: "
                        f"'{ty.field_text(*first)}' and '{ty.field_text(field, field_type)}'")
            return ty.StructType(tuple(fields))
        if name == "ARRAY":
            if not args:
                raise QueryError("Array constructor cannot be empty. Please supply at least one "
                                 f"element ({_ISSUE_4239}).")
            element = self._user_list(args, "an array with all NULL elements",
                                      "cast a NULL value")
            return ty.ArrayType(element)
        if not args:
            raise QueryError("Map constructor cannot be empty. Please supply at least one key "
                             f"value pair ({_ISSUE_4239}).")
        keys, values = operators.map_entries(args)
        key = self._user_list(keys, "a map with all NULL keys", "cast a NULL key")
        value = self._user_list(values, "a map with all NULL values", "cast a NULL value")
        for argument in args:
            if isinstance(argument, exp.PropertyEQ):
                functions.annotate(argument, value)
        return ty.MapType(key, value)

    def _user_list(self, items: list[exp.Expr], all_null: str, workaround: str) -> ty.SqlType:
        """The common type of the elements of ARRAY[...] or the keys or values of MAP(...),
        by ksqlDB's coercion of a list (:func:`operators.list_type`); NULL literals take it."""
        for item in items:
            self.type_of(item)

        def typed(node: exp.Expr) -> ty.SqlType | None:  # typed just now: read, not re-typed
            if isinstance(node, exp.Null):
                return None
            return functions.ksql_type(node) or self.type_of(node)

        try:
            common = operators.list_type(items, typed)
        except operators.OperatorError as error:
            raise QueryError(str(error)) from error
        if common is None:
            raise QueryError(f"Cannot construct {all_null} ({_ISSUE_4239}). As a workaround, "
                             f"you may {workaround} to the desired type.")
        for item in items:
            if isinstance(item, exp.Null):
                functions.annotate(item, common)
        return common

    def _argument(self, node: exp.Expr) -> Argument:
        """One argument as function resolution sees it: a NULL literal, a lambda, a time unit
        written as a bare word, or a typed expression."""
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Lambda):
            return LambdaArgument(len(node.expressions),
                                  lambda inputs: self._lambda_body(node, inputs))
        if (isinstance(node, exp.Column) and not node.table and node.name.upper() in TIME_UNITS
                and self._lambda_variable(node.name) is None):
            try:
                return self.type_of(node)
            except QueryError:
                return UnitArgument(node.name.upper())
        return self.type_of(node)

    def _lambda_body(self, node: exp.Lambda, inputs: tuple[ty.SqlType, ...]) -> ty.SqlType:
        names = [str(p.name).upper() for p in node.expressions]
        self.lambda_scopes.append(dict(zip(names, inputs, strict=True)))
        try:
            return functions.annotate(node, self.type_of(node.this))
        finally:
            self.lambda_scopes.pop()

    def _lambda_variable(self, name: str) -> ty.SqlType | None:
        for scope in reversed(self.lambda_scopes):
            if name.upper() in scope:
                return scope[name.upper()]
        return None


_ISSUE_4239 = "see https://github.com/confluentinc/ksql/issues/4239"
_FILTERS = ("WHERE", "HAVING")


def _is_constant(node: exp.Expr) -> bool:
    """A literal as ksqlDB's grammar reads one (a number's minus sign included)."""
    if isinstance(node, exp.Neg):
        node = node.this
    return isinstance(node, exp.Literal | exp.Boolean | exp.Null)


def _integer_literal_type(value: int) -> ty.SqlType:
    """ksqlDB's integer literal: an INTEGER when it fits one, else a BIGINT."""
    return ty.INTEGER if -(2**31) <= value <= 2**31 - 1 else ty.BIGINT
_TIME_COLUMNS = frozenset({"ROWTIME", *WINDOW_BOUNDS})


def _struct_field_name(argument: exp.Expr, index: int) -> str:
    if isinstance(argument, exp.PropertyEQ):
        name = argument.this
        quoted = isinstance(name, exp.Identifier) and bool(name.args.get("quoted"))
        return str(name.name) if quoted else str(name.name).upper()
    if isinstance(argument, exp.Alias):
        return argument.alias
    return f"F{index}"


def check_cast_types(query: Query) -> None:
    """The types a new statement's CASTs name must be ones ksqlDB can build (DECIMAL bounds,
    distinct STRUCT field names; a quoted name keeps its case). Checked when a statement is
    validated, never when a stored query is compiled again."""
    for cast in query.select.find_all(exp.Cast):
        for data_type in cast.to.find_all(exp.DataType):
            kind = data_type.this
            if kind == exp.DataType.Type.DECIMAL:
                problem = ty.decimal_problem(*_decimal_params(data_type))
            elif kind == exp.DataType.Type.STRUCT:
                struct = _from_sqlglot(data_type, {})  # its field names as the CAST types them
                assert isinstance(struct, ty.StructType)
                problem = ty.struct_fields_problem(list(struct.fields))
            else:
                continue
            if problem:
                raise QueryError(f"Failed to prepare statement: {problem}")


def sql_type_of(data_type: exp.DataType, custom: Mapping[str, ty.SqlType]) -> ty.SqlType:
    """A CAST's target type (the query's sqlglot type) as a ksqlDB type."""
    return _from_sqlglot(data_type, dict(custom))


def _decimal_params(data_type: exp.DataType) -> tuple[int, int]:
    """A DECIMAL's precision and scale as written (10 and 0 when omitted)."""
    params = [int(p.this.this) for p in data_type.expressions if isinstance(p, exp.DataTypeParam)]
    precision, scale = [*params, 10, 0][:2] if params else (10, 0)
    return precision, scale


def _from_sqlglot(data_type: exp.DataType, custom: dict[str, ty.SqlType]) -> ty.SqlType:
    kind = data_type.this
    types = exp.DataType.Type
    simple = {
        types.BOOLEAN: ty.BOOLEAN, types.INT: ty.INTEGER, types.BIGINT: ty.BIGINT, types.DOUBLE: ty.DOUBLE,
        types.FLOAT: ty.DOUBLE, types.VARCHAR: ty.STRING, types.TEXT: ty.STRING, types.CHAR: ty.STRING,
        types.VARBINARY: ty.BYTES, types.BINARY: ty.BYTES, types.DATE: ty.DATE, types.TIME: ty.TIME,
        types.TIMESTAMP: ty.TIMESTAMP, types.SMALLINT: ty.INTEGER, types.TINYINT: ty.INTEGER,
    }
    if kind in simple:
        return simple[kind]
    nested = [e for e in data_type.expressions if isinstance(e, exp.DataType)]
    if kind == types.DECIMAL:
        return ty.DecimalType(*_decimal_params(data_type))
    if kind == types.ARRAY and nested:
        return ty.ArrayType(_from_sqlglot(nested[0], custom))
    if kind == types.MAP and len(nested) == 2:
        return ty.MapType(_from_sqlglot(nested[0], custom), _from_sqlglot(nested[1], custom))
    if kind == types.STRUCT:
        fields = []
        for field in data_type.expressions:
            if isinstance(field, exp.ColumnDef) and isinstance(field.args.get("kind"), exp.DataType):
                quoted = isinstance(field.this, exp.Identifier) and field.this.quoted
                name = field.name if quoted else field.name.upper()  # `f1` keeps its case
                fields.append((name, _from_sqlglot(field.args["kind"], custom)))
        return ty.StructType(tuple(fields))
    if kind == types.USERDEFINED:
        name = str(data_type.args.get("kind") or "").upper()
        if name in custom:
            return custom[name]
        if name in ty.PRIMITIVE_ALIASES:
            return ty.Primitive(ty.PRIMITIVE_ALIASES[name])
    text = data_type.sql().upper()
    if text in ty.PRIMITIVE_ALIASES:
        return ty.Primitive(ty.PRIMITIVE_ALIASES[text])
    if text in custom:
        return custom[text]
    raise QueryError(f"Unsupported type in CAST: {data_type.sql()}")
