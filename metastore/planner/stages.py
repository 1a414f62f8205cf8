"""Batch stages: queries one streaming SELECT cannot express, run per micro-batch as batch SQL
over the micro-batch's rows and the source topic read in batch (see
:class:`~metastore.planner.steps.BatchStage`): aggregating a table's changelog, SESSION
windows, and joining tables."""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from metastore.catalog.model import DataSource
from metastore.functions import sparksql
from metastore.planner.steps import (
    HEADERS,
    NULL_VALUE,
    RAW_KEY,
    ROWTIME,
    SENTINEL,
    SESSION,
    SOURCE,
    TOUCHED,
    TS,
    WINDOW_END,
    WINDOW_START,
    BatchStage,
    Step,
    stream_steps,
    table_select,
)
from metastore.spark.types import quote
from metastore.sql.statements import WindowSpec


def changelog_stage(source: DataSource, view: str) -> BatchStage:
    """Aggregating a table's changelog, where a row's update takes its old value out of its old
    group: each micro-batch re-aggregates the groups it touched over the table as it stands.

    The input (``<view>_input``) is the table's latest row per key up to the micro-batch (read
    from its topic, in batch) plus, marked as *sentinels*, every row version the micro-batch
    brings and each key's version before it: the groups of sentinels are the touched groups;
    sentinels name their group but count in no aggregate (:func:`aggregate_touched_groups`), so
    a group a row left is aggregated without it (a COUNT of 0, as ksqlDB's undo leaves it). A
    version before the micro-batch has the time of the record that replaced it.

    The plan of a query that starts at the table's end (``auto.offset.reset`` latest), or whose
    checkpoint was started by this stage; others read the same input from keyed state
    (:mod:`metastore.planner.table_groups`).
    """
    history = f"{view}_history"
    micro_batch = f"{view}_batch"
    names = [quote(c.name) for c in source.columns]
    carried = ["ROWPARTITION", "ROWOFFSET", quote(RAW_KEY), quote(NULL_VALUE), quote(HEADERS)]
    columns = ", ".join([*names, "ROWTIME", *carried])
    history_steps = [replace(step, streaming=False, watermark_ms=None, observed=None)
                     for step in stream_steps(source, history, None)]
    current = (
        f"SELECT {columns} FROM (SELECT h.*, row_number() OVER (PARTITION BY h.{quote(RAW_KEY)} "
        f"ORDER BY h.ROWOFFSET DESC) AS __ms_n FROM {quote(history)} AS h LEFT JOIN (SELECT "
        f"ROWPARTITION AS __ms_p, max(ROWOFFSET) AS __ms_o FROM {quote(micro_batch)} GROUP BY "
        "ROWPARTITION) AS e ON h.ROWPARTITION = e.__ms_p WHERE h.{raw} IS NOT NULL AND "
        "(e.__ms_o IS NULL OR h.ROWOFFSET <= e.__ms_o)) WHERE __ms_n = 1"
    ).replace("{raw}", quote(RAW_KEY))
    earlier = ", ".join([*names, "__ms_at AS ROWTIME", *carried])
    previous = (
        f"SELECT {earlier} FROM (SELECT h.*, f.__ms_at, row_number() OVER (PARTITION BY "
        f"h.{quote(RAW_KEY)} ORDER BY h.ROWOFFSET DESC) AS __ms_n FROM {quote(history)} AS h "
        f"JOIN (SELECT {quote(RAW_KEY)} AS __ms_k, ROWPARTITION AS __ms_p, min(ROWOFFSET) AS "
        f"__ms_o, min_by(ROWTIME, ROWOFFSET) AS __ms_at FROM {quote(micro_batch)} WHERE "
        f"{quote(RAW_KEY)} IS NOT NULL GROUP BY {quote(RAW_KEY)}, ROWPARTITION) AS f ON "
        f"h.{quote(RAW_KEY)} = f.__ms_k AND h.ROWPARTITION = f.__ms_p AND h.ROWOFFSET < f.__ms_o"
        ") WHERE __ms_n = 1")
    rows = (f"SELECT {columns}, false AS {SENTINEL} FROM {quote(view + '_current')} UNION ALL "
            f"SELECT {columns}, true AS {SENTINEL} FROM {quote(micro_batch)} WHERE "
            f"{quote(RAW_KEY)} IS NOT NULL UNION ALL "
            f"SELECT {columns}, true AS {SENTINEL} FROM {quote(view + '_previous')}")
    return BatchStage(
        source_sql=f"SELECT * FROM {quote(view)}", view=micro_batch,
        steps=(*history_steps, Step(f"{view}_current", current),
               Step(f"{view}_previous", previous), Step(f"{view}_input", rows)))


