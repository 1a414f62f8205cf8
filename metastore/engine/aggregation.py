"""ksqlDB's rules for a query that aggregates (its ``AggregateAnalyzer``), checked in its order.

A query aggregates when it has a GROUP BY or calls an aggregate function in its SELECT; without
a GROUP BY ksqlDB groups by an implicit constant (its "dummy" GROUP BY), so the same rules
apply with nothing grouped. ksqlDB visits the SELECT expressions, then WHERE, GROUP BY and
HAVING, and then enforces:

- aggregate functions do not nest (``SUM(COUNT())``), and GROUP BY calls none;
- in a windowed aggregation the window bounds (WINDOWSTART, WINDOWEND) appear only in the SELECT,
  outside aggregate calls;
- a GROUP BY has an aggregate call in its SELECT or HAVING;
- each SELECT expression is grouped, or made of grouped expressions and aggregate calls;
- each column HAVING uses outside an aggregate call is grouped (or inside a grouped expression).

Also here: GROUP BY and PARTITION BY list no expression twice (:func:`check_distinct`), and
what ksqlDB's aggregate step is made of (:func:`summarise`), which a query replacing the
aggregation must keep. The expressions' comparison, rendering and column resolution are the
analysis's, passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from metastore.catalog.exceptions import QueryError
from metastore.functions import library as functions

WINDOW_BOUNDS = frozenset({"WINDOWSTART", "WINDOWEND"})
DEFAULT_ARGUMENT = "ROWTIME"
"""The column ksqlDB passes to an aggregate called without arguments (``COUNT(*)``)."""


@dataclass(frozen=True)
class Rendering:
    """How the analysis compares and shows expressions: ``same`` matches an expression with a
    grouped one, ``is_column`` tells a column reference from a lambda variable, ``shown`` and
    ``column`` write an expression and a column as ksqlDB's messages do."""

    same: Callable[[exp.Expr, exp.Expr], bool]
    is_column: Callable[[exp.Column], bool]
    shown: Callable[[exp.Expr], str]
    column: Callable[[exp.Column], str]


@dataclass
class _Visit:
    """What one walk of the clauses found."""

    calls: list[exp.Expr] = field(default_factory=list)
    """The aggregate calls, in the order ksqlDB records them (SELECT, then HAVING)."""


def check_aggregation(select: Sequence[exp.Expr], group_by: Sequence[exp.Expr],
                      where: exp.Expr | None, having: exp.Expr | None, windowed: bool,
                      rendering: Rendering) -> list[exp.Expr]:
    """Raise ksqlDB's error for the first rule the query breaks; return its aggregate calls."""
    grouped = [*group_by, *(exp.column(bound) for bound in sorted(WINDOW_BOUNDS) if windowed)]
    visit = _Visit()
    walker = _Walker(grouped, windowed, rendering, visit)
    for expression in select:
        walker.walk(expression, "SELECT")
    if where is not None:
        walker.walk(where, "WHERE")
    for expression in group_by:
        walker.walk(expression, "GROUP BY")
    having_columns: list[exp.Column] = []
    if having is not None:
        having_columns = walker.walk(having, "HAVING")
    if not visit.calls:
        raise QueryError("GROUP BY requires aggregate functions in either the SELECT or HAVING "
                         "clause.")
    unmatched = [e for e in select if walker.ungrouped(e)]
    if unmatched:
        raise QueryError("Non-aggregate SELECT expression(s) not part of GROUP BY: "
                         f"{', '.join(rendering.shown(e) for e in unmatched)}\nEither add the "
                         "column(s) to the GROUP BY or remove them from the SELECT.")
    if having_columns:
        raise QueryError("Non-aggregate HAVING expression not part of GROUP BY: "
                         f"{', '.join(rendering.column(c) for c in having_columns)}\nConsider "
                         "switching the HAVING clause to a WHERE clause before the GROUP BY.")
    return visit.calls


def call_text(call: exp.Expr, rendering: Rendering) -> str:
    """An aggregate call as ksqlDB lists it: ``COUNT(ROWTIME)`` for ``COUNT(*)``."""
    args = [a for a in functions.arguments(call) if not isinstance(a, exp.Star)]
    shown = [rendering.shown(a) if not isinstance(a, exp.Column) else rendering.column(a)
             for a in args] or [DEFAULT_ARGUMENT]
    return f"{functions.function_name(call)}({', '.join(shown)})"


