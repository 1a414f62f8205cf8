"""The columns of ksqlDB's ``Aggregate.Prepare`` step, which name an aggregate call's argument in
the messages of its record processing errors.

Before it groups a row, ksqlDB's AggregateNode selects every column the query reads (in the
order its analysis meets them: the SELECT's references, the WHERE's, the GROUP BY's, then the
HAVING's, each once; ``COUNT(*)`` reads ROWTIME), then each aggregate call's arguments that are
not among them (each text once, the SELECT's calls before the HAVING's), named
``KSQL_INTERNAL_COL_<index>``. An argument that throws is logged by ``Aggregate.Prepare`` as
``Error computing expression <argument> for column KSQL_INTERNAL_COL_<i> with index <i>``, for
every row the WHERE keeps, whatever its group.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from sqlglot import exp

from metastore.functions import failures
from metastore.functions.library import is_aggregate
from metastore.planner.record_checks import ColumnText, expression_text

INTERNAL_PREFIX = "KSQL_INTERNAL_COL_"
_WINDOW_BOUNDS = frozenset({"WINDOWSTART", "WINDOWEND"})
_DEFAULT_ARGUMENT = exp.column("ROWTIME")
"""What ksqlDB gives an aggregate call without arguments (``COUNT(*)``)."""


def mark(calls_in: Sequence[exp.Expr], projection: Sequence[exp.Expr], where: exp.Expr | None,
         group_by: Sequence[exp.Expr], having: exp.Expr | None,
         column_text: ColumnText | None = None) -> None:
    """Mark each argument of an aggregate call in ``calls_in`` (the trees the planner is about
    to translate) with its Prepare column (:data:`~metastore.functions.failures.PREPARED`), as
    ksqlDB names it for a query of that SELECT ``projection``, WHERE, GROUP BY and HAVING
    (``column_text``: how it names a column, ``ALIAS_COLUMN`` after a join)."""
    columns = _columns(required_columns(projection, where, group_by, having, column_text),
                       [*projection, *([having] if having is not None else [])], column_text)
    for tree in calls_in:
        for call in _aggregate_calls(tree):
            for argument in call.expressions:
                text = expression_text(argument, column_text)
                found = columns.get(text)
                if found is not None and not isinstance(argument, (exp.Column, exp.Star)):
                    argument.meta[failures.PREPARED] = (*found, text)


def required_columns(projection: Sequence[exp.Expr], where: exp.Expr | None,
                     group_by: Sequence[exp.Expr], having: exp.Expr | None,
                     column_text: ColumnText | None = None) -> dict[str, exp.Column]:
    """The columns an aggregation reads, in the order ksqlDB's analysis meets them (the
    SELECT's, the WHERE's, the GROUP BY's, then the HAVING's, each once; ``COUNT(*)`` reads
    ROWTIME, unqualified), by the name its messages give them: the Prepare step's first
    columns, and the first values of each aggregated row."""
    columns: dict[str, exp.Column] = {}
    for tree in [*projection, *([where] if where is not None else []), *group_by,
                 *([having] if having is not None else [])]:
        for node in tree.walk(bfs=False):
            read = _DEFAULT_ARGUMENT if is_aggregate(node) and not _arguments(
                node, given=True) else node
            if isinstance(read, exp.Column) and read.name not in _WINDOW_BOUNDS:
                columns.setdefault(column_text(read) if column_text is not None else read.name,
                                   read)
    return columns


def _columns(reading: dict[str, exp.Column], calling: Iterable[exp.Expr],
             column_text: ColumnText | None) -> dict[str, tuple[str, int]]:
    """The Prepare step's columns by their text: name and index."""
    columns = {name: (name, index) for index, name in enumerate(reading)}
    for tree in calling:
        for call in _aggregate_calls(tree):
            for argument in _arguments(call):
                text = expression_text(argument, column_text)
                if text not in columns:
                    columns[text] = (f"{INTERNAL_PREFIX}{len(columns)}", len(columns))
    return columns


def _aggregate_calls(tree: exp.Expr) -> Iterator[exp.Expr]:
    return (node for node in tree.walk(bfs=False) if is_aggregate(node))


def _arguments(call: exp.Expr, given: bool = False) -> list[exp.Expr]:
    """A call's arguments (``COUNT(*)``'s: ROWTIME, unless only the ``given`` ones)."""
    written = [a for a in call.expressions if not isinstance(a, exp.Star)]
    return written if written or given else [_DEFAULT_ARGUMENT]


__all__ = ["INTERNAL_PREFIX", "mark", "required_columns"]
