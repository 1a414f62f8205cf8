"""EMIT FINAL of TUMBLING and HOPPING windows, as Kafka Streams' window aggregation emits on
window close: keyed state over the stream's new records (:func:`keyed_final`), or, for a query
whose checkpoint predates that state, a batch stage (:class:`~metastore.planner.steps.
BatchStage`) that replays the stream's records up to each micro-batch in offset order.

Kafka Streams decides record by record, and so do both (Spark's watermark judges a whole
micro-batch by the previous one's, so late records in the micro-batch that closes their window
would still count). Per source partition, in offset order, with stream time ``st`` the newest
timestamp the aggregation has seen up to and including a record, and ``close = st - grace``:

- a record counts in a window of its time only while ``window end > close``; else it is late
  and dropped for that window;
- the window store's time is the newest start of a window a record was counted in; the store
  keeps a window while ``start >= store time - retention`` (RETENTION, at least size + grace);
- a window is written once, at the first record whose ``close`` reaches the window's end, with
  its value then (every record counted in it), unless the store no longer keeps it.

A micro-batch writes the windows whose closing record it brings; the aggregation itself is the
query's own SELECT over the records counted in them. Stream time is counted per source partition
(Kafka Streams counts it per partition of the aggregation's input, which a GROUP BY of other
columns than the key repartitions).
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from metastore.catalog.model import DataSource
from metastore.planner.stages import aggregated_alias, records_seen, replayed_stream
from metastore.planner.steps import (
    SENTINEL,
    SESSION,
    TS,
    WINDOW,
    BatchStage,
    FinalWindows,
    Step,
    window_columns,
)
from metastore.spark.types import quote
from metastore.sql.statements import WindowSpec


def final_window(window: WindowSpec) -> WindowSpec:
    """EMIT FINAL's window: without a GRACE PERIOD its grace is 0, as ksqlDB rewrites it."""
    return replace(window, grace_ms=window.grace_ms or 0)


def final_stage(source: DataSource, view: str, window: WindowSpec) -> BatchStage:
    """The stage's input: the stream's records up to the micro-batch, one row per window of the
    record's time, those of the micro-batch marked as sentinels. :func:`replay_final` narrows
    it to the windows the micro-batch closes."""
    return replayed_stream(source, view, window)


def _timing(window: WindowSpec) -> tuple[int, int]:
    """EMIT FINAL's grace period and how long the window store keeps a window after its start
    (RETENTION, at least size + grace), in milliseconds."""
    final = final_window(window)
    grace = final.grace_ms or 0
    return grace, max(final.retention_ms or 0, (final.size_ms or 0) + grace)


def keyed_final(aggregation: exp.Select, stream_view: str, input_view: str,
                window: WindowSpec) -> tuple[list[Step], BatchStage]:
    """The steps and batch stage that feed ``aggregation`` (an EMIT FINAL aggregation of one
    stream in TUMBLING or HOPPING windows, whose FROM reads ``input_view``) from keyed state
    over the stream's records in ``stream_view``: per micro-batch, ``input_view`` is the records
    counted in each window it closes. The project's JVM processor
    ``io.metastore.window.FinalWindows``, keyed by source partition under ``transformWithState``,
    keeps the partition's stream time, its store time and its open windows with their records
    in the query's checkpoint, and decides record by record as the module says."""
    windowed, seen_view, closed = (f"{stream_view}_windowed", f"{stream_view}_seen",
                                   f"{stream_view}_closed")
    bounds, hopping = window_columns(window)
    alias = aggregated_alias(aggregation)

    def bound(which: str) -> exp.Expr:
        return exp.Anonymous(this="unix_millis", expressions=[exp.Dot(
            this=exp.column(WINDOW, table=alias, quoted=True),
            expression=exp.to_identifier(which))])

    where = aggregation.args.get("where")
    seen: exp.Expr = exp.true() if where is None else exp.func(
        "coalesce", exp.Paren(this=where.this.copy()), exp.false())
    unfiltered = aggregation.copy()
    unfiltered.set("where", None)  # a record it rejects moves no stream time
    items: list[exp.Expr] = [
        exp.Column(this=exp.Star(), table=exp.to_identifier(alias, quoted=True)),
        exp.alias_(seen, "__MS_SEEN", quoted=True),
        exp.alias_(exp.Anonymous(this="unix_millis", expressions=[
            exp.column(TS, table=alias, quoted=True)]), "__MS_T", quoted=True),
        exp.alias_(bound("start"), "__MS_WS", quoted=True),
        exp.alias_(bound("end"), "__MS_WE", quoted=True)]
    grace, retention = _timing(window)
    steps = [Step(windowed, f"SELECT * FROM (SELECT *{bounds} FROM {quote(stream_view)})"
                            f"{hopping}"),
             Step(seen_view, records_seen(unfiltered, items, input_view, windowed)),
             Step(closed, keyed=FinalWindows(seen_view, grace, retention))]
    changes = f"{closed}_changes"
    return steps, BatchStage(source_sql=f"SELECT * FROM {quote(closed)}", view=changes,
                             steps=(Step(input_view, f"SELECT * FROM {quote(changes)}"),))


