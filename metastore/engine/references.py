"""The column references of a statement, and ksqlDB's check of their qualifiers.

ksqlDB's AST builder refuses a qualified reference (``X.COL``, ``X.*``) whose qualifier names
no source of the statement, by name or alias (``AstBuilder.throwOnUnknownNameOrAlias``), while it
prepares the statement: before any source is looked up, and worded as a failure to prepare it.
A lambda's variables are not column references.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator

from sqlglot import exp

from metastore.catalog.exceptions import QueryError


def columns(expression: exp.Expr, bound: frozenset[str] = frozenset()) -> Iterator[exp.Column]:
    """The column references in ``expression``, in the order written; a name a lambda binds
    (``bound``, or a parameter of an enclosing lambda) is its variable, not a column."""
    if isinstance(expression, exp.Lambda):
        names = bound | {str(p.name).upper() for p in expression.expressions}
        yield from columns(expression.this, names)
        return
    if isinstance(expression, exp.Column):
        if expression.table or str(expression.name).upper() not in bound:
            yield expression
        return
    if isinstance(expression, exp.JSONExtract | exp.Dot):  # s->f: f names a field of s
        yield from columns(expression.this, bound)
        return
    for child in expression.iter_expressions():
        yield from columns(child, bound)


def check_qualifiers(expressions: Iterable[exp.Expr], known: Collection[str]) -> None:
    """Each qualified reference names one of the ``known`` sources or aliases."""
    for expression in expressions:
        for column in columns(expression):
            if column.table and column.table not in known:
                raise QueryError(f"Failed to prepare statement: '{column.table}' is not a valid "
                                 "stream/table name or alias.")
