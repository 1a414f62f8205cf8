"""What a query's expressions look like, as analysis and typing ask: a star, a NULL, a
parenthesised expression, a dereference's or a function's name, and a list of names in prose."""

from __future__ import annotations

from sqlglot import exp

from metastore.functions import library as functions


def is_null(expression: exp.Expr) -> bool:
    return isinstance(expression, exp.Null) or (
        isinstance(expression, exp.Column) and not expression.table and expression.name == "NULL")


def is_star(item: exp.Expr) -> bool:
    return isinstance(item, exp.Star) or (isinstance(item, exp.Column)
                                          and isinstance(item.this, exp.Star))


def deref_name(expression: exp.Expr) -> str:
    path = expression.expression
    text = path.name if isinstance(path, exp.Expr) else str(path)
    identifier = path.this if isinstance(path, exp.Column) else path
    quoted = isinstance(identifier, exp.Identifier) and bool(identifier.args.get("quoted"))
    name = text.strip("$.").split(".")[-1]
    return (name if quoted else name.upper()) or "KSQL_COL_0"  # a quoted field keeps its case


def unparenthesised(expression: exp.Expr) -> exp.Expr:
    while isinstance(expression, exp.Paren):
        expression = expression.this
    return expression


def listed(items: list[str], last: str) -> str:
    """ksqlDB's GrammaticalJoiner: ``A``, ``A and B``, ``A, B and C``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {last} {items[-1]}"


function_name = functions.function_name