class _Walker:
    def __init__(self, grouped: list[exp.Expr], windowed: bool, rendering: Rendering,
                 visit: _Visit) -> None:
        self.grouped = grouped
        self.windowed = windowed
        self.rendering = rendering
        self.visit = visit

    def walk(self, expression: exp.Expr, clause: str) -> list[exp.Column]:
        """Check one clause's expression; the columns it uses outside aggregate calls and
        grouped expressions, not themselves grouped."""
        loose: list[exp.Column] = []
        self._node(expression, clause, None, False, loose)
        return loose

    def _node(self, node: exp.Expr, clause: str, aggregate: str | None, in_group: bool,
              loose: list[exp.Column]) -> None:
        in_group = in_group or self._is_grouped(node)
        if isinstance(node, exp.Func) and functions.is_aggregate(node):
            name = functions.function_name(node)
            if aggregate is not None:
                raise QueryError(f"Aggregate functions can not be nested: {aggregate}({name}())")
            if clause == "GROUP BY":
                raise QueryError(f"GROUP BY does not support aggregate functions: {name} is an "
                                 "aggregate function.")
            if clause in ("SELECT", "HAVING"):
                self.visit.calls.append(node)
            aggregate = name
        if isinstance(node, exp.Column) and self.rendering.is_column(node):
            self._column(node, clause, aggregate, in_group, loose)
            return
        for child in node.iter_expressions():
            self._node(child, clause, aggregate, in_group, loose)

    def _column(self, node: exp.Column, clause: str, aggregate: str | None, in_group: bool,
                loose: list[exp.Column]) -> None:
        bound = not node.table and node.name.upper() in WINDOW_BOUNDS
        if self.windowed and bound and (clause != "SELECT" or aggregate is not None):
            raise QueryError(f"Window bounds column {node.name.upper()} can only be used in the "
                             "SELECT clause of windowed aggregations and can not be passed to "
                             "aggregate functions.\nSee https://github.com/confluentinc/ksql/"
                             "issues/4397")
        if clause == "HAVING" and aggregate is None and not in_group:
            loose.append(node)

    def _is_grouped(self, node: exp.Expr) -> bool:
        return any(self.rendering.same(node, grouped) for grouped in self.grouped)

    def ungrouped(self, node: exp.Expr) -> bool:
        """Whether a SELECT expression uses a column outside the GROUP BY's expressions and
        aggregate calls."""
        if self._is_grouped(node):
            return False
        if isinstance(node, exp.Func) and functions.is_aggregate(node):
            return False
        if isinstance(node, exp.Column):
            return self.rendering.is_column(node)
        return any(self.ungrouped(child) for child in node.iter_expressions())


def check_distinct(expressions: Sequence[exp.Expr], clause: str,
                   same: Callable[[exp.Expr, exp.Expr], bool],
                   qualified: Callable[[exp.Expr], str]) -> None:
    """ksqlDB's GroupBy and PartitionBy nodes: no expression is given twice (``DATA`` and
    ``TEST.DATA`` are one column); ``qualified`` writes it with its columns qualified by their
    source, as ksqlDB's AST does."""
    for index, expression in enumerate(expressions):
        if any(same(expression, earlier) for earlier in expressions[:index]):
            raise QueryError(f"Duplicate {clause} expression: {qualified(expression)}")


@dataclass(frozen=True)
class Summary:
    """ksqlDB's aggregate step of a query as a replacing query must keep it (its
    ``StreamAggregate``): the input columns it keeps besides the aggregates' state, and its
    aggregate calls with their column arguments named as the step's input names them."""

    required_columns: tuple[str, ...]
    functions: tuple[str, ...]


INTERNAL_COLUMN_PREFIX = "KSQL_INTERNAL_COL_"


def summarise(select: Sequence[exp.Expr], where: exp.Expr | None, group_by: Sequence[exp.Expr],
              having: exp.Expr | None, calls: Sequence[exp.Expr],
              rendering: Rendering) -> Summary:
    """ksqlDB's AggregateAnalyzer's required columns (every column the SELECT, WHERE, GROUP BY
    and HAVING use, in that order, ``ROWTIME`` for an aggregate called without arguments, the
    window bounds excepted) and its AggregateNode's internal schema (a column argument keeps
    its name, any other argument is ``KSQL_INTERNAL_COL_<n>``, literals stay)."""
    required: list[str] = []
    for root in [*select, *([where] if where is not None else []), *group_by,
                 *([having] if having is not None else [])]:
        for node in root.walk(bfs=False):
            if isinstance(node, exp.Func) and functions.is_aggregate(node) and not [
                    a for a in functions.arguments(node) if not isinstance(a, exp.Star)]:
                required.append(DEFAULT_ARGUMENT)
            if isinstance(node, exp.Column) and rendering.is_column(node) and not (
                    not node.table and node.name.upper() in WINDOW_BOUNDS):
                required.append(rendering.column(node))
    required = list(dict.fromkeys(required))
    internal = {name: name for name in required}
    shown: list[str] = []
    for call in calls:
        args = [a for a in functions.arguments(call) if not isinstance(a, exp.Star)]
        texts = []
        for arg in args:
            if isinstance(arg, exp.Literal | exp.Neg | exp.Boolean | exp.Null):
                texts.append(rendering.shown(arg))
                continue
            text = rendering.column(arg) if isinstance(arg, exp.Column) else rendering.shown(arg)
            if text not in internal:
                internal[text] = (text if isinstance(arg, exp.Column)
                                  else f"{INTERNAL_COLUMN_PREFIX}{len(internal)}")
            texts.append(internal[text])
        shown.append(f"{functions.function_name(call)}({', '.join(texts or [DEFAULT_ARGUMENT])})")
    return Summary(tuple(required), tuple(shown))
