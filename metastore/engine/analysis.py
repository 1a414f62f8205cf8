"""Derive what a SELECT produces: result kind, output columns with types, key columns, sources.

Over sqlglot's tree, its expressions typed by :class:`~metastore.engine.typer.ExpressionTyper`
and its names resolved in a :class:`~metastore.engine.scope.Scope`, following ksqlDB's rules
for naming (aliases, column
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
from dataclasses import dataclass, replace
from decimal import Decimal
from types import MappingProxyType

from sqlglot import exp

from metastore.catalog.exceptions import PREPARING, QueryError, SourceNotFoundError
from metastore.catalog.model import Column, DataSource, WindowInfo
from metastore.engine import (
    aggregation,
    alternatives,
    ddl_rules,
    lambda_rules,
    references,
    source_rules,
)
from metastore.engine import joins as join_rules
from metastore.engine.expression_forms import (
    deref_name,
    function_name,
    is_null,
    is_star,
    listed,
    unparenthesised,
)
from metastore.engine.overrides import NEW_QUERY_PLANNER
from metastore.engine.pseudo_columns import PSEUDO_COLUMNS, WINDOW_BOUNDS
from metastore.engine.scope import (
    JoinShape,
    Scope,
    SourceRead,
)
from metastore.engine.typer import ExpressionTyper
from metastore.functions import library as functions
from metastore.functions import operators
from metastore.sql import types as ty
from metastore.sql.statements import ColumnRole, PropertyValue, Query, SourceKind, WindowSpec


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
    lambda_rules.check_lambdas(_expressions(query), {
        c.name for source in scope.by_alias.values() for c in source.columns})
    if new_planner and not transient and any(
            read.source.kind is SourceKind.TABLE for read in scope.reads):
        raise QueryError("Input TABLES are not supported by the new planner")
    typer = ExpressionTyper(scope, dict(custom_types))
    group = select.args.get("group")
    group_by: list[exp.Expr] = list(group.expressions) if group is not None else []
    aggregate = bool(group_by) or any(
        _is_aggregate(e) for item in select.expressions for e in item.find_all(exp.Func))
    _check_clauses(query, scope, typer, group_by, transient)
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
    projection = tuple((p.name, p.expression) for p in projected)
    if transient:
        return Analysis(query=query, kind=kind,
                        columns=tuple(Column(p.name, p.type) for p in projected),
                        sources=scope.source_names, reads=scope.reads, joins=scope.joins,
                        window=None, aggregate=aggregate, projection=projection)
    if sink_properties is not None:
        ddl_rules.timestamp_column(sink_properties, [(p.name, p.type) for p in projected])
    if aggregate and not group_by:  # ksqlDB's AggregateNode.validateKeyPresent: no key to keep
        listed = ", ".join(aggregation.call_text(c, _rendering(scope, typer)) for c in calls)
        raise QueryError(f"CREATE TABLE AS SELECT statement does not support aggregate function "
                         f"[{listed}] without a GROUP BY clause.")
    columns = _keyed_columns(_KeyedResult(query, scope, typer, projected, group_by, joined, kind,
                                          new_keys), sink, new_planner)
    if joined is not None:
        join_rules.check_physical(joined, scope.reads, query.within_ms is not None,
                                  _join_resolver(scope), typer.type_of)
    return Analysis(query=query, kind=kind, columns=tuple(columns), sources=scope.source_names,
                    reads=scope.reads, joins=scope.joins,
                    window=_result_window(query, scope, aggregate), aggregate=aggregate,
                    projection=projection,
                    aggregate_step=_summary(select, projected, group_by, calls, scope, typer),
                    synthetic_key=_synthetic_key(joined),
                    foreign_key_join=joined is not None and any(joined.foreign))


def _check_clauses(query: Query, scope: Scope, typer: ExpressionTyper, group_by: list[exp.Expr],
                   transient: bool) -> None:
    """What ksqlDB checks before it plans the projection: distinct GROUP BY and PARTITION BY
    expressions, references, the sources' rules, the filter, the keys' expressions."""
    select = query.select
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
            if not is_null(expression):
                typer.type_of(expression)


@dataclass(frozen=True)
class _KeyedResult:
    """What a persistent query's key columns are worked out from."""

    query: Query
    scope: Scope
    typer: ExpressionTyper
    projected: list[_Projected]
    group_by: list[exp.Expr]
    joined: join_rules.JoinPlan | None
    kind: SourceKind
    new_keys: list[_Projected] | None


