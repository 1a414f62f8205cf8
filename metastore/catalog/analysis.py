"""Derive what a SELECT produces: result kind, output columns with types, key columns, sources.

A small type checker over sqlglot's tree, following ksqlDB's rules for naming (aliases, column
names, ``KSQL_COL_n``), keys (source key, PARTITION BY, GROUP BY, join key) and result kinds
(aggregations and tables produce tables; anything reading a stream produces a stream).

:func:`analyse` is the one place that works out what a query reads: its :class:`Analysis`
carries the sources (with their aliases and table nodes), the joins' shape, whether it
aggregates and its windowing, so validation, the runtime check, the planner and pull queries
all work from one analysis and none walks the tree for sources again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from metastore.catalog.exceptions import QueryError, SourceNotFoundError
from metastore.catalog.model import Column, DataSource, WindowInfo
from metastore.functions import library as functions
from metastore.functions.registry import (
    TIME_UNITS,
    Argument,
    FunctionError,
    LambdaArgument,
    UnitArgument,
)
from metastore.sql import types as ty
from metastore.sql.statements import ColumnRole, Query, SourceKind, WindowSpec

PSEUDO_COLUMNS: dict[str, ty.SqlType] = {
    "ROWTIME": ty.BIGINT, "ROWPARTITION": ty.INTEGER, "ROWOFFSET": ty.BIGINT,
}
WINDOW_BOUNDS: dict[str, ty.SqlType] = {"WINDOWSTART": ty.BIGINT, "WINDOWEND": ty.BIGINT}

_NUMERIC_RANK = {"INTEGER": 1, "BIGINT": 2, "DECIMAL": 3, "DOUBLE": 4}


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
    """The result's windowing (a windowed aggregation's, or its one source's)."""
    aggregate: bool
    projection: tuple[tuple[str, exp.Expr], ...] = ()
    """Each output column's name and the expression computing it, in SELECT order (``*``
    expanded); what a runtime compiles the projection from."""

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


@dataclass(frozen=True)
class _Scope:
    """The sources a query reads, by alias, and their columns."""

    by_alias: Mapping[str, DataSource]
    order: tuple[str, ...]
    windowed: bool
    reads: tuple[SourceRead, ...]
    joins: tuple[JoinShape, ...]

    @property
    def source_names(self) -> tuple[str, ...]:
        """The sources the aliases name, each once (an alias given twice names the last)."""
        return tuple(dict.fromkeys(s.name for s in self.by_alias.values()))

    def resolve(self, name: str, qualifier: str | None, clause: str) -> tuple[str, ty.SqlType]:
        if qualifier:
            source = self.by_alias.get(qualifier)
            if source is None:
                raise QueryError(f"'{qualifier}' is not a valid stream/table name or alias.")
            found = self._column_of(source, name)
            if found is None:
                raise QueryError(f"{clause} column '{qualifier}.{name}' cannot be resolved.")
            return qualifier, found
        matches = [(alias, t) for alias in self.order
                   if (t := self._column_of(self.by_alias[alias], name)) is not None]
        if not matches:
            raise QueryError(f"{clause} column '{name}' cannot be resolved.")
        if len(matches) > 1 and name not in PSEUDO_COLUMNS:
            raise QueryError(f"Column '{name}' is ambiguous. Could be any of: "
                             + ", ".join(f"{alias}.{name}" for alias, _ in matches))
        return matches[0]

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
            transient: bool = False) -> Analysis:
    """What ``query`` produces; a ``transient`` query (a pull query) has no key to keep."""
    select = query.select
    assert isinstance(select, exp.Select)
    scope = _scope(select, sources, query.window is not None)
    typer = _Typer(scope, dict(custom_types))
    group = select.args.get("group")
    group_by: list[exp.Expr] = list(group.expressions) if group is not None else []
    aggregate = bool(group_by) or any(
        _is_aggregate(e) for item in select.expressions for e in item.find_all(exp.Func))
    where = select.args.get("where")
    if where is not None:
        typer.clause = "WHERE"
        typer.type_of(where.this)
    typer.clause = "SELECT"
    projected = _project(select, scope, typer)
    kinds = {source.kind for source in scope.by_alias.values()}
    kind = SourceKind.TABLE if aggregate or kinds == {SourceKind.TABLE} else SourceKind.STREAM

    if transient:
        return Analysis(query=query, kind=kind,
                        columns=tuple(Column(p.name, p.type) for p in projected),
                        sources=scope.source_names, reads=scope.reads, joins=scope.joins,
                        window=None, aggregate=aggregate)
    if group_by:
        key_exprs, typer.clause, key_kind = list(group_by), "GROUP BY", "grouping expression"
    elif query.partition_by:
        key_exprs, typer.clause = list(query.partition_by), "PARTITION BY"
        key_kind = "partitioning expression"
    elif select.args.get("joins") and (fk_key := _foreign_key_join_key(select, scope)):
        key_exprs, typer.clause, key_kind = fk_key, "JOIN ON", "key column"
    elif select.args.get("joins"):
        key_exprs, typer.clause, key_kind = _join_keys(select, scope), "JOIN ON", "join expression"
    else:
        first = scope.by_alias[scope.order[0]]
        key_exprs = [exp.column(c.name, table=scope.order[0], quoted=True)
                     for c in first.key_columns]
        key_kind = "key column"
    columns = _assign_keys(projected, key_exprs, kind, typer, query, f"`{sink}`", key_kind)
    window = None
    if query.window is not None and aggregate:
        window = WindowInfo(query.window.kind, query.window.size_ms)
    elif len(scope.order) == 1 and not aggregate:
        window = scope.by_alias[scope.order[0]].window
    return Analysis(query=query, kind=kind, columns=tuple(columns), sources=scope.source_names,
                    reads=scope.reads, joins=scope.joins, window=window, aggregate=aggregate,
                    projection=tuple((p.name, p.expression) for p in projected))