def replay_final(stage: BatchStage, aggregation: exp.Select, window: WindowSpec) -> BatchStage:
    """Narrow the stage's input (``<view>_input``, which ``aggregation`` reads) to the rows
    counted in the windows the micro-batch closes. Stream time counts only the records the
    aggregation sees (its joins, its WHERE and the rows it skips applied)."""
    *history, rows = stage.steps
    every = f"{rows.view}_all"
    grace, retention = _timing(window)
    alias = aggregated_alias(aggregation)

    def column(name: str) -> exp.Column:
        return exp.column(name, table=alias, quoted=True)

    def millis(value: exp.Expr) -> exp.Expr:
        return exp.Anonymous(this="unix_millis", expressions=[value])

    def bound(which: str) -> exp.Expr:
        return millis(exp.Dot(this=column(WINDOW), expression=exp.to_identifier(which)))

    items: list[exp.Expr] = [
        exp.alias_(column("ROWPARTITION"), "p"), exp.alias_(column("ROWOFFSET"), "o"),
        exp.alias_(millis(column(TS)), "t"), exp.alias_(bound("start"), "ws"),
        exp.alias_(bound("end"), "we"), exp.alias_(column(SENTINEL), "sen")]
    seen = records_seen(aggregation, items, rows.view, every)
    timed = (f"SELECT *, we <= close AS late FROM (SELECT *, max(t) OVER (PARTITION BY p ORDER "
             f"BY o RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - {grace} AS close "
             f"FROM ({seen}))")
    per_record = (
        "SELECT p, o, close, sen, max(stored) OVER (PARTITION BY p ORDER BY o ROWS BETWEEN "
        "UNBOUNDED PRECEDING AND CURRENT ROW) AS store_time FROM (SELECT p, o, first(close) AS "
        "close, first(sen) AS sen, max(IF(late, NULL, ws)) AS stored FROM "
        f"{quote(stage.view + '_timed')} GROUP BY p, o)")
    # each window meets the first record whose close reaches its end: windows sort before
    # records of the same time, records of one time in offset order
    events = (
        f"SELECT p, we AS k, 0 AS r, CAST(NULL AS BIGINT) AS o, ws, we, CAST(NULL AS "
        "STRUCT<sen: BOOLEAN, store_time: BIGINT>) AS at FROM (SELECT DISTINCT p, ws, we FROM "
        f"{quote(stage.view + '_timed')} WHERE NOT late) UNION ALL SELECT p, close AS k, 1 AS r, "
        "o, NULL, NULL, named_struct('sen', sen, 'store_time', store_time) FROM "
        f"{quote(stage.view + '_records')}")
    closed = (
        "SELECT p, ws, we FROM (SELECT *, first_value(at, true) OVER (PARTITION BY p ORDER BY "
        "k, r, o ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS closer FROM "
        f"({events})) WHERE r = 0 AND closer.sen AND ws >= closer.store_time - {retention}")
    narrowed = (
        f"SELECT h.* FROM {quote(every)} AS h LEFT SEMI JOIN (SELECT t.p, t.o, t.ws FROM "
        f"{quote(stage.view + '_timed')} AS t LEFT SEMI JOIN {quote(stage.view + '_closed')} "
        "AS c ON t.p = c.p AND t.ws = c.ws AND t.we = c.we WHERE NOT t.late) AS k ON "
        f"h.ROWPARTITION = k.p AND h.ROWOFFSET = k.o AND unix_millis(h.{quote(WINDOW)}.start) "
        "= k.ws")
    steps = (*history, replace(rows, view=every), Step(stage.view + "_timed", timed),
             Step(stage.view + "_records", per_record), Step(stage.view + "_closed", closed),
             Step(rows.view, narrowed))
    return replace(stage, steps=steps)


def close_sessions(stage: BatchStage, aggregation: exp.Select, window: WindowSpec,
                   sessions_view: str) -> BatchStage:
    """EMIT FINAL of SESSION windows, on a stage whose ``sessions_view`` is each kept record with
    its session as it stands after the micro-batch
    (:func:`metastore.planner.stages.replay_sessions`): narrow it to the sessions the
    micro-batch closes. Kafka Streams closes a session when stream time less the grace period
    and the gap passes its end (``close``): a micro-batch writes, per source partition, the
    sessions ending at or after the ``close`` before it (and at or after 0) and before the
    ``close`` after it, each once, with its time its end. Closing is judged per micro-batch: a
    session closed and then extended within one micro-batch is written once, extended (Kafka
    Streams writes it at its close, then again extended)."""
    gap = window.gap_ms or 0
    grace = window.grace_ms or 0
    steps = list(stage.steps)
    position = next(i for i, step in enumerate(steps) if step.view == sessions_view)
    alias = aggregated_alias(aggregation)
    items: list[exp.Expr] = [
        exp.alias_(exp.column("ROWPARTITION", table=alias, quoted=True), "p"),
        exp.alias_(exp.Anonymous(this="unix_millis", expressions=[
            exp.column(TS, table=alias, quoted=True)]), "t"),
        exp.alias_(exp.column(SENTINEL, table=alias, quoted=True), "sen")]
    seen = records_seen(aggregation, items, sessions_view, f"{sessions_view}_all")
    closes = (f"SELECT p, greatest(0, coalesce(max(IF(sen, NULL, t)) - {grace + gap}, 0)) AS "
              f"before, max(t) - {grace + gap} AS after FROM ({seen}) GROUP BY p")
    renamed = f"{sessions_view}_sessions"
    end = f"unix_millis(h.{quote(SESSION)}.`end`)"
    narrowed = (f"SELECT h.* FROM {quote(renamed)} AS h JOIN {quote(stage.view + '_closes')} "
                f"AS c ON h.ROWPARTITION = c.p WHERE {end} >= c.before AND {end} < c.after")
    steps[position:position + 1] = [replace(steps[position], view=renamed),
                                    Step(stage.view + "_closes", closes),
                                    Step(sessions_view, narrowed)]
    return replace(stage, steps=tuple(steps))