def replayed_stream(source: DataSource, view: str, window: WindowSpec | None) -> BatchStage:
    """A stage whose input (``<view>_input``) is the stream's records up to the micro-batch
    (its topic read in batch; with ``window``, a row per window of each record's time), those
    the micro-batch brings marked as sentinels: what a stage that replays the stream in offset
    order starts from."""
    history = f"{view}_history"
    micro_batch = f"{view}_batch"
    history_steps = [replace(step, streaming=False, watermark_ms=None, observed=None)
                     for step in stream_steps(source, history, window)]
    rows = (f"SELECT h.*, (e.__ms_first IS NOT NULL AND h.ROWOFFSET >= e.__ms_first) AS "
            f"{SENTINEL} FROM {quote(history)} AS h LEFT JOIN (SELECT ROWPARTITION AS __ms_p, "
            f"min(ROWOFFSET) AS __ms_first, max(ROWOFFSET) AS __ms_last FROM {quote(micro_batch)} "
            "GROUP BY ROWPARTITION) AS e ON h.ROWPARTITION = e.__ms_p "
            "WHERE e.__ms_last IS NULL OR h.ROWOFFSET <= e.__ms_last")
    return BatchStage(source_sql=f"SELECT * FROM {quote(view)}", view=micro_batch,
                      steps=(*history_steps, Step(f"{view}_input", rows)))


def records_seen(aggregation: exp.Select, items: list[exp.Expr], reads: str, instead: str
                 ) -> str:
    """``items`` of the rows ``aggregation`` aggregates (its FROM, JOINs, LATERAL VIEWs and
    WHERE, so the rows its skipped rows and filter leave), read from view ``instead`` where it
    reads ``reads``."""
    seen = exp.Select(expressions=items)
    key = "from_" if "from_" in aggregation.args else "from"
    seen.set(key, aggregation.args[key].copy())
    for join in aggregation.args.get("joins") or []:
        seen.append("joins", join.copy())
    for lateral in aggregation.args.get("laterals") or []:  # a keyed join's tables
        seen.append("laterals", lateral.copy())
    where = aggregation.args.get("where")
    if where is not None:
        seen.set("where", where.copy())
    return seen.sql(dialect="spark", identify=True).replace(quote(reads), quote(instead))


def aggregated_alias(aggregation: exp.Select) -> str:
    """The alias of the stream an aggregation reads (its FROM)."""
    source = aggregation.args.get("from_") or aggregation.args.get("from")
    assert isinstance(source, exp.From)
    return str(source.this.alias_or_name)


def session_stage(source: DataSource, view: str, earlier: bool = True) -> BatchStage:
    """SESSION windows, whose sessions merge when an event bridges them: each micro-batch
    re-aggregates the stream's records up to it (read from its topic, in batch) into sessions,
    with the micro-batch's records (marked as sentinels) and, ``earlier``, also without them
    (``<view>_earlier``: what was written before); see :func:`replay_sessions` for how records
    find their sessions and :func:`session_changes` for what is written."""
    stage = replayed_stream(source, view, None)
    if not earlier:
        return stage
    before = f"SELECT * FROM {quote(view + '_input')} WHERE NOT {SENTINEL}"
    return replace(stage, steps=(*stage.steps, Step(f"{view}_earlier", before)))


DEFAULT_GRACE_MS = 24 * 60 * 60 * 1000
"""ksqlDB's grace period of a window without GRACE PERIOD: 24 hours less the window's size."""


def session_timing(window: WindowSpec) -> tuple[int, int, int]:
    """A SESSION window's gap, grace period (ksqlDB's default without GRACE PERIOD) and how long
    its store keeps a session after its end (the gap plus the grace, unless RETENTION is
    longer), in milliseconds."""
    gap = window.gap_ms or 0
    grace = window.grace_ms if window.grace_ms is not None else max(DEFAULT_GRACE_MS - gap, 0)
    return gap, grace, max(window.retention_ms or 0, gap + grace)


