"""An aggregation of a stream-stream join: the join's rows as a view of their own, which the
aggregation reads.

Kafka Streams aggregates a stream-stream join's output like any stream: each joined record
(a pair, or an outer join's unmatched record padded with NULLs) is one input of its group,
with the join's time (the newest of the records joined) and the headers of the record that
made it. Here the query splits in two:

1. the join (its FROM, JOINs and WHERE, in Spark's terms, bounded as any stream-stream join
   is) selects every column of every source the aggregation reads, each under a hidden name
   (``__MS_J<n>_<i>``), and the joined record's own columns: its time, headers and, in a
   windowed aggregation, the window(s) that time falls into;
2. the aggregation reads that view as :data:`JOINED`, each source's columns under its own
   alias through a ``LATERAL VIEW``, so its references, qualified or not, read as they did in
   the join.

Spark runs a stream-stream join followed by an aggregation in ``update`` mode: an INNER join,
or an outer one without GRACE PERIOD, whose unmatched records are written at once
(:mod:`metastore.queries.outer_at_once`). Spark writes the unmatched records of its own outer
joins in ``append`` mode only, so :mod:`metastore.queries.support` refuses the aggregation of
an outer join with a GRACE PERIOD. A time window falls on the joined record's time, not on the
first stream's record's, as ksqlDB windows the join's output.
"""

from __future__ import annotations

from sqlglot import exp

from metastore.catalog.analysis import Analysis
from metastore.queries.steps import HEADERS, WINDOW, window_call
from metastore.queries.table_state import lateral_view
from metastore.spark.types import quote
from metastore.sql.statements import SourceKind, WindowSpec

JOINED = "__ms_joined"
"""The alias of a stream-stream join's rows in the aggregation that reads them; its ``ROWTIME``
is the joined record's time and its ``ROWOFFSET`` orders a group's records (by that time: the
aggregation carries the newest one's headers)."""


def split_aggregation(select: exp.Select, analysis: Analysis, view: str,
                      window: WindowSpec | None) -> exp.Select:
    """Split ``select`` (an aggregation of a stream-stream join, rewritten into Spark's terms)
    in two: it becomes the aggregation of ``view``'s rows, read as :data:`JOINED`; the
    returned SELECT is the join, whose rows ``view`` is to hold, bounded and written as any
    stream-stream join's. ``window``: the aggregation's time window, if it has one."""
    aliases = [read.alias for read in analysis.reads]
    _qualify(select, analysis)
    used: dict[str, dict[str, str]] = {alias: {} for alias in aliases}
    for column in select.find_all(exp.Column):
        names = used.get(column.table)
        if names is not None and column.name not in names:
            names[column.name] = f"__MS_J{aliases.index(column.table)}_{len(names)}"
    join = select.copy()
    join.set("group", None)
    join.set("having", None)
    newest = exp.func("greatest", *(exp.column("ROWTIME", table=read.alias, quoted=True)
                                    for read in analysis.reads
                                    if read.source.kind is SourceKind.STREAM))
    items: list[exp.Expr] = [
        exp.alias_(exp.column(name, table=alias, quoted=True), hidden, quoted=True)
        for alias, names in used.items() for name, hidden in names.items()]
    items += [exp.alias_(newest.copy(), "ROWTIME", quoted=True),
              exp.alias_(newest.copy(), "ROWOFFSET", quoted=True),
              exp.alias_(exp.Null(), HEADERS, quoted=True)]  # the join sets it
    if window is not None:
        time = f"timestamp_millis({newest.sql(dialect='spark', identify=True)})"
        items.append(exp.alias_(exp.maybe_parse(window_call(window, time), dialect="spark"),
                                WINDOW, quoted=True))
    join.set("expressions", items)
    select.set("joins", None)
    select.set("where", None)
    select.set("from_", exp.From(this=exp.Table(
        this=exp.to_identifier(view, quoted=True),
        alias=exp.TableAlias(this=exp.to_identifier(JOINED)))))
    select.set("laterals", [lateral_view(alias, names, JOINED) for alias, names in used.items()
                            if names])
    if window is not None and window.advance_ms:  # hopping windows start at the epoch or later
        select.where(exp.maybe_parse(f"unix_millis({quote(JOINED)}.{quote(WINDOW)}.start) >= 0",
                                     dialect="spark"), copy=False)
    return join


def _qualify(select: exp.Select, analysis: Analysis) -> None:
    """Qualify the unqualified columns of ``select`` that one of its sources has."""
    owners: dict[str, list[str]] = {}
    for read in analysis.reads:
        for declared in read.source.columns:
            owners.setdefault(declared.name, []).append(read.alias)
    for column in list(select.find_all(exp.Column)):
        if not column.table and len(owners.get(column.name, [])) == 1:
            column.set("table", exp.to_identifier(owners[column.name][0]))