def _keyed_columns(result: _KeyedResult, sink: str, new_planner: bool) -> list[Column]:
    """A persistent query's columns with their roles: keyed by its GROUP BY, its PARTITION BY,
    its join, or its first source's key."""
    query, scope, typer, joined = result.query, result.scope, result.typer, result.joined
    if result.group_by:
        key_exprs, typer.clause, key_kind = list(result.group_by), "GROUP BY", \
            "grouping expression"
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
    select = query.select
    if joined is not None and not key_exprs:  # the join's key (ksqlDB's JoinNode)
        return join_rules.result_columns(result.projected, select.expressions, joined,
                                         result.kind, f"`{sink}`", _join_resolver(scope))
    return _assign_keys(result.projected, key_exprs, result.kind, query, f"`{sink}`", key_kind,
                        result.new_keys, new_planner=new_planner and key_kind == "key column",
                        # ksqlDB writes PARTITION BY as rewritten: columns qualified
                        shown=typer.qualified_text if query.partition_by and not result.group_by
                        else _shown)


def _result_window(query: Query, scope: Scope, aggregate: bool) -> WindowInfo | None:
    """A windowed aggregation's window; a join of windowed sources is keyed by the left one's
    windows."""
    if query.window is not None and aggregate:
        return WindowInfo(query.window.kind, query.window.size_ms)
    if not aggregate:
        return scope.by_alias[scope.order[0]].window
    return None


def _summary(select: exp.Select, projected: list[_Projected], group_by: list[exp.Expr],
             calls: list[exp.Expr], scope: Scope, typer: ExpressionTyper
             ) -> aggregation.Summary | None:
    """ksqlDB's aggregation step, of a query that calls aggregate functions."""
    if not calls:
        return None
    where, having = select.args.get("where"), select.args.get("having")
    return aggregation.summarise(
        [p.expression for p in projected], where.this if where is not None else None,
        group_by, having.this if having is not None else None, calls, _rendering(scope, typer))


def _expressions(query: Query) -> list[exp.Expr]:
    """The query's expressions: the SELECT's, the WHERE, the HAVING, the join criteria, the
    GROUP BY's and the PARTITION BY's."""
    select = query.select
    joins = select.args.get("joins") or []
    return [*select.expressions, *(select.args[c].this for c in ("where", "having")
                                   if select.args.get(c) is not None),
            *(j.args["on"] for j in joins if j.args.get("on") is not None),
            *(select.args["group"].expressions if select.args.get("group") else []),
            *query.partition_by]


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


def check_reads(query: Query, sources: Mapping[str, DataSource]) -> None:
    """What ksqlDB checks of the sources a query reads before anything else of the statement
    it is in: its qualifiers name them, and they exist (not yet its join criteria)."""
    _scope(query, sources, criteria=False)


def _scope(query: Query, sources: Mapping[str, DataSource], criteria: bool = True) -> Scope:
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
        _expressions(query),
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
    scope = Scope(by_alias, tuple(r.alias for r in reads), query.window is not None,
                   tuple(reads), shapes)
    if not joins or not criteria:
        return scope
    resolve = _join_resolver(scope)
    infos = join_rules.criteria(joins, scope.reads, resolve,
                            lambda e: join_rules.qualified_text(e, resolve))
    return replace(scope, infos=infos)


def _join_resolver(scope: Scope) -> join_rules.Resolve:
    def resolve(column: exp.Column) -> str:
        return scope.resolve(column.name, column.table or None, "JOIN ON", column)[0]
    return resolve