def _scope(select: exp.Select, sources: Mapping[str, DataSource], windowed: bool) -> _Scope:
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        raise QueryError("A query must read FROM a stream or table.")
    if not isinstance(from_.this, exp.Table):
        raise QueryError("Sub-queries are not supported.")
    joins = list(select.args.get("joins") or [])
    for join in joins:
        if not isinstance(join.this, exp.Table):
            raise QueryError("Sub-queries are not supported.")
    by_alias: dict[str, DataSource] = {}
    reads: list[SourceRead] = []
    for table in [from_.this, *(join.this for join in joins)]:
        name = table.name
        source = sources.get(name)
        if source is None:
            raise SourceNotFoundError(f"{name} does not exist.", name)
        alias = table.alias_or_name
        by_alias[alias] = source
        reads.append(SourceRead(alias, source, table))
    shapes = tuple(JoinShape((join.side or "").upper(), (join.kind or "").upper(), read)
                   for join, read in zip(joins, reads[1:], strict=True))
    return _Scope(by_alias, tuple(r.alias for r in reads), windowed, tuple(reads), shapes)


@dataclass
class _Projected:
    name: str
    type: ty.SqlType
    expression: exp.Expr


def _project(select: exp.Select, scope: _Scope, typer: _Typer) -> list[_Projected]:
    out: list[_Projected] = []
    generated = 0
    seen: set[str] = set()
    for item in select.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            qualifier = item.table if isinstance(item, exp.Column) else None
            aliases = [qualifier] if qualifier else list(scope.order)
            multi = len(scope.order) > 1
            for alias in aliases:
                source = scope.by_alias.get(alias)
                if source is None:
                    raise QueryError(f"'{alias}' is not a valid stream/table name or alias.")
                for column in source.columns:
                    if column.role in (ColumnRole.HEADERS, ColumnRole.HEADER):
                        continue
                    name = f"{alias}_{column.name}" if multi else column.name
                    out.append(_Projected(name, column.type,
                                          exp.column(column.name, table=alias, quoted=True)))
            continue
        expression = item.this if isinstance(item, exp.Alias) else item
        sql_type = typer.type_of(expression)
        if isinstance(item, exp.Alias):
            name = item.alias
        elif isinstance(expression, exp.Column):
            name = expression.name
            if expression.table and scope.is_ambiguous(name):
                name = f"{expression.table}_{expression.name}"
        elif isinstance(expression, exp.Dot | exp.JSONExtract):
            name = _deref_name(expression)
        else:
            name = f"KSQL_COL_{generated}"
            generated += 1
        if name in seen:
            raise QueryError(f"Duplicate value columns found in schema: `{name}` {sql_type.sql()}")
        seen.add(name)
        out.append(_Projected(name, sql_type, expression))
    return out


