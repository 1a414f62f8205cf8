"""The sources a query reads, by alias, and the resolution of its column names against them, as
ksqlDB's AstSanitizer and ColumnReferenceValidator refuse an ambiguous or unknown name: the
:class:`Scope` that analysis and the expression typer share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sqlglot import exp

from metastore.catalog.exceptions import PREPARING, QueryError
from metastore.catalog.model import DataSource
from metastore.engine import joins as join_rules
from metastore.engine import pseudo_columns, references
from metastore.engine.expression_forms import is_null, is_star, listed
from metastore.engine.pseudo_columns import PSEUDO_COLUMNS, WINDOW_BOUNDS
from metastore.functions.registry import (
    TIME_UNITS,
)
from metastore.sql import positions
from metastore.sql import types as ty
from metastore.sql.statements import Query


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


NOTHING_DERIVED: Mapping[str, ty.SqlType] = MappingProxyType({})


@dataclass(frozen=True)
class Scope:
    """The sources a query reads, by alias, and their columns."""

    by_alias: Mapping[str, DataSource]
    order: tuple[str, ...]
    windowed: bool
    reads: tuple[SourceRead, ...]
    joins: tuple[JoinShape, ...]
    infos: tuple[join_rules.JoinInfo, ...] = ()
    """Each JOIN's criteria, oriented as ksqlDB's join tree (:mod:`metastore.engine.joins`)."""
    derived: Mapping[str, ty.SqlType] = field(default_factory=lambda: NOTHING_DERIVED)
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
                raise unknown_column(clause, f"{qualifier}.{name}", at)
            return qualifier, found
        self._check_unambiguous(name, at)
        matches = [(alias, t) for alias in self.order
                   if (t := self._column_of(self.by_alias[alias], name)) is not None]
        if not matches and name in self.derived:
            return "", self.derived[name]
        if len(matches) != 1:  # none, or the window bounds of a windowed join (ksqlDB #5931)
            raise unknown_column(clause, name, at)
        return matches[0]

    def column_text(self, column: exp.Column, clause: str) -> str:
        """``column`` as ksqlDB's messages print it once it rewrote the query's column
        references (ColumnReferenceRewriter): unqualified, and in a join named ``ALIAS_COLUMN``
        (as written when it names no source's column)."""
        if len(self.order) < 2:
            return column.name
        alias = self.alias_of(column, clause)
        if alias is None:
            return ".".join(p for p in (column.table, column.name) if p)
        return f"{alias}_{column.name}"

    def alias_of(self, column: exp.Column, clause: str = "SELECT") -> str | None:
        """The alias of the source whose column ``column`` is, or None for a name no source
        has (or several, unqualified)."""
        try:
            return self.resolve(column.name, column.table or None, clause)[0] or None
        except QueryError:
            return None

    def _check_unambiguous(self, name: str, at: positions.Position | None) -> None:
        """ksqlDB's AstSanitizer: an unqualified name is a column of one source at most (every
        source has the pseudo columns, a windowed source the window bounds)."""
        having = [alias for alias in self.order if self._has(self.by_alias[alias], name)]
        if len(having) > 1:
            raise QueryError(f"Column '{name}' is ambiguous. Could be "
                             f"{listed(sorted(f'{a}.{name}' for a in having), 'or')}.",
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
            "SELECT": [e for e in select.expressions if not is_star(e)],
            "JOIN ON": [j.args["on"] for j in select.args.get("joins") or [] if j.args.get("on")],
            "WHERE": [where.this] if where is not None else [],
            "GROUP BY": list(group.expressions) if group is not None else [],
            "PARTITION BY": list(query.partition_by),
            "HAVING": [having.this] if having is not None else [],
        }
        for expressions in clauses.values():
            for expression in expressions:
                for column in references.columns(expression):
                    if not column.table and not is_null(column):
                        self._check_unambiguous(column.name, positions.start(column))
        pseudo_columns.check_select_names(select.expressions, self.clashes, not transient)
        synthetic = len(self.order) > 1 and group is None
        for clause in ("WHERE", "GROUP BY", "PARTITION BY", "HAVING", "SELECT"):
            for expression in clauses[clause]:
                for column in references.columns(expression):
                    if is_null(column) or self._is_unit(column) or (
                            synthetic and clause == "SELECT" and not column.table
                            and column.name.startswith(SYNTHETIC_JOIN_KEY)):
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


def reads_scope(reads: tuple[SourceRead, ...], windowed: bool) -> Scope:
    """The scope of an analysed query's ``reads``, for naming its columns after its analysis
    (``windowed``: the query has a WINDOW)."""
    return Scope({read.alias: read.source for read in reads},
                 tuple(read.alias for read in reads), windowed, reads, ())


SYNTHETIC_JOIN_KEY = "ROWKEY"
"""How the key column a join synthesises is named (ksqlDB's ColumnNames)."""


def unknown_column(clause: str, text: str, at: positions.Position | None) -> QueryError:
    """ksqlDB's UnknownColumnException; PARTITION BY applies to the input, the Analyzer adds."""
    message = f"{clause} column '{text}' cannot be resolved."
    if clause == "PARTITION BY":
        message += (f" '{text}' must be a column in the source schema since PARTITION BY is "
                    "applied on the input.")
    return QueryError(message, location=at)
