"""A query over a stream-stream join's rows: an aggregation of the join, or tables joined after
it as keyed state.

Kafka Streams aggregates a stream-stream join's output like any stream, and joins it with a
table like any stream: each joined record (a pair, or an outer join's unmatched record padded
with NULLs) is one record, with the join's time (the newest of the records joined) and the
headers of the record that made it. Here the query splits in two:

1. the stream-stream join (its FROM and stream JOINs, in Spark's terms, bounded as any
   stream-stream join is) selects every column of its sources the query reads, each under a
   hidden name (``__MS_S<n>_<i>``), and the joined record's own columns: its time, headers,
   source offsets and, in a windowed aggregation, the window(s) that time falls into;
2. the rest of the query reads that view as :data:`JOINED`, each source's columns under its
   own alias through a ``LATERAL VIEW``, so its references, qualified or not, read as they did
   in the join; its table JOINs are keyed state over those rows
   (:func:`metastore.planner.table_state.join_tables`), in the joined records' time order.

Spark runs a stream-stream join followed by an aggregation in ``update`` mode: an INNER join,
or an outer one without GRACE PERIOD, whose unmatched records are written at once
(:mod:`metastore.planner.outer_at_once`). Spark writes the unmatched records of its own outer
joins in ``append`` mode only, so :mod:`metastore.planner.support` refuses the aggregation of
an outer join with a GRACE PERIOD. A time window falls on the joined record's time, not on the
first stream's record's, as ksqlDB windows the join's output; that time carries no watermark, so
the window's GRACE PERIOD does not close it (a late joined record still counts).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from metastore.engine.analysis import Analysis
from metastore.planner.steps import HEADERS, ROWTIME, SOURCE, TS, WINDOW, window_call
from metastore.planner.table_state import lateral_view
from metastore.spark.types import quote
from metastore.sql.statements import SourceKind, WindowSpec

JOINED = "__ms_joined"
"""The alias of a stream-stream join's rows in the query that reads them. Besides the sources'
hidden columns, a row has the joined record's ``ROWTIME`` and event time (``__MS_TS``), its
headers and source offsets, and ``ROWPARTITION``/``ROWOFFSET`` that order the rows by time (an
aggregation carries the newest one's headers; a table joined next processes them in that
order)."""


def split_stream_joins(select: exp.Select, analysis: Analysis, joined: int, view: str,
                       window: WindowSpec | None, taken: Sequence[exp.Expr] = ()
                       ) -> exp.Select:
    """Split ``select`` (rewritten into Spark's terms) after the join of its first ``joined``
    sources (its stream-stream joins, and tables read in batch among them): it becomes the
    query over ``view``'s rows, read as :data:`JOINED`, with its later JOINs (of tables as keyed
    state) and its WHERE, GROUP BY and HAVING; the returned SELECT is the join, whose rows
    ``view`` is to hold, bounded and written as any stream-stream join's. ``window``: the time
    window the joined records fall into here (an aggregation's, when no table is joined next);
    ``taken``: expressions the query reads beside its SELECT list (its table functions)."""
    reads = analysis.reads[:joined]
    aliases = [read.alias for read in reads]
    own = {name: exp.column(column, table=JOINED, quoted=True)
           for name, column in ((ROWTIME, "ROWTIME"), (HEADERS, HEADERS), (SOURCE, SOURCE))}
    for item in select.expressions:  # a record's time, headers and offsets are the join's
        if isinstance(item, exp.Alias) and item.alias in own and not analysis.aggregate:
            item.set("this", own[item.alias].copy())
    used: dict[str, dict[str, str]] = {alias: {} for alias in aliases}
    for tree in (select, *taken):
        _qualify(tree, analysis)
        for column in tree.find_all(exp.Column):
            names = used.get(column.table)
            if names is not None and column.name not in names:
                names[column.name] = f"__MS_S{aliases.index(column.table)}_{len(names)}"
    joins = list(select.args.get("joins") or [])
    join = select.copy()
    for name in ("group", "having", "where"):
        join.set(name, None)
    join.set("joins", [j.copy() for j in joins[:joined - 1]])
    newest = exp.func("greatest", *(exp.column("ROWTIME", table=read.alias, quoted=True)
                                    for read in reads if read.source.kind is SourceKind.STREAM))
    time = f"timestamp_millis({newest.sql(dialect='spark', identify=True)})"
    items: list[exp.Expr] = [
        exp.alias_(exp.column(name, table=alias, quoted=True), hidden, quoted=True)
        for alias, names in used.items() for name, hidden in names.items()]
    items += [exp.alias_(newest.copy(), "ROWTIME", quoted=True),
              exp.alias_(exp.Literal.number(0), "ROWPARTITION", quoted=True),
              exp.alias_(newest.copy(), "ROWOFFSET", quoted=True),
              exp.alias_(exp.maybe_parse(time, dialect="spark"), TS, quoted=True),
              # the join sets them, as any stream-stream join's
              exp.alias_(exp.Null(), HEADERS, quoted=True),
              exp.alias_(exp.Null(), SOURCE, quoted=True)]
    if window is not None:
        items.append(exp.alias_(exp.maybe_parse(window_call(window, time), dialect="spark"),
                                WINDOW, quoted=True))
    join.set("expressions", items)
    select.set("joins", joins[joined - 1:] or None)
    select.set("from_", exp.From(this=exp.Table(
        this=exp.to_identifier(view, quoted=True),
        alias=exp.TableAlias(this=exp.to_identifier(JOINED)))))
    select.set("laterals", [lateral_view(alias, names, JOINED) for alias, names in used.items()
                            if names])
    if window is not None and window.advance_ms:  # hopping windows start at the epoch or later
        select.where(exp.maybe_parse(f"unix_millis({quote(JOINED)}.{quote(WINDOW)}.start) >= 0",
                                     dialect="spark"), copy=False)
    return join


def _qualify(tree: exp.Expr, analysis: Analysis) -> None:
    """Qualify the unqualified columns of ``tree`` that one of its sources has (not a lambda's
    parameter of the same name)."""
    owners: dict[str, list[str]] = {}
    for read in analysis.reads:
        for declared in read.source.columns:
            owners.setdefault(declared.name, []).append(read.alias)
    for column in list(tree.find_all(exp.Column)):
        if not column.table and len(owners.get(column.name, [])) == 1 and not _bound(column):
            column.set("table", exp.to_identifier(owners[column.name][0]))


def _bound(column: exp.Column) -> bool:
    """Whether ``column`` names a parameter of a lambda around it."""
    node = column.parent
    while node is not None:
        if isinstance(node, exp.Lambda) and any(
                param.name == column.name for param in node.expressions):
            return True
        node = node.parent
    return False