def _deref_name(expression: exp.Expr) -> str:
    path = expression.expression
    text = path.name if isinstance(path, exp.Expr) else str(path)
    return text.strip("$.").split(".")[-1].upper() or "KSQL_COL_0"


def _join_keys(select: exp.Select, scope: _Scope) -> list[exp.Expr]:
    join = (select.args.get("joins") or [None])[0]
    condition = join.args.get("on") if join is not None else None
    if not isinstance(condition, exp.EQ):
        raise QueryError("Joins must be on an equality condition: ON a.x = b.y.")
    return [condition.this, condition.expression]


def _foreign_key_join_key(select: exp.Select, scope: _Scope) -> list[exp.Expr] | None:
    """A table-table join on a left value column is a foreign-key join: the left key stays."""
    left_alias = scope.order[0]
    left = scope.by_alias[left_alias]
    if left.kind is not SourceKind.TABLE or len(scope.order) != 2 or (
            scope.by_alias[scope.order[1]].kind is not SourceKind.TABLE):
        return None
    condition = (select.args.get("joins") or [None])[0].args.get("on")
    if not isinstance(condition, exp.EQ):
        return None
    left_side = [side for side in (condition.this, condition.expression)
                 if not (isinstance(side, exp.Column) and side.table
                         and side.table != left_alias)
                 and any(isinstance(c, exp.Column) and left.column(c.name) is not None
                         and (not c.table or c.table == left_alias)
                         for c in side.find_all(exp.Column))]
    keys = {c.name for c in left.key_columns}
    if not left_side or (isinstance(left_side[0], exp.Column) and left_side[0].name in keys):
        return None
    return [exp.column(c.name, table=left_alias) for c in left.key_columns]


def _same(a: exp.Expr, b: exp.Expr) -> bool:
    if isinstance(a, exp.Column) and isinstance(b, exp.Column):
        return a.name == b.name and (not a.table or not b.table or a.table == b.table)
    return a.sql() == b.sql()


def _missing_key(sink: str, key_kind: str, shown: str, join: bool) -> QueryError:
    link = " See https://cnfl.io/2LV7ouS." if join else " "
    return QueryError(f"Key missing from projection (ie, SELECT).{link}\nThe query used to build "
                      f"{sink} must include the {key_kind} {shown} in its projection "
                      f"(eg, SELECT {shown}...).")