def replay_sessions(stage: BatchStage, aggregation: exp.Select, window: WindowSpec
                     ) -> BatchStage:
    """Assign records to sessions as Kafka Streams' session aggregation does, replaying each
    key's records in order (an ``aggregate`` over them): a record's session is itself merged with
    the sessions of its key it reaches within the gap (both ends inclusive), sessions the store
    has expired (ended ``retention`` before stream time, retention being the gap plus the grace
    period unless RETENTION is longer) not among them; the record is dropped as late when that
    session ends before stream time less the grace period and the gap. Stream time at a record
    is the newest timestamp the aggregation has seen in its partition up to it (a GROUP BY that
    repartitions in ksqlDB counts it per source partition here).

    The records (``<view>_input``, sentinels marked) become ``<view>_all``; ``<view>_input`` is
    those kept with their session (``__MS_SESSION``: TIMESTAMPs ``start``, ``end``) as it stands
    after them, ``<view>_earlier`` those before the micro-batch with their session before it."""
    earlier: Step | None = None
    if stage.steps[-1].view.endswith("_earlier"):
        *history, rows, earlier = stage.steps
    else:
        *history, rows = stage.steps
    gap, grace, retention = session_timing(window)
    group = aggregation.args.get("group")
    keys = [e for e in (group.expressions if group is not None else [])
            if not (isinstance(e, exp.Column) and e.name == SESSION)]
    alias = aggregated_alias(aggregation)
    items: list[exp.Expr] = [exp.alias_(key.copy(), f"__ms_g{i}", quoted=True)
                             for i, key in enumerate(keys)]
    for column, name in (("ROWPARTITION", "p"), ("ROWOFFSET", "o")):
        items.append(exp.alias_(exp.column(column, table=alias, quoted=True), name))
    items.append(exp.alias_(exp.Anonymous(this="unix_millis", expressions=[
        exp.column(TS, table=alias, quoted=True)]), "t"))
    reaches = f"x.e >= r.t - {gap} AND x.s <= r.t + {gap} AND x.e > r.st - {retention}"
    hit = f"filter(a.s, x -> {reaches})"
    first = f"least(r.t, array_min(transform({hit}, x -> x.s)))"
    last = f"greatest(r.t, array_max(transform({hit}, x -> x.e)))"
    replay = (
        "aggregate(__ms_records, named_struct('s', CAST(array() AS ARRAY<STRUCT<s: BIGINT, "
        "e: BIGINT>>), 'd', CAST(array() AS ARRAY<STRUCT<p: INT, o: BIGINT>>)), (a, r) -> "
        f"IF({last} < r.st - {grace + gap}, named_struct('s', a.s, 'd', "
        "concat(a.d, array(named_struct('p', r.p, 'o', r.o)))), "
        f"named_struct('s', concat(filter(a.s, x -> NOT ({reaches})), "
        f"array(named_struct('s', {first}, 'e', {last}))), 'd', a.d)))")
    group_keys = ", ".join(f"__ms_g{i}" for i in range(len(keys))) or "true"

    def assignment(read: str) -> str:
        records = records_seen(aggregation, items, rows.view, read)
        timed = ("SELECT *, max(t) OVER (PARTITION BY p ORDER BY o ROWS BETWEEN UNBOUNDED "
                 f"PRECEDING AND CURRENT ROW) AS st FROM ({records})")
        replayed = (f"SELECT __ms_records, {replay} AS __ms_state FROM (SELECT array_sort("
                    "collect_list(named_struct('p', p, 'o', o, 't', t, 'st', st))) AS "
                    f"__ms_records FROM ({timed}) GROUP BY {group_keys})")
        return ("SELECT inline(transform(filter(__ms_records, r -> NOT array_contains("
                "__ms_state.d, named_struct('p', r.p, 'o', r.o))), r -> named_struct("
                "'__ms_p', r.p, '__ms_o', r.o, '__ms_w', element_at(filter(__ms_state.s, "
                f"x -> x.s <= r.t AND r.t <= x.e), 1)))) FROM ({replayed})")

    session = (f"named_struct('start', timestamp_millis(w.__ms_w.s), 'end', "
               f"timestamp_millis(w.__ms_w.e)) AS {SESSION}")
    all_rows = f"{rows.view}_all"
    steps = [*history, replace(rows, view=all_rows)]
    pairs = [(rows.view, all_rows)]
    if earlier is not None:
        all_earlier = f"{earlier.view}_all"
        steps.append(Step(all_earlier, f"SELECT * FROM {quote(all_rows)} WHERE NOT {SENTINEL}"))
        pairs.append((earlier.view, all_earlier))
    steps += [Step(f"{view}_assigned", assignment(read)) for view, read in pairs]
    steps += [Step(view, f"SELECT h.*, {session} FROM {quote(read)} AS h JOIN "
                         f"{quote(view + '_assigned')} AS w ON h.ROWPARTITION = w.__ms_p AND "
                         "h.ROWOFFSET = w.__ms_o") for view, read in pairs]
    return replace(stage, steps=tuple(steps))


