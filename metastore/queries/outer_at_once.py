"""An outer stream-stream join without GRACE PERIOD (a query's first join, any other joining a
table), as ksqlDB runs it (Kafka Streams' join without a grace, deprecated but still ksqlDB's
default): a record that finds no match when it is processed is written at once, padded with
NULLs, and each pair is written when its second record arrives, so a record matched later is
written twice (unmatched, then joined).

In Spark: the query's SELECT as one streaming UNION ALL: over the INNER join (the pairs, a Spark
stream-stream join), and for each outer side (one, or both of a FULL join) over that stream
joined with the other stream's records read in batch (re-read at every micro-batch), keeping the
records no earlier record of the other stream matches. "Earlier" is by time, a record of the
other stream at the same time counting as earlier: Kafka Streams processes records in the order
they come, which is time order when the streams' records come in time order; between records of
one time, which came first is not in the records. Each micro-batch's records are written in
time order per key (:func:`metastore.queries.plan._in_time_order`), as Kafka Streams writes them
when they arrive.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from metastore.catalog.analysis import Analysis
from metastore.queries.steps import NULL_VALUE, SOURCE, TS
from metastore.sql.statements import JoinWindow, SourceKind


@dataclass(frozen=True)
class AtOnceJoin:
    """The one stream-stream join of a query whose outer side(s) write unmatched records at once:
    ``left`` and ``right`` the aliases, ``side`` LEFT, RIGHT or FULL."""

    left: str
    right: str
    side: str


def at_once_join(analysis: Analysis, windows: dict[int, JoinWindow]) -> AtOnceJoin | None:
    """The query's first join when it is an outer stream-stream join without GRACE PERIOD and
    every other join is with a table (joined to each branch's rows alike)."""
    if not analysis.joins or set(windows) != {1}:
        return None
    join = analysis.joins[0]
    side = (join.side or "").upper()
    if side not in ("LEFT", "RIGHT", "FULL") or windows[1].grace_ms is not None:
        return None
    if join.right.source.kind is not SourceKind.STREAM or any(
            later.right.source.kind is not SourceKind.TABLE for later in analysis.joins[1:]):
        return None
    return AtOnceJoin(analysis.reads[0].alias, analysis.reads[1].alias, side)


def stream_join_windows(analysis: Analysis) -> dict[int, JoinWindow]:
    """The WITHIN of each stream-stream join of ``analysis``, by the index of the source it
    joins in ``analysis.reads`` (its JOIN's index + 1)."""
    if analysis.reads[0].source.kind is not SourceKind.STREAM:
        return {}
    by_join = {window.join: window for window in analysis.query.join_windows}
    return {index + 1: by_join[index] for index, join in enumerate(analysis.joins)
            if join.right.source.kind is SourceKind.STREAM and index in by_join}


def union_sql(select: exp.Select, join: AtOnceJoin, batch_views: dict[str, str]) -> str:
    """The SQL of the rewritten query (a stream-stream outer join, in Spark's terms): the
    unmatched records of each outer side, then the pairs. ``batch_views``: for each alias, the
    view of its stream's records read in batch."""
    branches: list[str] = []
    if join.side in ("LEFT", "FULL"):
        branches.append(_unmatched(select, join.left, join.right, batch_views[join.right],
                                   "LEFT"))
    if join.side in ("RIGHT", "FULL"):
        branches.append(_unmatched(select, join.right, join.left, batch_views[join.left],
                                   "RIGHT"))
    pairs = select.copy()
    only = pairs.args["joins"][0]
    only.set("side", None)
    only.set("kind", "INNER")
    branches.append(pairs.sql(dialect="spark", identify=True))
    return " UNION ALL ".join(f"SELECT * FROM ({branch})" for branch in branches)


def _unmatched(select: exp.Select, streamed: str, other: str, other_batch: str, side: str
               ) -> str:
    """``select`` over the records of ``streamed`` that no earlier record of ``other`` (read in
    batch from ``other_batch``) matches, ``other``'s columns NULL. An ``other`` record is earlier
    when its time is not after the record's."""
    query = select.copy()
    for table in query.find_all(exp.Table):
        if table.alias_or_name == other:
            table.set("this", exp.to_identifier(other_batch, quoted=True))
    only = query.args["joins"][0]
    mine = exp.column(TS, table=streamed, quoted=True)
    theirs = exp.column(TS, table=other, quoted=True)
    earlier = exp.LTE(this=theirs, expression=mine)
    live = exp.Not(this=exp.column(NULL_VALUE, table=other, quoted=True))
    only.set("on", exp.and_(exp.Paren(this=only.args["on"]), earlier, live))
    only.set("side", side)
    only.set("kind", None)
    query.where(exp.Is(this=exp.column(SOURCE, table=other, quoted=True), expression=exp.Null()),
                copy=False)
    return query.sql(dialect="spark", identify=True)