def _assign_keys(projected: list[_Projected], key_exprs: list[exp.Expr], kind: SourceKind,
                 typer: _Typer, query: Query, sink: str, key_kind: str) -> list[Column]:
    role = ColumnRole.PRIMARY_KEY if kind is SourceKind.TABLE else ColumnRole.KEY
    key_indexes: list[int] = []
    is_join = (len(key_exprs) == 2 and bool(query.select.args.get("joins"))
               and not query.select.args.get("group") and not query.partition_by)
    if is_join:
        candidates = key_exprs
        index = next((i for i, p in enumerate(projected)
                      if any(_same(p.expression, k) for k in candidates)), None)
        if index is None:
            raise _missing_key(sink, key_kind, candidates[0].sql(identify=False), join=True)
        key_indexes.append(index)
    else:
        for key in key_exprs:
            if isinstance(key, exp.Null) or (isinstance(key, exp.Column) and key.name == "NULL"):
                continue
            index = next((i for i, p in enumerate(projected) if _same(p.expression, key)), None)
            if index is None:
                shown = key.name if isinstance(key, exp.Column) else key.sql()
                raise _missing_key(sink, key_kind, shown, join=False)
            typer.type_of(key)
            key_indexes.append(index)
    keys = [Column(projected[i].name, projected[i].type, role) for i in key_indexes]
    values = [Column(p.name, p.type) for i, p in enumerate(projected) if i not in key_indexes]
    return keys + values


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
            return self.scope.resolve(node.name, node.table or None, self.clause)[1]
        if isinstance(node, exp.Literal):
            return self._literal(node)
        if isinstance(node, exp.Boolean):
            return ty.BOOLEAN
        if isinstance(node, exp.Null):
            return ty.STRING
        if isinstance(node, exp.Neg):
            return self.type_of(node.this)
        if isinstance(node, exp.Not | exp.And | exp.Or | exp.Predicate | exp.Is | exp.In |
                      exp.Between | exp.Like | exp.ILike):
            for operand in node.iter_expressions():
                self.type_of(operand)
            return ty.BOOLEAN
        if isinstance(node, exp.DPipe):
            return ty.STRING
        if isinstance(node, exp.Binary) and isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div | exp.Mod):
            left, right = self.type_of(node.left), self.type_of(node.right)
            if isinstance(node, exp.Add) and ty.STRING in (left, right):
                return ty.STRING
            return _promote(left, right)
        if isinstance(node, exp.Cast):
            return _from_sqlglot(node.to, self.custom)
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
            elements = [self.type_of(e) for e in node.expressions]
            return ty.ArrayType(elements[0] if elements else ty.STRING)
        if isinstance(node, exp.PropertyEQ | exp.Alias):
            return self.type_of(node.expression if isinstance(node, exp.PropertyEQ) else node.this)
        if isinstance(node, exp.Func):
            return self._function(node)
        raise QueryError(f"Unsupported expression: {node.sql()}")

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
            digits = text.lstrip("-").replace(".", "")
            scale = len(text.split(".")[1])
            return ty.DecimalType(max(len(digits.lstrip("0")) or 1, scale), scale)
        return ty.INTEGER if abs(int(text)) <= 2**31 - 1 else ty.BIGINT

    def _function(self, node: exp.Func) -> ty.SqlType:
        name = function_name(node)
        args = functions.arguments(node)
        if name in ("MAP", "STRUCT", "ARRAY"):
            return self._constructor(name, args)
        try:
            resolution = functions.resolve_call(name, [self._argument(a) for a in args])
        except FunctionError as error:
            raise QueryError(str(error)) from error
        for argument, param in zip(args, resolution.params, strict=False):
            if isinstance(argument, exp.Null):
                functions.annotate(argument, param)
        return resolution.returns

    def _constructor(self, name: str, args: list[exp.Expr]) -> ty.SqlType:
        arg_types = [self.type_of(a) for a in args]
        if name == "ARRAY":
            return ty.ArrayType(arg_types[0] if arg_types else ty.STRING)
        if name == "MAP":
            values = arg_types[1::2] if not args or not isinstance(args[0], exp.PropertyEQ) \
                else arg_types
            return ty.MapType(ty.STRING, values[0] if values else ty.STRING)
        return ty.StructType(tuple(
            (_struct_field_name(a, i), t) for i, (a, t) in enumerate(zip(args, arg_types, strict=True))))

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


def _struct_field_name(argument: exp.Expr, index: int) -> str:
    if isinstance(argument, exp.PropertyEQ):
        return str(argument.this.name).upper()
    if isinstance(argument, exp.Alias):
        return argument.alias
    return f"F{index}"


def _promote(left: ty.SqlType, right: ty.SqlType) -> ty.SqlType:
    left_rank = _NUMERIC_RANK.get(left.base)
    right_rank = _NUMERIC_RANK.get(right.base)
    if left_rank is None or right_rank is None:
        raise QueryError(f"Error processing expression: unsupported operand types {left.sql()} "
                         f"and {right.sql()}")
    if isinstance(left, ty.DecimalType) and isinstance(right, ty.DecimalType):
        scale = max(left.scale, right.scale)
        integral = max(left.precision - left.scale, right.precision - right.scale) + 1
        return ty.DecimalType(min(integral + scale, 38), scale)
    return left if left_rank >= right_rank else right


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
        params = [int(p.this.this) for p in data_type.expressions if isinstance(p, exp.DataTypeParam)]
        return ty.DecimalType(*[*params, 10, 0][:2]) if params else ty.DecimalType(10, 0)
    if kind == types.ARRAY and nested:
        return ty.ArrayType(_from_sqlglot(nested[0], custom))
    if kind == types.MAP and len(nested) == 2:
        return ty.MapType(_from_sqlglot(nested[0], custom), _from_sqlglot(nested[1], custom))
    if kind == types.STRUCT:
        fields = []
        for field in data_type.expressions:
            if isinstance(field, exp.ColumnDef) and isinstance(field.args.get("kind"), exp.DataType):
                fields.append((field.name.upper(), _from_sqlglot(field.args["kind"], custom)))
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