def session_changes(stage: BatchStage, aggregation: str, select: exp.Select,
                     sink: DataSource) -> tuple[BatchStage, str]:
    """What a micro-batch changes in a SESSION-windowed table: every session holding one of its
    records (its new value), and a tombstone for each earlier session of the same keys that is
    no longer one (merged into a larger session), as ksqlDB writes them."""
    input_view = stage.steps[-2].view
    earlier_view = stage.steps[-1].view
    after, before = f"{input_view}_sessions", f"{earlier_view}_sessions"
    touched = touched_sessions(input_view)
    earlier = aggregation.replace(quote(input_view), quote(earlier_view))
    names = [item.alias_or_name for item in select.expressions]
    keys = [c.name for c in sink.key_columns]
    same_key = " AND ".join(f"b.{quote(k)} <=> t.{quote(k)}" for k in keys) or "true"
    same_session = " AND ".join(
        [f"b.{quote(k)} <=> a.{quote(k)}" for k in keys]
        + [f"b.{quote(bound)} = a.{quote(bound)}" for bound in (WINDOW_START, WINDOW_END)])
    deleted = ", ".join(f"true AS {quote(n)}" if n == NULL_VALUE else f"b.{quote(n)}"
                        for n in names)
    changes = (f"SELECT {', '.join(quote(n) for n in names)} FROM {quote(touched)} UNION ALL "
               f"SELECT {deleted} FROM {quote(before)} AS b LEFT SEMI JOIN {quote(touched)} "
               f"AS t ON {same_key} LEFT ANTI JOIN {quote(after)} AS a ON {same_session}")
    steps = (*stage.steps, Step(after, aggregation),
             Step(touched, f"SELECT * FROM {quote(after)} WHERE {quote(TOUCHED)} = 1"),
             Step(before, earlier))
    return replace(stage, steps=steps), changes


def touched_sessions(input_view: str) -> str:
    """The view of the sessions a micro-batch's records changed, each with its new value (the
    rows :func:`session_changes` writes, but the tombstones of the sessions it merged away), of
    a stage reading ``input_view``."""
    return f"{input_view}_sessions_touched"


def aggregate_touched_groups(select: exp.Select, alias: str) -> None:
    """Keep only the groups a sentinel touched, and keep sentinels out of every aggregate
    (each Spark aggregate call gets ``FILTER (WHERE NOT sentinel)``); the result's time is the
    newest sentinel's."""
    sentinel = exp.column(SENTINEL, table=alias, quoted=True)
    for item in select.expressions:
        if item.alias_or_name in (ROWTIME, HEADERS):  # the newest sentinel's
            newest = item.this.copy()
            item.set("this", exp.Filter(this=newest, expression=exp.Where(this=sentinel.copy())))
            continue
        leave_out_sentinels(item, alias)
    touched = exp.Max(this=exp.Cast(this=sentinel.copy(), to=exp.DataType.build("INT")))
    select.set("having", exp.Having(this=exp.EQ(this=touched, expression=exp.Literal.number(1))))


def leave_out_sentinels(item: exp.Expr, alias: str) -> None:
    """Give each aggregate call inside ``item`` (a SELECT item) without a FILTER ``FILTER
    (WHERE NOT sentinel)``, the sentinel of the rows ``alias`` names."""
    for node in list(item.walk()):
        if sparksql.is_aggregate_call(node) and not isinstance(node.parent, exp.Filter):
            node.replace(exp.Filter(this=node.copy(), expression=exp.Where(
                this=exp.Not(this=exp.column(SENTINEL, table=alias, quoted=True)))))


JOIN_KEY = "__MS_JOINKEY"
"""A table-table join's key value, on the result's rows and on the changes of a micro-batch."""
SIDE = "__MS_SIDE"
"""Which table of a join a change is of (its index, in the order the query names them)."""


