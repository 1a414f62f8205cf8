"""Compile a persistent query into the Spark SQL of a Structured Streaming job.

A :class:`QueryPlan` is a list of :class:`Step` s, each registering a temporary view in the
query's own Spark session, and the final SELECT whose rows are the sink's Kafka records
(``key``, ``value`` and, for streams, ``headers``):

1. every stream read becomes a streaming Kafka source (``read_committed``, from the earliest
   offset the first time, from the checkpoint afterwards), decoded with
   :func:`metastore.spark.views.decode_select` plus the pseudo columns ``ROWTIME``,
   ``ROWPARTITION``, ``ROWOFFSET``, the event time (the ``TIMESTAMP`` column or the record's
   timestamp) and, for a windowed query, the ``window()`` each record falls into (for a
   windowed source, the window of its key); a table's changelog drops records without a key;
2. every table in a stream-table join is a *batch* Kafka read decoded to its latest row per key,
   which Spark re-plans, so re-reads up to the newest committed offset, at every micro-batch
   (a stream-static join);
3. the ksqlDB SELECT, transpiled with sqlglot to Spark SQL over those views, each output column
   cast to the sink column's type;
4. the sink encoding of :mod:`metastore.queries.encoding`.

Aggregations run in Spark's ``update`` output mode: each micro-batch writes the new value of
every key (and window) it changed, an upsert keyed by the GROUP BY key. What one streaming
SELECT cannot express, aggregating a table's changelog (an update takes a row out of its old
group) and SESSION windows (sessions merge), is a :class:`BatchStage`: batch SQL that runs per
micro-batch over its rows and the source topic read in batch, written with ``foreachBatch``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from sqlglot import exp

from metastore.catalog.analysis import Analysis, analyse
from metastore.catalog.image import Image
from metastore.catalog.model import DataSource, PersistentQuery
from metastore.functions import library as functions
from metastore.functions import sparksql
from metastore.functions.registry import UntranslatableError
from metastore.queries import encoding
from metastore.queries.exceptions import QueryRuntimeError
from metastore.queries.support import explain, runtime_problem
from metastore.spark.query import struct_access
from metastore.spark.types import quote, spark_type
from metastore.spark.views import decode_select
from metastore.sql import types as ty
from metastore.sql.parser import parse
from metastore.sql.statements import Query, SelectStatement, SourceKind, WindowSpec

TS = "__MS_TS"
WINDOW = "__MS_WINDOW"
SOURCE = "__MS_SOURCE"
WINDOW_START = "__MS_WINDOWSTART"
ROWTIME = "__MS_ROWTIME"
NULL_VALUE = "__MS_NULL_VALUE"
HEADERS = "__MS_HEADERS"
NULL_KEY = "__MS_NULL_KEY"
TABLE_FUNCTION = "__MS_TF"
RAW_KEY = "__MS_RAW_KEY"
SENTINEL = "__MS_SENTINEL"
WINDOW_END = "__MS_WINDOWEND"
TOUCHED = "__MS_TOUCHED"
SESSION = "__MS_SESSION"


@dataclass(frozen=True)
class Step:
    """Register ``view``: a Kafka read of ``topic`` (streaming or batch), or a SELECT."""

    view: str
    sql: str | None = None
    topic: str | None = None
    streaming: bool = True
    watermark_ms: int | None = None


@dataclass(frozen=True)
class BatchStage:
    """A query that runs once per micro-batch as batch SQL: the rows of the streaming
    ``source_sql`` a micro-batch brings are registered as ``view``, then ``steps`` and the plan's
    ``sql`` run over them and the result is written to the sink."""

    source_sql: str
    view: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class QueryPlan:
    query_id: str
    steps: tuple[Step, ...]
    sql: str
    output_mode: str
    topic: str
    source_topics: tuple[str, ...]
    batch: BatchStage | None = None


def parse_query(sql: str) -> Query:
    statements = parse(sql if sql.rstrip().endswith(";") else sql + ";")
    if len(statements) != 1 or not isinstance(statements[0], SelectStatement):
        raise QueryRuntimeError(f"not a SELECT: {sql[:200]}")
    return statements[0].query


def compile_query(query: PersistentQuery, image: Image) -> QueryPlan:
    """The Spark plan of ``query`` over the catalog of ``image``."""
    sink = image.source(query.sink)
    if sink is None:
        raise QueryRuntimeError(f"{query.query_id}: its sink {query.sink} is not in the catalog")
    analysis = analyse(parse_query(query.sql), image.sources, image.types, sink.name)
    problem = runtime_problem(analysis, sink)
    if problem is not None:
        raise QueryRuntimeError(f"{query.query_id}: {explain(problem)}")
    return _plan(query.query_id, analysis, sink, dict(query.config))


def _plan(query_id: str, analysis: Analysis, sink: DataSource,
          config: dict[str, object] | None = None) -> QueryPlan:
    """The plan of an analysed query the runtime supports (it rewrites the query's tree);
    ``config``: the query's ksqlDB settings, for the translation of its functions."""
    select = analysis.query.select
    assert isinstance(select, exp.Select)
    prefix = "q_" + re.sub(r"[^0-9a-zA-Z_]", "_", query_id).lower()
    steps: list[Step] = []
    stream_alias: str | None = None
    source_topics: list[str] = []
    changelog = analysis.reads[0].source.kind is SourceKind.TABLE and not analysis.joins
    window = analysis.windowing if analysis.windowed else None
    session = window if window is not None and window.kind == "SESSION" else None
    batch: BatchStage | None = None
    for index, read in enumerate(analysis.reads):
        source, alias = read.source, read.alias
        view = f"{prefix}_{index}"
        if source.kind is SourceKind.STREAM or changelog:
            stream_alias = stream_alias or alias
            source_topics.append(source.topic)
            steps += _stream_steps(source, view, None if session else analysis.windowing)
            if changelog and analysis.aggregate:
                batch = _changelog_stage(source, view)
                view = f"{view}_input"
            elif session is not None:
                batch = _session_stage(source, view)
                view = f"{view}_input"
        else:
            steps += [Step(f"{view}_raw", topic=source.topic, streaming=False),
                      Step(view, _table_select(source, quote(f"{view}_raw")))]
        read.table.replace(exp.Table(this=exp.to_identifier(view, quoted=True),
                                     alias=exp.TableAlias(this=exp.to_identifier(alias))))
    assert stream_alias is not None, "support admits only queries reading a stream"
    key_names = {c.name for c in sink.key_columns}
    source_keys = {c.name for c in analysis.reads[0].source.key_columns}
    items: list[exp.Expr] = []
    for name, expression in analysis.projection:
        item = expression.copy()
        if analysis.query.partition_by and not analysis.aggregate and name in key_names and any(
                column.name not in source_keys for column in item.find_all(exp.Column)):
            # ksqlDB computes a new key from the value: a tombstone has none to compute it from
            tombstone = exp.column(NULL_VALUE, table=stream_alias, quoted=True)
            item = exp.If(this=tombstone, true=exp.Null(), false=item)
        items.append(exp.alias_(item, name, quoted=True))
    windowed = analysis.windowed
    # a projection or filter of a windowed source keeps its records' windows in the sink's key
    source_window = analysis.window if not analysis.aggregate and not analysis.joins else None
    bounds = _Bounds(exp.column(WINDOW, table=stream_alias, quoted=True))
    if session is not None:  # each record's session, as Kafka Streams merges them
        bounds = _Bounds(exp.column(SESSION, table=stream_alias, quoted=True))
    rowtime: exp.Expr = exp.column("ROWTIME", table=stream_alias, quoted=True)
    if analysis.aggregate:  # an aggregate's record carries the newest input's time, as ksqlDB's
        rowtime = exp.Max(this=rowtime)
    items.append(exp.alias_(rowtime, ROWTIME, quoted=True))
    null_value: exp.Expr = exp.column(NULL_VALUE, table=stream_alias, quoted=True)
    having = select.args.get("having")
    if analysis.aggregate:  # and the headers of the newest input, as Kafka Streams carries them
        carried = exp.column(HEADERS, table=stream_alias, quoted=True)
        newest = exp.column("ROWOFFSET", table=stream_alias, quoted=True)
        items.append(exp.alias_(exp.func("max_by", carried, newest), HEADERS, quoted=True))
        _skip_ungroupable(select, null_value)
        if having is not None:  # a group HAVING rejects is deleted from the table, as in ksqlDB
            select.set("having", None)
            items.append(exp.alias_(exp.Not(this=exp.func(
                "coalesce", exp.Paren(this=having.this), exp.false())), NULL_VALUE, quoted=True))
    else:
        where = select.args.get("where")
        if changelog and where is not None:  # a table's row that fails the filter is deleted
            select.set("where", None)
            null_value = exp.Or(this=null_value, expression=exp.Not(this=exp.func(
                "coalesce", exp.Paren(this=where.this), exp.false())))
        items.append(exp.alias_(null_value.copy(), NULL_VALUE, quoted=True))
        items.append(exp.alias_(exp.column(HEADERS, table=stream_alias, quoted=True), HEADERS,
                                quoted=True))
        if select.args.get("where") is not None:  # a filter drops a tombstone, a projection keeps it
            select.where(exp.Not(this=exp.column(NULL_VALUE, table=stream_alias, quoted=True)),
                         copy=False)
    keeps_key = not (analysis.aggregate or analysis.joins or analysis.query.partition_by)
    if keeps_key:  # a record without a key keeps none, though its key columns read as NULLs
        items.append(exp.alias_(exp.column(NULL_KEY, table=stream_alias, quoted=True), NULL_KEY,
                                quoted=True))
    if windowed:
        group = select.args.get("group") or exp.Group(expressions=[])
        window_column: exp.Expr = exp.column(WINDOW, table=stream_alias, quoted=True)
        if session is not None:
            window_column = exp.column(SESSION, table=stream_alias, quoted=True)
        group.append("expressions", window_column)
        select.set("group", group)
        items.append(exp.alias_(bounds.start(), WINDOW_START, quoted=True))
        if session is not None:
            items.append(exp.alias_(bounds.end(), WINDOW_END, quoted=True))
            touched = exp.Max(this=exp.Cast(this=exp.column(SENTINEL, table=stream_alias,
                                                            quoted=True),
                                            to=exp.DataType.build("INT")))
            items.append(exp.alias_(touched, TOUCHED, quoted=True))
            if not any(item.alias_or_name == NULL_VALUE for item in items):
                items.append(exp.alias_(exp.false(), NULL_VALUE, quoted=True))
    elif not analysis.aggregate:
        items.append(exp.alias_(exp.column(SOURCE, table=stream_alias, quoted=True), SOURCE,
                                quoted=True))
        if source_window is not None:
            items.append(exp.alias_(bounds.start(), WINDOW_START, quoted=True))
            if source_window.kind == "SESSION":
                items.append(exp.alias_(bounds.end(), WINDOW_END, quoted=True))
    generated = _take_table_functions(items)
    select.set("expressions", items)
    _rewrite(select, stream_alias, config, bounds)
    if generated:
        _explode(select, generated, stream_alias)
    if batch is not None and session is None:
        _aggregate_touched_groups(select, stream_alias)
    inner = select.sql(dialect="spark", identify=True)
    if batch is not None and session is not None:
        batch = _replay_sessions(batch, select, session)
        batch, inner = _session_changes(batch, inner, select, sink)
    typed = [f"CAST({quote(c.name)} AS {spark_type(c.type)}) AS {quote(c.name)}"
             for c in sink.columns if c.role.is_key or c.role.value == "VALUE"]
    hidden = None if analysis.aggregate else SOURCE
    session_key = session is not None or (
        source_window is not None and source_window.kind == "SESSION")
    typed.append(f"{_sink_time(sink)} AS {quote(ROWTIME)}")
    deletes = not analysis.aggregate or having is not None or session is not None
    if deletes:
        typed.append(quote(NULL_VALUE))
    typed.append(quote(HEADERS))
    if keeps_key:
        typed.append(quote(NULL_KEY))
    if hidden is not None:
        typed.append(quote(hidden))
    if windowed or source_window is not None:
        typed.append(quote(WINDOW_START))
    if session_key:
        typed.append(quote(WINDOW_END))
    value = encoding.value_expression(sink)
    if deletes:
        value = f"CASE WHEN {quote(NULL_VALUE)} THEN NULL ELSE {value} END"
    headers = encoding.headers(quote(ROWTIME), quote(SOURCE) if hidden == SOURCE else None,
                               quote(HEADERS))
    key = encoding.key_expression(sink, quote(WINDOW_START) if windowed or source_window else None,
                                  quote(WINDOW_END) if session_key else None)
    if keeps_key:
        key = f"CASE WHEN {quote(NULL_KEY)} THEN NULL ELSE {key} END"
    records = [f"{key} AS key", f"{value} AS value", f"{headers} AS headers"]
    sql = (f"SELECT {', '.join(records)} FROM (SELECT {', '.join(typed)} FROM ({inner}) "
           "AS __ms_result) AS __ms_typed")
    if sink.timestamp_column is not None:  # ksqlDB drops a record its timestamp column rejects
        sql += f" WHERE {quote(ROWTIME)} IS NULL OR {quote(ROWTIME)} >= 0"
    return QueryPlan(query_id, tuple(steps), sql,
                     "update" if analysis.aggregate and batch is None else "append", sink.topic,
                     tuple(dict.fromkeys(source_topics)), batch)


def _take_table_functions(items: list[exp.Expr]) -> list[exp.Expr]:
    """Replace each table function call in the projection by the column its rows will be in;
    returns the calls, in order (the N-th call's rows are in ``__MS_TF<N>``)."""
    calls: list[exp.Expr] = []
    for item in items:
        for node in list(item.walk()):
            if functions.is_table_function(node):
                column = exp.column(f"{TABLE_FUNCTION}{len(calls)}", table=TABLE_FUNCTION,
                                    quoted=True)
                node.replace(column)
                calls.append(node)
    return calls


def _explode(select: exp.Select, calls: list[exp.Expr], stream_alias: str) -> None:
    """One row per element of the longest of the table functions' arrays, ksqlDB's zip."""
    arrays = []
    for call in calls:
        holder = exp.Paren(this=call)  # so the translation may replace the call itself
        _rewrite(holder, stream_alias)
        arrays.append(holder.this)
    padded = [exp.func("coalesce", array, exp.Array(expressions=[])) for array in arrays]
    generator = (exp.Explode(this=arrays[0]) if len(arrays) == 1  # a NULL array counts as empty
                 else exp.Inline(this=exp.ArraysZip(expressions=padded)))
    names = [exp.to_identifier(f"{TABLE_FUNCTION}{i}", quoted=True) for i in range(len(calls))]
    select.append("laterals", exp.Lateral(
        this=generator, view=True, outer=False,
        alias=exp.TableAlias(this=exp.to_identifier(TABLE_FUNCTION, quoted=True), columns=names)))


def _table_select(source: DataSource, raw_table: str) -> str:
    """A table's latest row per key (tombstones removed) with its pseudo columns, from a batch
    read of its topic."""
    pseudo = ("partition AS ROWPARTITION", "offset AS ROWOFFSET",
              "unix_millis(timestamp) AS ROWTIME", "value IS NULL AS __MS_TOMBSTONE",
              "key AS __MS_RAW_KEY")
    names = ", ".join(quote(c.name) for c in source.columns)
    return (f"SELECT {names}, ROWTIME, ROWPARTITION, ROWOFFSET FROM (SELECT *, row_number() OVER "
            "(PARTITION BY __MS_RAW_KEY ORDER BY ROWPARTITION DESC, ROWOFFSET DESC) AS __latest "
            f"FROM ({decode_select(source, raw_table, extra=pseudo)})) "
            "WHERE __latest = 1 AND NOT __MS_TOMBSTONE")


def _changelog_stage(source: DataSource, view: str) -> BatchStage:
    """Aggregating a table's changelog, where a row's update takes its old value out of its old
    group: each micro-batch re-aggregates the groups it touched over the table as it stands.

    The input (``<view>_input``) is the table's latest row per key up to the micro-batch (read
    from its topic, in batch) plus, marked as *sentinels*, every row version the micro-batch
    brings and each key's version before it: the groups of sentinels are the touched groups;
    sentinels name their group but count in no aggregate (:func:`_aggregate_touched_groups`), so
    a group a row left is aggregated without it (a COUNT of 0, as ksqlDB's undo leaves it). A
    version before the micro-batch has the time of the record that replaced it.
    """
    history = f"{view}_history"
    micro_batch = f"{view}_batch"
    names = [quote(c.name) for c in source.columns]
    carried = ["ROWPARTITION", "ROWOFFSET", quote(RAW_KEY), quote(NULL_VALUE), quote(HEADERS)]
    columns = ", ".join([*names, "ROWTIME", *carried])
    history_steps = [replace(step, streaming=False, watermark_ms=None)
                     for step in _stream_steps(source, history, None)]
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


def _session_stage(source: DataSource, view: str) -> BatchStage:
    """SESSION windows, whose sessions merge when an event bridges them: each micro-batch
    re-aggregates the stream's records up to it (read from its topic, in batch) into sessions,
    once with the micro-batch's records (marked as sentinels) and once without; see
    :func:`_replay_sessions` for how records find their sessions and
    :func:`_session_changes` for what is written."""
    history = f"{view}_history"
    micro_batch = f"{view}_batch"
    history_steps = [replace(step, streaming=False, watermark_ms=None)
                     for step in _stream_steps(source, history, None)]
    rows = (f"SELECT h.*, (e.__ms_first IS NOT NULL AND h.ROWOFFSET >= e.__ms_first) AS "
            f"{SENTINEL} FROM {quote(history)} AS h LEFT JOIN (SELECT ROWPARTITION AS __ms_p, "
            f"min(ROWOFFSET) AS __ms_first, max(ROWOFFSET) AS __ms_last FROM {quote(micro_batch)} "
            "GROUP BY ROWPARTITION) AS e ON h.ROWPARTITION = e.__ms_p "
            "WHERE e.__ms_last IS NULL OR h.ROWOFFSET <= e.__ms_last")
    earlier = f"SELECT * FROM {quote(view + '_input')} WHERE NOT {SENTINEL}"
    return BatchStage(
        source_sql=f"SELECT * FROM {quote(view)}", view=micro_batch,
        steps=(*history_steps, Step(f"{view}_input", rows), Step(f"{view}_earlier", earlier)))


DEFAULT_GRACE_MS = 24 * 60 * 60 * 1000
"""ksqlDB's grace period of a window without GRACE PERIOD: 24 hours less the window's size."""


def _replay_sessions(stage: BatchStage, aggregation: exp.Select, window: WindowSpec
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
    *history, rows, earlier = stage.steps
    all_rows, all_earlier = f"{rows.view}_all", f"{earlier.view}_all"
    gap = window.gap_ms or 0
    grace = window.grace_ms if window.grace_ms is not None else max(DEFAULT_GRACE_MS - gap, 0)
    retention = max(window.retention_ms or 0, gap + grace)
    group = aggregation.args.get("group")
    keys = [e for e in (group.expressions if group is not None else [])
            if not (isinstance(e, exp.Column) and e.name == SESSION)]
    source = aggregation.args.get("from_") or aggregation.args.get("from")
    assert isinstance(source, exp.From)
    alias = source.this.alias_or_name
    items: list[exp.Expr] = [exp.alias_(key.copy(), f"__ms_g{i}", quoted=True)
                             for i, key in enumerate(keys)]
    for column, name in (("ROWPARTITION", "p"), ("ROWOFFSET", "o")):
        items.append(exp.alias_(exp.column(column, table=alias, quoted=True), name))
    items.append(exp.alias_(exp.Anonymous(this="unix_millis", expressions=[
        exp.column(TS, table=alias, quoted=True)]), "t"))
    inputs = exp.Select(expressions=items)
    inputs.set("from_" if "from_" in aggregation.args else "from", source.copy())
    where = aggregation.args.get("where")
    if where is not None:
        inputs.set("where", where.copy())
    seen = inputs.sql(dialect="spark", identify=True)
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
        records = seen.replace(quote(rows.view), quote(read))
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
    steps = [*history, replace(rows, view=all_rows),
             Step(all_earlier, f"SELECT * FROM {quote(all_rows)} WHERE NOT {SENTINEL}")]
    pairs = ((rows.view, all_rows), (earlier.view, all_earlier))
    steps += [Step(f"{view}_assigned", assignment(read)) for view, read in pairs]
    steps += [Step(view, f"SELECT h.*, {session} FROM {quote(read)} AS h JOIN "
                         f"{quote(view + '_assigned')} AS w ON h.ROWPARTITION = w.__ms_p AND "
                         "h.ROWOFFSET = w.__ms_o") for view, read in pairs]
    return replace(stage, steps=tuple(steps))


def _session_changes(stage: BatchStage, aggregation: str, select: exp.Select,
                     sink: DataSource) -> tuple[BatchStage, str]:
    """What a micro-batch changes in a SESSION-windowed table: every session holding one of its
    records (its new value), and a tombstone for each earlier session of the same keys that is
    no longer one (merged into a larger session), as ksqlDB writes them."""
    input_view = stage.steps[-2].view
    earlier_view = stage.steps[-1].view
    after, before = f"{input_view}_sessions", f"{earlier_view}_sessions"
    earlier = aggregation.replace(quote(input_view), quote(earlier_view))
    names = [item.alias_or_name for item in select.expressions]
    keys = [c.name for c in sink.key_columns]
    same_key = " AND ".join(f"b.{quote(k)} <=> t.{quote(k)}" for k in keys) or "true"
    same_session = " AND ".join(
        [f"b.{quote(k)} <=> a.{quote(k)}" for k in keys]
        + [f"b.{quote(bound)} = a.{quote(bound)}" for bound in (WINDOW_START, WINDOW_END)])
    deleted = ", ".join(f"true AS {quote(n)}" if n == NULL_VALUE else f"b.{quote(n)}"
                        for n in names)
    changes = (f"SELECT * FROM {quote(after)} WHERE {quote(TOUCHED)} = 1 UNION ALL "
               f"SELECT {deleted} FROM {quote(before)} AS b LEFT SEMI JOIN (SELECT * FROM "
               f"{quote(after)} WHERE {quote(TOUCHED)} = 1) AS t ON {same_key} "
               f"LEFT ANTI JOIN {quote(after)} AS a ON {same_session}")
    steps = (*stage.steps, Step(after, aggregation), Step(before, earlier))
    return replace(stage, steps=steps), changes


def _aggregate_touched_groups(select: exp.Select, alias: str) -> None:
    """Keep only the groups a sentinel touched, and keep sentinels out of every aggregate
    (each Spark aggregate call gets ``FILTER (WHERE NOT sentinel)``); the result's time is the
    newest sentinel's."""
    sentinel = exp.column(SENTINEL, table=alias, quoted=True)
    for item in select.expressions:
        if item.alias_or_name in (ROWTIME, HEADERS):  # the newest sentinel's
            newest = item.this.copy()
            item.set("this", exp.Filter(this=newest, expression=exp.Where(this=sentinel.copy())))
            continue
        for node in list(item.walk()):
            if sparksql.is_aggregate_call(node):
                node.replace(exp.Filter(this=node.copy(), expression=exp.Where(
                    this=exp.Not(this=sentinel.copy()))))
    touched = exp.Max(this=exp.Cast(this=sentinel.copy(), to=exp.DataType.build("INT")))
    select.set("having", exp.Having(this=exp.EQ(this=touched, expression=exp.Literal.number(1))))


def _sink_time(sink: DataSource) -> str:
    """A sink record's timestamp: its TIMESTAMP column's, else the source record's ROWTIME."""
    column = sink.column(sink.timestamp_column) if sink.timestamp_column else None
    if column is None:
        return quote(ROWTIME)
    if column.type == ty.TIMESTAMP:
        return f"unix_millis({quote(column.name)})"
    return f"CAST({quote(column.name)} AS BIGINT)"


def _skip_ungroupable(select: exp.Select, null_value: exp.Expr) -> None:
    """ksqlDB's aggregations skip tombstones and rows any GROUP BY expression is NULL for."""
    conditions: list[exp.Expr] = [exp.Not(this=null_value)]
    group = select.args.get("group")
    for expression in group.expressions if group is not None else []:
        conditions.append(exp.Not(this=exp.Is(this=expression.copy(), expression=exp.Null())))
    for condition in conditions:
        select.where(condition, copy=False)


def _stream_steps(source: DataSource, view: str, window: WindowSpec | None) -> list[Step]:
    pseudo = ("partition AS ROWPARTITION", "offset AS ROWOFFSET",
              f"concat_ws('/', topic, CAST(partition AS STRING), CAST(offset AS STRING)) AS {SOURCE}",
              "timestamp AS __MS_KAFKA_TS", f"value IS NULL AS {NULL_VALUE}",
              f"key IS NULL AS {NULL_KEY}", f"key AS {RAW_KEY}",
              f"headers AS {HEADERS}", *([WINDOW] if source.window is not None else []))
    decoded = decode_select(source, quote(f"{view}_raw"), extra=pseudo)
    event_time = "__MS_KAFKA_TS"
    column = source.column(source.timestamp_column) if source.timestamp_column else None
    if column is not None:
        event_time = (f"timestamp_millis({quote(column.name)})" if column.type == ty.BIGINT
                      else quote(column.name))
    grace = window.grace_ms if window is not None else None
    bounds = ""
    if window is not None and window.size_ms is not None:
        size = f"'{window.size_ms} milliseconds'"
        slide = f", '{window.advance_ms} milliseconds'" if window.advance_ms else ""
        bounds = f", window({TS}, {size}{slide}) AS {WINDOW}"
    return [Step(f"{view}_raw", topic=source.topic),
            Step(f"{view}_decoded", f"SELECT *, {event_time} AS {TS} FROM ({decoded})",
                 watermark_ms=grace),
            Step(view, f"SELECT *, unix_millis({TS}) AS ROWTIME{bounds} FROM {quote(view + '_decoded')}")]


@dataclass(frozen=True)
class _Bounds:
    """Where a window's rows find its bounds: a struct column of TIMESTAMPs ``start`` and
    ``end`` (a time window's, a session's as replayed by :func:`_replay_sessions`, or a windowed
    source's, :func:`metastore.spark.views.decode_select`)."""

    window: exp.Expr

    def start(self) -> exp.Expr:
        return self._millis("start")

    def end(self) -> exp.Expr:
        return self._millis("end")

    def _millis(self, which: str) -> exp.Expr:
        field = exp.Dot(this=self.window.copy(), expression=exp.to_identifier(which))
        return exp.Anonymous(this="unix_millis", expressions=[field])


def _rewrite(select: exp.Expr, stream_alias: str, config: dict[str, object] | None = None,
             bounds: _Bounds | None = None) -> None:
    """ksqlDB expressions as Spark SQL with ksqlDB's meaning: every function call, array index
    and division through :func:`metastore.functions.library.to_spark`; window bounds and
    struct access as the query's views hold them."""

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name in ("WINDOWSTART",
                                                                             "WINDOWEND"):
            window = bounds or _Bounds(exp.column(WINDOW, table=stream_alias, quoted=True))
            return window.start() if node.name == "WINDOWSTART" else window.end()
        if isinstance(node, exp.JSONExtract):
            return struct_access(node)
        return node

    offset = exp.column("ROWOFFSET", table=stream_alias, quoted=True)
    context = functions.SparkContext(row_offset=offset, rewrite=rewrite, keep_undeclared=True,
                                     config=config or {})
    try:
        functions.to_spark(select, context)
    except UntranslatableError as error:
        raise QueryRuntimeError(explain(str(error))) from error
