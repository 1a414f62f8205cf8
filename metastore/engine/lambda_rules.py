"""ksqlDB's rules of a query's lambdas' parameters (its ``AstSanitizer``), checked once the
query's sources are known and before its expressions are typed: a parameter may not be named as
a column of a source the query reads (``Lambda function argument can't be a column name: X``),
nor as a parameter of a lambda whose body holds it (``Reusing lambda arguments in nested
lambda is not allowed``); lambdas side by side, arguments of one call, may share names.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from sqlglot import exp

from metastore.catalog.exceptions import QueryError


def check_lambdas(expressions: Iterable[exp.Expr], column_names: Collection[str]) -> None:
    """Each lambda in ``expressions`` (in the order written) names its parameters apart from
    ``column_names`` (the sources' key and value columns) and from its enclosing lambdas'. A
    quoted parameter is refused as ksqlDB refuses it, and also beside a column of its name in
    another case, which the translation, binding names in any case, would take for it."""
    folded = {name.upper() for name in column_names}
    for expression in expressions:
        _check(expression, folded, frozenset())


def _check(node: exp.Expr, column_names: Collection[str], enclosing: frozenset[str]) -> None:
    """``column_names``: upper-cased."""
    if isinstance(node, exp.Lambda):
        names = [_name(p) for p in node.expressions]
        for name in names:  # as ksqlDB's sanitizer walks the parameters, first to last
            if name.upper() in column_names:
                raise QueryError(f"Lambda function argument can't be a column name: {name}")
        if enclosing.intersection(names):
            raise QueryError("Reusing lambda arguments in nested lambda is not allowed")
        _check(node.this, column_names, enclosing.union(names))
        return
    for child in node.iter_expressions():
        _check(child, column_names, enclosing)


def _name(parameter: exp.Expr) -> str:
    """A parameter's name as ksqlDB's parser reads it: upper-cased unless quoted."""
    quoted = isinstance(parameter, exp.Identifier) and bool(parameter.args.get("quoted"))
    return str(parameter.name) if quoted else str(parameter.name).upper()