def table_join_stage(tables: list[tuple[DataSource, str, str]], prefix: str) -> BatchStage:
    """Joining tables on their primary keys, whose rows change and leave: each micro-batch
    joins again, over every table as it stands after the micro-batch (latest row per key read
    from its topic, in batch), the keys its changes touched; a touched key without a result
    row is written as a tombstone (:func:`table_join_changes`).

    ``tables``: each joined table with its view name (what the query's FROM and JOINs read) and
    its key column. The streaming input is every table's changelog, as (key, time) changes."""
    changes: list[str] = []
    steps: list[Step] = []
    for index, (source, view, key_column) in enumerate(tables):
        stream = f"{prefix}_changes_{index}"
        steps.append(Step(f"{view}_raw", topic=source.topic, streaming=False))
        steps.append(Step(view, table_select(source, quote(f"{view}_raw"))))
        changes.append(f"SELECT {quote(key_column)} AS {JOIN_KEY}, ROWTIME, {SOURCE}, "
                       f"{index} AS {SIDE} FROM {quote(stream)} WHERE {quote(RAW_KEY)} IS NOT NULL")
    return BatchStage(source_sql=" UNION ALL ".join(changes), view=f"{prefix}_changes",
                      steps=tuple(steps))


def touched_keys(changes: str) -> str:
    """The join keys a micro-batch's changes touched (a primary-key join: the changed rows'
    keys), with the newest change's time and source offset."""
    return (f"SELECT {JOIN_KEY}, max(ROWTIME) AS __ms_t, max({SOURCE}) AS __ms_s FROM "
            f"{quote(changes)} GROUP BY {JOIN_KEY}")


def touched_by_foreign_key(changes: str, left: tuple[str, str, str], right: tuple[str, str],
                           on: str) -> str:
    """The result keys (the left table's) a foreign-key join's micro-batch touched: the
    changed left rows' keys, the keys of the left rows whose foreign key names a changed
    right row (found with the join's own ON condition, the right table's key standing for
    itself), and the changed rows' keys of the tables joined after it (ksqlDB joins them on
    the result's key, the left table's). ``left``: the left table's view, alias and key
    column; ``right``: the right table's alias and key column."""
    view, alias, key = left
    right_alias, right_key = right
    changed = (f"SELECT {JOIN_KEY} AS {quote(right_key)}, ROWTIME, {SOURCE} FROM "
               f"{quote(changes)} WHERE {SIDE} = 1")
    referencing = (f"SELECT {quote(alias)}.{quote(key)} AS {JOIN_KEY}, "
                   f"{quote(right_alias)}.ROWTIME, {quote(right_alias)}.{SOURCE} FROM "
                   f"{quote(view)} AS {quote(alias)} JOIN ({changed}) AS {quote(right_alias)} "
                   f"ON {on}")
    both = (f"SELECT {JOIN_KEY}, ROWTIME, {SOURCE} FROM {quote(changes)} WHERE {SIDE} <> 1 "
            f"UNION ALL {referencing}")
    return (f"SELECT {JOIN_KEY}, max(ROWTIME) AS __ms_t, max({SOURCE}) AS __ms_s FROM "
            f"({both}) GROUP BY {JOIN_KEY}")


def table_join_changes(inner: str, columns: list[str], keys: list[str], touched: str) -> str:
    """The records a table-table join writes for a micro-batch: the result rows (``inner``,
    with ``__MS_JOINKEY``) of the keys the micro-batch touched (``touched``: key, time,
    source), and a tombstone for each touched key without one. ``columns``: the result's
    columns, in order; ``keys``: those that are the result's key (the join key, in a
    tombstone)."""
    tombstone = []
    for name in columns:
        if name in keys:
            value = f"t.{JOIN_KEY}"
        elif name == ROWTIME:
            value = "t.__ms_t"
        elif name == SOURCE:
            value = "t.__ms_s"
        elif name == NULL_VALUE:
            value = "true"
        else:
            value = f"r.{quote(name)}"  # NULL: no result row
        tombstone.append(f"{value} AS {quote(name)}")
    listed = ", ".join(  # the newest of the rows joined and the change (Kafka Streams' max)
        f"greatest(r.{quote(name)}, t.__ms_t) AS {quote(name)}" if name == ROWTIME
        else f"r.{quote(name)}" for name in columns)
    return (f"SELECT {listed} FROM ({inner}) AS r JOIN ({touched}) AS t ON "
            f"r.{JOIN_KEY} <=> t.{JOIN_KEY} UNION ALL SELECT {', '.join(tombstone)} FROM "
            f"({touched}) AS t LEFT JOIN ({inner}) AS r ON r.{JOIN_KEY} <=> t.{JOIN_KEY} "
            f"WHERE r.{JOIN_KEY} IS NULL")
