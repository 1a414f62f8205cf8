"""ksqlDB's system columns (``SystemColumns``) and where a statement may name them.

The pseudo columns ROWTIME, ROWPARTITION and ROWOFFSET exist on every source, the window bounds
WINDOWSTART and WINDOWEND on windowed sources and after a windowed GROUP BY. None can be a
result column's name: a SELECT item named like one (its alias, or the name ksqlDB derives for
it) is refused (``Analyzer.checkForReservedToken``), and INSERT ... VALUES may set ROWTIME but
not ROWPARTITION nor ROWOFFSET (``SystemColumns.isDisallowedForInsertValues``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from sqlglot import exp

from metastore.catalog.exceptions import QueryError, SchemaError
from metastore.sql import types as ty

PSEUDO_COLUMNS: dict[str, ty.SqlType] = {
    "ROWTIME": ty.BIGINT, "ROWPARTITION": ty.INTEGER, "ROWOFFSET": ty.BIGINT,
}
WINDOW_BOUNDS: dict[str, ty.SqlType] = {"WINDOWSTART": ty.BIGINT, "WINDOWEND": ty.BIGINT}
SYSTEM_COLUMNS = frozenset({*PSEUDO_COLUMNS, *WINDOW_BOUNDS})
NOT_INSERTABLE = ("ROWPARTITION", "ROWOFFSET")
"""The pseudo columns INSERT ... VALUES may not set (ROWTIME sets the record's timestamp)."""


def check_select_names(items: Sequence[exp.Expr], clashes: Callable[[str], bool],
                       persistent: bool) -> None:
    """ksqlDB's Analyzer.validateSelect, for each SELECT item in order: an alias naming a system
    column is refused, and so is a system column selected under its own name by a persistent
    query (a transient query may show it). ``clashes(name)``: whether a qualified column of
    that name is named ``ALIAS_NAME`` (in a join, a pseudo column or one two sources have)."""
    for item in items:
        if _is_star(item):
            continue
        expression = item.this if isinstance(item, exp.Alias) else item
        name = _select_name(item, expression, clashes)
        if name is None or name.upper() not in SYSTEM_COLUMNS:
            continue
        reserved = name.upper()
        if not (isinstance(expression, exp.Column) and expression.name.upper() == reserved):
            raise QueryError(f"`{reserved}` is a reserved column name. You cannot use it as an "
                             "alias for a column.")
        if persistent:
            raise QueryError(f"Reserved column name in select: `{reserved}`. Please remove or "
                             "alias the column.")


def check_source_names(names: Iterable[str]) -> None:
    """ksqlDB's CreateSourceFactory.buildSchema: no column declared (in the order written) is
    named like a system column (names are case-sensitive: a quoted ``"rowtime"`` is not one)."""
    for name in names:
        if name in SYSTEM_COLUMNS:
            raise SchemaError(f"'{name}' is a reserved column name. You cannot use it as a name "
                              "for a column.", name)


def _select_name(item: exp.Expr, expression: exp.Expr,
                 clashes: Callable[[str], bool]) -> str | None:
    """The name ksqlDB's AstSanitizer gives a SELECT item, as far as it can be a system
    column's: its alias, a column's name (``ALIAS_NAME`` when it clashes), a struct field's
    name; None for the generated ``KSQL_COL_n``."""
    if isinstance(item, exp.Alias):
        return str(item.alias)
    if isinstance(expression, exp.Column):
        name = str(expression.name)
        return f"{expression.table}_{name}" if expression.table and clashes(name) else name
    if isinstance(expression, exp.Dot | exp.JSONExtract):
        path = expression.expression
        text = path.name if isinstance(path, exp.Expr) else str(path)
        return text.strip("$.").split(".")[-1]
    return None


def _is_star(item: exp.Expr) -> bool:
    return isinstance(item, exp.Star) or (isinstance(item, exp.Column)
                                          and isinstance(item.this, exp.Star))
