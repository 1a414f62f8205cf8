"""An outer stream-stream join without GRACE PERIOD (a query's first join, any other joining a
table), as ksqlDB runs it (Kafka Streams' join without a grace, deprecated but still ksqlDB's
default): a record that finds no match when it is processed is written at once, padded with
NULLs, and each pair is written when its second record arrives, so a record matched later is
written twice (unmatched, then joined).

In Spark: the query's SELECT as one streaming UNION ALL: over the INNER join (the pairs, a Spark
stream-stream join), and for each outer side (one, or both of a FULL join) over the records of
that stream no earlier record of the other stream matches. Those are found by keyed state
(:func:`keyed_unmatched`: the project's JVM processor ``io.metastore.join.UnmatchedRecords``
under ``transformWithState``, keyed by the join key, holding the other stream's times) when
the ON is one key equality of unwindowed streams; else (and for a query whose checkpoint
predates that state) by joining that stream with the other stream's records read in batch,
re-read at every micro-batch. "Earlier" is by time, a record of the
other stream at the same time counting as earlier: Kafka Streams processes records in the order
they come, which is time order when the streams' records come in time order; between records of
one time, which came first is not in the records. Each micro-batch's records are written in
time order per key (:func:`metastore.planner.plan._in_time_order`), as Kafka Streams writes them
when they arrive.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from metastore.engine.analysis import Analysis
from metastore.planner.steps import NULL_VALUE, SOURCE, TS, Step, UnmatchedRecords
from metastore.spark.types import quote
from metastore.sql.statements import JoinWindow, SourceKind

DEFAULT_GRACE_MS = 24 * 60 * 60 * 1000
"""How long Kafka Streams keeps a join's records past its window without GRACE PERIOD."""


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


def keyed_unmatched(select: exp.Select, join: AtOnceJoin, analysis: Analysis,
                    stream_views: dict[str, str], window: JoinWindow, prefix: str
                    ) -> tuple[list[Step], dict[str, str]] | None:
    """The steps that find each outer side's unmatched records as keyed state, and the view of
    them by alias; None unless the join's ON (of ``select``, rewritten) is one equality of a
    key of each stream, over unwindowed streams read from ``stream_views``. A left record's
    match is a right record within ``[t - before, t]``, a right record's a left record within
    ``[t - after, t]``."""
    if any(read.source.window is not None for read in analysis.reads[:2]):
        return None
    tables = {table.alias_or_name: table.name for table in select.find_all(exp.Table)}
    if any(tables.get(alias) != stream_views.get(alias) for alias in (join.left, join.right)):
        return None
    keys = _key_pair(select.args["joins"][0].args["on"], join.left, join.right)
    if keys is None:
        return None
    retention = window.before_ms + window.after_ms + DEFAULT_GRACE_MS
    steps: list[Step] = []
    views: dict[str, str] = {}
    sides = [(join.left, join.right, keys, window.before_ms)] if join.side != "RIGHT" else []
    if join.side != "LEFT":
        sides.append((join.right, join.left, (keys[1], keys[0]), window.after_ms))
    for index, (streamed, other, (mine, theirs), lookback) in enumerate(sides):
        records = f"{prefix}_unmatched_{index}_records"
        sql = (f"SELECT true AS __MS_STREAMED, CAST({mine} AS STRING) AS __MS_JOINKEY, "
               f"unix_millis({quote(streamed)}.{TS}) AS __MS_T, struct({quote(streamed)}.*) AS "
               f"__MS_ROW FROM {quote(stream_views[streamed])} AS {quote(streamed)} UNION ALL "
               f"SELECT false, CAST({theirs} AS STRING), unix_millis({quote(other)}.{TS}), NULL "
               f"FROM {quote(stream_views[other])} AS {quote(other)} WHERE NOT "
               f"{quote(other)}.{NULL_VALUE} AND ({theirs}) IS NOT NULL")
        views[streamed] = records.removesuffix("_records")
        steps += [Step(records, sql),
                  Step(views[streamed], keyed=UnmatchedRecords(records, stream_views[other],
                                                               lookback, retention))]
    return steps, views


def _key_pair(on: exp.Expr, left: str, right: str) -> tuple[str, str] | None:
    """The SQL of each side's key in ``on``'s only equality between the two streams' columns."""
    found: list[tuple[str, str]] = []
    for equality in on.find_all(exp.EQ):
        sides = [{column.table for column in side.find_all(exp.Column)}
                 for side in (equality.this, equality.expression)]
        texts = [side.sql(dialect="spark", identify=True)
                 for side in (equality.this, equality.expression)]
        if sides == [{left}, {right}]:
            found.append((texts[0], texts[1]))
        elif sides == [{right}, {left}]:
            found.append((texts[1], texts[0]))
        elif sides[0] & {left, right} and sides[1] & {left, right}:
            return None  # some other condition between them
    return found[0] if len(found) == 1 else None


def union_sql(select: exp.Select, join: AtOnceJoin, batch_views: dict[str, str],
              unmatched: dict[str, str] | None = None) -> str:
    """The SQL of the rewritten query (a stream-stream outer join, in Spark's terms): the
    unmatched records of each outer side, then the pairs. ``batch_views``: for each alias, the
    view of its stream's records read in batch; ``unmatched``: for each outer alias, the view
    of its unmatched records, where keyed state finds them (:func:`keyed_unmatched`)."""
    branches: list[str] = []
    for streamed, other, side in ((join.left, join.right, "LEFT"),
                                  (join.right, join.left, "RIGHT")):
        if join.side not in (side, "FULL"):
            continue
        if unmatched is not None:
            branches.append(_padded(select, streamed, unmatched[streamed], other, side))
        else:
            branches.append(_unmatched(select, streamed, other, batch_views[other], side))
    pairs = select.copy()
    only = pairs.args["joins"][0]
    only.set("side", None)
    only.set("kind", "INNER")
    branches.append(pairs.sql(dialect="spark", identify=True))
    return " UNION ALL ".join(f"SELECT * FROM ({branch})" for branch in branches)


def _padded(select: exp.Select, streamed: str, unmatched_view: str, other: str, side: str
            ) -> str:
    """``select`` over the unmatched records of ``streamed`` (``unmatched_view``), ``other``'s
    columns NULL: an outer join with no rows of the other stream's columns (``<view>_other``,
    :class:`~metastore.planner.steps.UnmatchedRecords`)."""
    query = select.copy()
    for table in list(query.find_all(exp.Table)):
        if table.alias_or_name == streamed:
            table.set("this", exp.to_identifier(unmatched_view, quoted=True))
        elif table.alias_or_name == other:
            table.set("this", exp.to_identifier(f"{unmatched_view}_other", quoted=True))
    only = query.args["joins"][0]
    only.set("side", side)
    only.set("kind", None)
    return query.sql(dialect="spark", identify=True)


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