def _plan_joins(select: exp.Select, scope: Scope, typer: ExpressionTyper) -> join_rules.JoinPlan | None:
    """ksqlDB's LogicalPlanner.buildJoin (:func:`metastore.engine.joins.plan`); a synthetic
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


def _with_join_key(scope: Scope, joined: join_rules.JoinPlan | None) -> Scope:
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
            return self._next_name(_numbered(deref_name(expression))[0])
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
    if not any(is_null(expression) for expression in partition_by):
        return False
    if len(partition_by) > 1:
        raise QueryError("Cannot PARTITION BY multiple columns including NULL")
    return True


def _partition_keys(partition_by: tuple[exp.Expr, ...], scope: Scope,
                    typer: ExpressionTyper) -> list[_Projected]:
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
        if is_null(expression):
            continue
        sql_type = typer.type_of(expression)
        if isinstance(expression, exp.Column):
            alias = scope.resolve(expression.name, expression.table or None, "PARTITION BY")[0]
            name = f"{alias}_{expression.name}" if multi else expression.name
        else:
            name = aliases.alias_for(expression)
        keys.append(_Projected(name, sql_type, expression))
    return keys


def _source_columns(scope: Scope, alias: str, repartitioned: bool,
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


def _star(qualifier: str | None, scope: Scope, new_keys: list[_Projected] | None,
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


def _struct_fields(expression: exp.Expr, typer: ExpressionTyper) -> list[_Projected]:
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


def _project(select: exp.Select, scope: Scope, typer: ExpressionTyper,
             new_keys: list[_Projected] | None = None,
             transient: bool = False) -> list[_Projected]:
    """Each output column in SELECT order, ``*`` and ``s->*`` expanded; ``new_keys`` are the key
    columns of a PARTITION BY, which ``*`` selects; a ``transient`` query's ``*`` selects a
    windowed source's window bounds."""
    aliases = _ColumnAliases(c.name for read in scope.reads for c in read.source.columns)
    multi = len(scope.order) > 1
    out: list[_Projected] = []
    for item in select.expressions:
        if is_star(item):
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


def _check_grouping(projected: list[_Projected], group_by: list[exp.Expr], select: exp.Select,
                    scope: Scope, typer: ExpressionTyper, windowed: bool) -> list[exp.Expr]:
    """The rules of a query that aggregates (:mod:`metastore.engine.aggregation`, ksqlDB's
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


def _rendering(scope: Scope, typer: ExpressionTyper) -> aggregation.Rendering:
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
        raise QueryError(f"The aggregation function{plural} {listed(refused, 'and')} cannot be "
                         "applied to a table source, only to a stream source.")


def _is_column(node: exp.Column, scope: Scope) -> bool:
    """Whether ``node`` names a column (not a lambda's variable or a time unit)."""
    try:
        scope.resolve(node.name, node.table or None, "SELECT")
    except QueryError:
        return False
    return True


def _same(a: exp.Expr, b: exp.Expr) -> bool:
    a, b = unparenthesised(a), unparenthesised(b)
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
            node.replace(exp.Var(this=f"{node.this.sql()}->{deref_name(node)}"))
        else:
            parenthesised = exp.Paren()
            node.replace(parenthesised)
            parenthesised.set("this", node)
    return str(holder.this.sql())


def _missing_keys(sink: str, key_kind: str, shown: list[str]) -> QueryError:
    """ksqlDB's PlanNode.throwKeysNotIncludedError, every key required (a join's is any of its
    equivalent expressions: :func:`metastore.engine.joins.missing_key`)."""
    keys = "Keys" if len(shown) > 1 else "Key"
    kinds = key_kind if len(shown) == 1 else f"{key_kind}s"
    return QueryError(f"{keys} missing from projection (ie, SELECT). \nThe query used to "
                      f"build {sink} must include the {kinds} {listed(shown, 'and')} in its "
                      f"projection (eg, SELECT {', '.join(shown)}...).")


def _key_more_than_once(key_name: str, aliases: list[str], grouped: bool) -> QueryError:
    """ksqlDB's AggregateNode / FinalProjectNode: a key column is selected once."""
    if grouped:
        text = ("The projection contains a key column more than once: "
                f"{listed([f'`{a}`' for a in aliases], 'and')}.")
    else:
        text = (f"The projection contains a key column (`{key_name}`) more than once, aliased "
                f"as: {listed(sorted(aliases), 'and')}.")
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
    keys = [key for key in key_exprs if not is_null(key)]
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
