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
2. every table a stream joins is its changelog, read as a stream, and the join's table side is
   keyed state (:mod:`metastore.queries.table_state`), tables joined after stream-stream joins
   too (over the joined records, :mod:`metastore.queries.joined_rows`); a table joined before
   a stream-stream join, under a windowed aggregation of one, or under an EMIT FINAL or SESSION
   stage is a *batch* Kafka read of every version of its rows (each valid from its time until
   its key's next version), which Spark re-plans, so re-reads, at every micro-batch (a
   stream-static join); a stream record joins the version valid at its time;
3. the ksqlDB SELECT, transpiled with sqlglot to Spark SQL over those views, each output column
   cast to the sink column's type; a stream-stream join bounded by its WITHIN and watermarked by
   its window and GRACE PERIOD (one whose unmatched records Spark writes, by its grace:
   :func:`_watermark`), or, an outer one without GRACE PERIOD, the UNION ALL of
   :mod:`metastore.queries.outer_at_once`;
4. the sink encoding of :mod:`metastore.queries.encoding`.

Aggregations run in Spark's ``update`` output mode: each micro-batch writes the new value of
every key (and window) it changed, an upsert keyed by the GROUP BY key. What one streaming
SELECT cannot express is a :class:`BatchStage`: batch SQL that runs per micro-batch over its
rows and the source topics read in batch up to it, written with ``foreachBatch``: aggregating a
table's changelog (an update takes a row out of its old group; the rows and groups are keyed
state, :mod:`metastore.queries.table_groups`, so the stage reads no topic), SESSION windows
(sessions merge) and EMIT FINAL (:mod:`metastore.queries.final_windows`). An aggregation of a
stream-stream join aggregates the join's rows, a view of their own
(:mod:`metastore.queries.joined_rows`). A table-table join
whose checkpoint predates keyed table state re-joins in a stage too
(:mod:`metastore.queries.stages`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from sqlglot import exp

from metastore.catalog import overrides
from metastore.catalog.analysis import Analysis, analyse
from metastore.catalog.image import Image
from metastore.catalog.joins import join_type
from metastore.catalog.model import DataSource, PersistentQuery
from metastore.functions import library as functions
from metastore.functions.registry import UntranslatableError
from metastore.queries import encoding
from metastore.queries.exceptions import QueryRuntimeError, UnsupportedByRuntimeError
from metastore.queries.final_windows import (
    close_sessions,
    final_stage,
    final_window,
    keyed_final,
    replay_final,
)
from metastore.queries.joined_rows import JOINED, split_stream_joins
from metastore.queries.outer_at_once import (
    at_once_join,
    keyed_unmatched,
    stream_join_windows,
    union_sql,
)
from metastore.queries.session_state import keyed_sessions
from metastore.queries.stages import (
    JOIN_KEY,
    aggregate_touched_groups,
    changelog_stage,
    replay_sessions,
    session_changes,
    session_stage,
    table_join_changes,
    table_join_stage,
    touched_by_foreign_key,
    touched_keys,
)
from metastore.queries.steps import (
    HEADERS,
    HEADERS_TYPE,
    NULL_KEY,
    NULL_VALUE,
    ORDER,
    ROWTIME,
    SENTINEL,
    SESSION,
    SOURCE,
    TABLE_FUNCTION,
    TOUCHED,
    TS,
    VALID_FROM,
    VALID_UNTIL,
    WINDOW,
    WINDOW_END,
    WINDOW_START,
    BatchStage,
    QueryPlan,
    Step,
    formatted_time,
    stream_steps,
    table_versions_select,
)
from metastore.queries.support import explain, runtime_problem
from metastore.queries.table_groups import aggregate_changelog
from metastore.queries.table_state import (
    AT,
    TABLES,
    JoinedTable,
    join_changelog,
    join_tables,
    join_tables_on_foreign_key,
    join_tables_on_keys,
)
from metastore.queries.table_state import JOIN_KEY as TABLE_JOIN_KEY
from metastore.spark.query import struct_access
from metastore.spark.types import quote, spark_type, string_literal
from metastore.sql import types as ty
from metastore.sql.parser import parse
from metastore.sql.statements import JoinWindow, Query, SelectStatement, SourceKind

DEFAULT_JOIN_GRACE_MS = 24 * 60 * 60 * 1000
"""ksqlDB's grace of a stream-stream join without GRACE PERIOD."""


def parse_query(sql: str) -> Query:
    statements = parse(sql if sql.rstrip().endswith(";") else sql + ";")
    if len(statements) != 1 or not isinstance(statements[0], SelectStatement):
        raise QueryRuntimeError(f"not a SELECT: {sql[:200]}")
    return statements[0].query


def compile_query(query: PersistentQuery, image: Image, *, table_state: bool = True,
                  stream_state: bool = True) -> QueryPlan:
    """The Spark plan of ``query`` over the catalog of ``image``; ``table_state=False`` joins
    tables by re-reading them, ``stream_state=False`` replays its streams for SESSION and EMIT
    FINAL windows and for the unmatched records of an outer stream-stream join (the plans of a
    checkpoint started before that state was keyed, see
    :meth:`metastore.queries.checkpoints.CheckpointDir.holds_table_state` and
    :meth:`~metastore.queries.checkpoints.CheckpointDir.holds_stream_state`)."""
    sink = image.source(query.sink)
    if sink is None:
        raise QueryRuntimeError(f"{query.query_id}: its sink {query.sink} is not in the catalog")
    config: dict[str, object] = dict(query.config)
    analysis = analyse(parse_query(query.sql), image.sources, image.types, sink.name,
                       new_planner=overrides.new_query_planner(config),
                       target=sink.columns if query.kind == "INSERT" else None)
    problem = runtime_problem(analysis, sink)
    if problem is not None:
        raise QueryRuntimeError(f"{query.query_id}: {explain(problem)}")
    return _plan(query.query_id, analysis, sink, config, table_state=table_state,
                 stream_state=stream_state)


def compile_push(query_id: str, analysis: Analysis, config: dict[str, object]) -> QueryPlan:
    """The plan of a push query (``SELECT ... EMIT CHANGES``) from its transient analysis
    (:func:`metastore.catalog.pull_queries.check_select`), which it rewrites: the same plan as
    a persistent query's, but its SQL yields the result's columns, in SELECT order, and
    :data:`~metastore.queries.steps.NULL_VALUE` (a table's row deleted), not Kafka records. The
    query's LIMIT is taken off (the caller stops at it)."""
    analysis.query.select.set("limit", None)
    window = analysis.query.window
    if window is not None and window.kind == "SESSION":
        raise UnsupportedByRuntimeError(explain("SESSION windows are not supported in push "
                                                "queries"))
    if analysis.query.emit_final:  # its stage replays the stream from its first record
        raise UnsupportedByRuntimeError(explain("EMIT FINAL is not supported in push queries"))
    result = DataSource(name=query_id, kind=analysis.kind, columns=analysis.columns, topic="",
                        key_format="JSON", value_format="JSON", partitions=None, statement="")
    problem = runtime_problem(analysis, result)
    if problem is not None:
        raise UnsupportedByRuntimeError(explain(problem))
    plan = _plan(query_id, analysis, result, config, transient=True)
    return replace(plan, earliest=overrides.offset_reset(config) == "earliest")


def _plan(query_id: str, analysis: Analysis, sink: DataSource,
          config: dict[str, object] | None = None, transient: bool = False,
          table_state: bool = True, stream_state: bool = True) -> QueryPlan:
    """The plan of an analysed query the runtime supports (it rewrites the query's tree);
    ``config``: the query's ksqlDB settings, for the translation of its functions;
    ``transient``: the plan's rows are the query's result, not records of ``sink``."""
    select = analysis.query.select
    assert isinstance(select, exp.Select)
    prefix = "q_" + re.sub(r"[^0-9a-zA-Z_]", "_", query_id).lower()
    steps: list[Step] = []
    stream_alias: str | None = None
    source_topics: list[str] = []
    changelog = analysis.reads[0].source.kind is SourceKind.TABLE and not analysis.joins
    window = analysis.windowing if analysis.windowed else None
    session = window if window is not None and window.kind == "SESSION" else None
    if session is not None and analysis.query.emit_final:
        session = final_window(session)
    final = window if window is not None and session is None and analysis.query.emit_final \
        else None
    batch: BatchStage | None = None
    windows = stream_join_windows(analysis)
    stream_aliases: list[str] = []
    table_join = analysis.reads[0].source.kind is SourceKind.TABLE and bool(analysis.joins)
    versioned: list[int] = []
    joined_tables: list[tuple[DataSource, str, str]] = []
    at_once = at_once_join(analysis, windows)
    outer_joins = set() if at_once is not None else _outer_joins(analysis, windows)
    batch_views: dict[str, str] = {}
    stream_views: dict[str, str] = {}  # each stream's streaming view, by alias
    sessions_view = ""  # what a SESSION aggregation reads
    # its sessions are keyed state over the stream in session_stream (EMIT FINAL's replay the
    # stream: a session closes by stream time, which records of other keys move)
    sessions_keyed = session is not None and not analysis.query.emit_final and stream_state
    session_stream = ""
    # and an EMIT FINAL's open windows over the stream in final_stream
    final_stream = ""
    keyed: list[JoinedTable] = []  # tables joined as keyed state
    stream_view = ""  # the first stream's view
    # an EMIT FINAL's keyed windows read the keyed joins' records; its replay, the stream's
    keys_tables = table_state and _joins_keyed_state(analysis) and (final is None or stream_state)
    keyed_rows = table_join and table_state
    # an aggregation of a table-table join aggregates the join's rows as a table's changelog
    aggregated_join = keyed_rows and analysis.aggregate
    # an aggregation of a stream-stream join aggregates the join's rows, a view of their own,
    # and tables joined after stream-stream joins join those rows as keyed state
    streams = _leading_streams(analysis) if windows else 0
    tables_after = bool(windows) and table_state and session is None and final is None and all(
        read.source.kind is SourceKind.TABLE for read in analysis.reads[streams:]) and (
        streams < len(analysis.reads)) and not (analysis.aggregate and analysis.windowed)
    aggregated_streams = bool(windows) and analysis.aggregate
    split_streams = aggregated_streams or tables_after
    # the sources the stream-stream join half of a split query joins: the leading streams, or
    # every source where its tables are read in batch (a table joined before a stream)
    joined_reads = streams if tables_after else len(analysis.reads)
    if table_join and analysis.aggregate and not table_state:
        raise QueryRuntimeError("an aggregation of a table-table join needs keyed table state")
    # a persistent table aggregation's rows and groups are keyed state unless it starts at the
    # table's end (the state would lack the rows before it, which the batch stage reads); a
    # push query (from the end by default) keeps the batch stage
    groups_keyed = (table_state and not transient
                    and overrides.offset_reset(config or {}) != "latest")
    fail = overrides.fails_on_deserialization_error(config or {})
    changelog_view = ""  # a table aggregation's changelog, when its groups are keyed state
    join_laterals: list[exp.Lateral] = []  # how it reads a joined row's tables, if it is a join
    for index, read in enumerate(analysis.reads):
        source, alias = read.source, read.alias
        view = f"{prefix}_{index}"
        if table_join:  # its changelog triggers micro-batches; the stage reads it as it stands
            stream_alias = stream_alias or alias
            stream_aliases.append(alias)
            source_topics.append(source.topic)
            steps += stream_steps(source, f"{prefix}_changes_{index}", None, fail_on_error=fail)
            joined_tables.append((source, view, source.key_columns[0].name))
        elif source.kind is SourceKind.STREAM or changelog:
            stream_view = stream_view or view
            stream_alias = stream_alias or alias
            stream_aliases.append(alias)
            source_topics.append(source.topic)
            # a stream joined with tables as keyed state falls into windows after the join
            steps += stream_steps(source, view, None if session or final or keys_tables
                                  or split_streams else analysis.windowing,
                                  _watermark(windows, index, outer_joins) if windows else None,
                                  fail_on_error=fail)
            stream_views[alias] = view
            if at_once is not None:  # and its records read in batch, for the other side's
                batch_views[alias] = f"{view}_all"
                steps += [replace(step, streaming=False, watermark_ms=None, observed=None) for step in
                          stream_steps(source, f"{view}_all", None,
                                       _watermark(windows, index, outer_joins))]
            if changelog and analysis.aggregate and groups_keyed:
                changelog_view = view  # the stage is built after the rewrite, from its groups
                view = f"{view}_input"
            elif changelog and analysis.aggregate:
                batch = changelog_stage(source, view)
                view = f"{view}_input"
            elif sessions_keyed:  # the stage is built after the rewrite, from its groups
                session_stream = view
                view = sessions_view = f"{view}_input"
            elif session is not None:
                batch = session_stage(source, view, earlier=not analysis.query.emit_final)
                view = sessions_view = f"{view}_input"
            elif final is not None and stream_state:
                final_stream = view
                view = f"{view}_input"
            elif final is not None:
                batch = final_stage(source, view, final)
                view = f"{view}_input"
        elif keys_tables or tables_after:  # its changelog: its rows are the join's keyed state
            steps += stream_steps(source, f"{view}_changes", None, from_start=True,
                                  fail_on_error=fail)
            keyed.append(JoinedTable(source, alias, f"{view}_changes"))
        else:  # a stream-table join reads every version of the table's rows
            steps += [Step(f"{view}_raw", topic=source.topic, streaming=False),
                      Step(view, table_versions_select(source, quote(f"{view}_raw")))]
            versioned.append(index)
        read.table.replace(exp.Table(this=exp.to_identifier(view, quoted=True),
                                     alias=exp.TableAlias(this=exp.to_identifier(alias))))
    assert stream_alias is not None, "support admits only queries reading a stream"
    if table_join and not keyed_rows:
        batch = table_join_stage(joined_tables, prefix)
    key_names = {c.name for c in sink.key_columns}
    source_keys = {c.name for c in analysis.reads[0].source.key_columns}
    items: list[exp.Expr] = []
    for name, expression in analysis.projection:
        item = _with_synthetic_key(expression.copy(), analysis)
        if name in key_names and not (analysis.aggregate or analysis.query.partition_by):
            item = _outer_join_key(item, select)
        if analysis.query.partition_by and not analysis.aggregate and name in key_names and any(
                column.name not in source_keys for column in item.find_all(exp.Column)):
            # ksqlDB computes a new key from the value: a tombstone has none to compute it from
            tombstone = exp.column(NULL_VALUE, table=stream_alias, quoted=True)
            item = exp.If(this=tombstone, true=exp.Null(), false=item)
        items.append(exp.alias_(item, name, quoted=True))
    if analysis.synthetic_key is not None:  # a key SELECT * leaves out (ksqlDB's ROWKEY)
        key_name, key_value = analysis.synthetic_key
        if key_name in key_names and all(name != key_name for name, _ in analysis.projection):
            items.append(exp.alias_(key_value.copy(), key_name, quoted=True))
    windowed = analysis.windowed
    # what the aggregation reads
    rows_alias = TABLES if aggregated_join else JOINED if split_streams else stream_alias
    # a projection or filter of a windowed source keeps its records' windows in the sink's key
    # and a join of windowed streams the left stream's windows
    source_window = analysis.window if not analysis.aggregate else None
    bounds = _Bounds(exp.column(WINDOW, table=rows_alias, quoted=True))
    if source_window is not None and len(stream_aliases) > 1:  # a RIGHT or FULL join's record
        # without a left side is keyed by the right side's window
        bounds = _Bounds(exp.func("coalesce", *(exp.column(WINDOW, table=a, quoted=True)
                                                for a in stream_aliases)))
    if session is not None:  # each record's session, as Kafka Streams merges them
        bounds = _Bounds(exp.column(SESSION, table=stream_alias, quoted=True))
    rowtime: exp.Expr = exp.column("ROWTIME", table=rows_alias, quoted=True)
    if analysis.aggregate:  # an aggregate's record carries the newest input's time, as ksqlDB's
        rowtime = exp.Max(this=rowtime)
    items.append(exp.alias_(rowtime, ROWTIME, quoted=True))
    null_value: exp.Expr = exp.column(NULL_VALUE, table=stream_alias, quoted=True)
    if aggregated_join:  # a key the join has no result row for
        null_value = exp.column(NULL_VALUE, table=TABLES, quoted=True)
    elif analysis.joins:  # joins drop a stream's tombstones; a table join reads no deleted rows
        null_value = exp.false()
        if not (windows or table_join):  # a stream-table join (Kafka Streams skips them)
            select.where(exp.Not(this=exp.column(NULL_VALUE, table=stream_alias, quoted=True)),
                         copy=False)
    having = select.args.get("having")
    if analysis.aggregate:  # and the headers of the newest input, as Kafka Streams carries them
        carried = exp.column(HEADERS, table=rows_alias, quoted=True)
        newest = exp.column("ROWOFFSET", table=rows_alias, quoted=True)
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
        if select.args.get("where") is not None and not analysis.joins:
            # a filter drops a tombstone, a projection keeps it
            select.where(exp.Not(this=exp.column(NULL_VALUE, table=stream_alias, quoted=True)),
                         copy=False)
    keeps_key = not (analysis.aggregate or analysis.joins or analysis.query.partition_by)
    if keeps_key:  # a record without a key keeps none, though its key columns read as NULLs
        items.append(exp.alias_(exp.column(NULL_KEY, table=stream_alias, quoted=True), NULL_KEY,
                                quoted=True))
    if windowed:
        group = select.args.get("group") or exp.Group(expressions=[])
        window_column: exp.Expr = exp.column(WINDOW, table=rows_alias, quoted=True)
        if session is not None:
            window_column = exp.column(SESSION, table=stream_alias, quoted=True)
        group.append("expressions", window_column)
        select.set("group", group)
        items.append(exp.alias_(bounds.start(), WINDOW_START, quoted=True))
        if session is not None:
            items.append(exp.alias_(bounds.end(), WINDOW_END, quoted=True))
            if not analysis.query.emit_final:  # which sessions the micro-batch changed
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
    own_windows = frozenset(read.alias for read in analysis.reads if read.source.window
                            is not None) if analysis.joins and not analysis.aggregate else None
    _rewrite(select, JOINED if split_streams else stream_alias, config, bounds,
             own_windows or frozenset())
    outer: exp.Select | None = None  # the query over a stream-stream join's rows, select's
    joined_rows = f"{prefix}_stream_joined"
    joined_at = len(steps)  # where the step of those rows goes
    if split_streams:
        outer = select
        select = split_stream_joins(outer, analysis, joined_reads, joined_rows,
                                    None if tables_after else window, generated)
    if keyed and outer is not None:
        steps += join_tables(outer, joined_rows, JOINED, keyed, prefix, None,
                             list(outer.args.get("laterals") or []))
    elif keyed:
        steps += join_tables(select, stream_view, stream_alias, keyed, prefix,
                             None if final_stream else analysis.windowing)
        if final_stream:  # the EMIT FINAL's state reads the joined records
            joined = select.args["from_"].this
            final_stream = joined.name
            joined.set("this", exp.to_identifier(f"{final_stream}_input", quoted=True))
    if keyed_rows:
        tables = [JoinedTable(source, alias, f"{prefix}_changes_{index}") for index, (
            (source, _, _), alias) in enumerate(zip(joined_tables, stream_aliases, strict=True))]
        if analysis.foreign_key_join:
            join_steps, present = join_tables_on_foreign_key(
                select, tables, spark_type(joined_tables[1][0].key_columns[0].type), prefix)
        else:
            join_steps, present = join_tables_on_keys(select, tables, prefix)
        steps += join_steps
        if aggregated_join:
            changelog_view = f"{prefix}_joined"
            join_rows, join_laterals = join_changelog(select, changelog_view, present,
                                                      stream_aliases)
            steps.append(join_rows)
        else:
            _keyed_table_join_columns(select, stream_aliases, present, key_names)
    if windows:  # in Spark's own terms, after the rewrite into ksqlDB's
        _bound_stream_joins(select, analysis, windows, stream_alias, stream_aliases)
    if versioned:
        _as_of_stream_time(select, analysis, versioned, stream_aliases)
    if table_join and not keyed_rows:
        _table_join_columns(select, stream_aliases, [t[2] for t in joined_tables],
                            analysis.foreign_key_join)
    if generated and outer is not None:
        _explode(outer, generated, JOINED)
    elif generated:
        _explode(select, generated, stream_alias)
    if changelog_view:
        group_steps, batch = aggregate_changelog(select, changelog_view, rows_alias,
                                                 f"{changelog_view}_input", join_laterals)
        steps += group_steps
    if session_stream:
        assert session is not None
        session_steps, batch = keyed_sessions(select, session_stream, sessions_view, session)
        steps += session_steps
    if final_stream:
        assert final is not None
        final_steps, batch = keyed_final(select, final_stream, f"{final_stream}_input", final)
        steps += final_steps
    if batch is not None and session is None and final is None and (
            aggregated_join or not table_join):
        aggregate_touched_groups(select, rows_alias)
    inner = select.sql(dialect="spark", identify=True)
    unmatched_state = False
    if at_once is not None:
        found = keyed_unmatched(select, at_once, analysis, stream_views, windows[1],
                                prefix) if stream_state else None
        if found is not None:  # and no stream is read in batch
            batch_reads = tuple(batch_views.values())
            before = [step for step in steps[:joined_at] if not step.view.startswith(batch_reads)]
            after = [step for step in steps[joined_at:] if not step.view.startswith(batch_reads)]
            steps[:] = [*before, *found[0], *after]
            joined_at = len(before) + len(found[0])
            unmatched_state = True
        inner = union_sql(select, at_once, batch_views, found[1] if found else None)
    if outer is not None:
        steps.insert(joined_at, Step(joined_rows, inner))
        inner = outer.sql(dialect="spark", identify=True)
    if table_join and not keyed_rows:
        assert batch is not None
        names = [item.alias_or_name for item in select.expressions
                 if item.alias_or_name != JOIN_KEY]
        changed_keys = touched_keys(batch.view)
        if analysis.foreign_key_join:
            (_, left_view, left_key), (_, _, right_key) = joined_tables[:2]
            on = (select.args.get("joins") or [])[0].args["on"]
            changed_keys = touched_by_foreign_key(
                batch.view, (left_view, stream_aliases[0], left_key),
                (stream_aliases[1], right_key), on.sql(dialect="spark", identify=True))
        inner = table_join_changes(inner, names, sorted(key_names), changed_keys)
    if batch is not None and final is not None and not final_stream:
        batch = replay_final(batch, select, final)
    if batch is not None and session is not None:
        if not session_stream:
            batch = replay_sessions(batch, select, session)
        if analysis.query.emit_final:
            batch = close_sessions(batch, select, session, sessions_view)
        else:
            batch, inner = session_changes(batch, inner, select, sink)
    typed = [f"CAST({quote(c.name)} AS {spark_type(c.type)}) AS {quote(c.name)}"
             for c in sink.columns if c.role.is_key or c.role.value == "VALUE"]
    deletes = not analysis.aggregate or having is not None or session is not None
    mode = "update" if analysis.aggregate and batch is None else "append"
    topics = tuple(dict.fromkeys(source_topics))
    if transient:
        deleted = quote(NULL_VALUE) if deletes else "false"
        sql = f"SELECT {', '.join(typed)}, {deleted} AS {quote(NULL_VALUE)} FROM ({inner})"
        if analysis.kind is SourceKind.STREAM:  # a stream's result has no deletions
            sql = f"SELECT * FROM ({sql}) WHERE NOT {quote(NULL_VALUE)}"
        return QueryPlan(query_id, tuple(steps), sql, mode, "", topics, batch,
                         table_state=bool(keyed or keyed_rows or changelog_view),
                     stream_state=bool(session_stream or final_stream or unmatched_state))
    hidden = None if analysis.aggregate else SOURCE
    session_key = session is not None or (
        source_window is not None and source_window.kind == "SESSION")
    typed.append(f"{_sink_time(sink)} AS {quote(ROWTIME)}")
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
    if windows and batch is None:
        records.append(f"{quote(ROWTIME)} AS {ORDER}")
    sql = (f"SELECT {', '.join(records)} FROM (SELECT {', '.join(typed)} FROM ({inner}) "
           "AS __ms_result) AS __ms_typed")
    if sink.timestamp_column is not None:  # ksqlDB drops a record its timestamp column rejects
        column = sink.column(sink.timestamp_column)
        if column is not None and column.type == ty.STRING:
            # text that does not match the TIMESTAMP_FORMAT has no time: ksqlDB fails the
            # record; a tombstone has no text and passes
            deleted = f"{quote(NULL_VALUE)} OR " if deletes else ""
            sql += (f" WHERE {deleted}({quote(ROWTIME)} IS NOT NULL AND "
                    f"{quote(ROWTIME)} >= 0)")
        else:
            sql += f" WHERE {quote(ROWTIME)} IS NULL OR {quote(ROWTIME)} >= 0"
    if windows and batch is None:
        batch, sql = _in_time_order(sql, prefix)
    elif windowed and batch is None:  # a TUMBLING or HOPPING aggregation's
        batch, sql = _in_time_order(sql, prefix, WINDOWED_RECORD_ORDER)
    return QueryPlan(query_id, tuple(steps), sql, mode, sink.topic, topics, batch,
                     earliest=overrides.offset_reset(config or {}) != "latest",
                     table_state=bool(keyed or keyed_rows or changelog_view),
                     stream_state=bool(session_stream or final_stream or unmatched_state),
                     window_key_bytes=(16 if session_key else 8)
                     if windowed or source_window is not None else 0)


def _in_time_order(records_sql: str, prefix: str, order: str = ORDER
                   ) -> tuple[BatchStage, str]:
    """Write a stream-stream join's or a time-windowed aggregation's records of each
    micro-batch in time order (a stage whose micro-batch rows are the records,
    ``records_sql``, sorted by ``order``: a join's records carry their time as
    :data:`ORDER`): Kafka Streams writes a joined record when its later record arrives, which
    in topics read in time order is the time the joined record carries, and an aggregate at
    its group's newest record, a record's windows by their starts (``TimeWindows.windowsFor``);
    Spark writes the rows of a micro-batch in the order its tasks run (the pairs a left record
    makes before those a right record makes, the branches of a UNION ALL in parallel, each
    window's group wherever it is kept). One task writes them, in order, so a query reading
    the sink sees its stream time advance, and a key's windows follow each other, as ksqlDB's
    would."""
    view = f"{prefix}_records"
    ordered = (f"SELECT key, value, headers FROM {quote(view)} DISTRIBUTE BY 'one task' "
               f"SORT BY {order}")
    return BatchStage(source_sql=records_sql, view=view, steps=()), ordered


WINDOWED_RECORD_ORDER = (
    f"element_at(filter(headers, h -> h.key = {string_literal(encoding.TIMESTAMP_HEADER)}), "
    "-1).value, substring(key, -8, 8)")
"""The order of a TUMBLING or HOPPING aggregation's records: by their time, then their window's
start (both 8 bytes big-endian, never negative, so they sort as their numbers), read from the
records themselves: an order column of the aggregation would reorder its aggregates, and so the
state a running query's checkpoint holds."""


def _leading_streams(analysis: Analysis) -> int:
    """How many of the query's sources, from the first, are streams."""
    kinds = [read.source.kind for read in analysis.reads]
    return next((i for i, kind in enumerate(kinds) if kind is not SourceKind.STREAM), len(kinds))


def _joins_keyed_state(analysis: Analysis) -> bool:
    """Whether the query's joins are a stream's joins with tables whose sides are keyed state
    (:mod:`metastore.queries.table_state`): so they are when every source but the first stream
    is a table (an EMIT FINAL's state then reads the joined records; SESSION windows over a
    join are refused); a query that also joins streams joins its tables as of the record's
    time."""
    reads = analysis.reads
    return (bool(analysis.joins) and reads[0].source.kind is SourceKind.STREAM
            and all(read.source.kind is SourceKind.TABLE for read in reads[1:]))


def _with_synthetic_key(item: exp.Expr, analysis: Analysis) -> exp.Expr:
    """``item`` with a join's synthetic key column (``ROWKEY``) as the value it stands for."""
    if analysis.synthetic_key is None:
        return item
    name, value = analysis.synthetic_key
    for column in list(item.find_all(exp.Column)):
        if not column.table and column.name == name:
            if column is item:
                return value.copy()
            column.replace(value.copy())
    return item


def _outer_join_key(item: exp.Expr, select: exp.Select) -> exp.Expr:
    """A key column that is one side's join expression of an outer (LEFT, RIGHT or FULL) join:
    the join's key, whichever side has it (ksqlDB keys a joined record by the join key, so a
    record the other side does not match still has its key, whichever side's column names
    it)."""
    for join in select.args.get("joins") or []:
        on = join.args.get("on")
        while isinstance(on, exp.Paren):
            on = on.this
        if join_type(join) == "INNER" or not isinstance(on, exp.EQ):
            continue
        sides = (on.this, on.expression)
        if any(_same_column(item, side) for side in sides):
            return exp.func("coalesce", *(side.copy() for side in sides))
    return item


def _same_column(item: exp.Expr, side: exp.Expr) -> bool:
    """Whether two expressions are equal, a column named ``t.id`` in ON being SELECT *'s
    `T`.`ID` (an unquoted name is its upper case, a quoted one as written)."""
    if isinstance(item, exp.Column) and isinstance(side, exp.Column):
        return _resolved_name(item) == _resolved_name(side)
    return item == side


def _resolved_name(column: exp.Column) -> tuple[str, str]:
    def name(identifier: exp.Expr | None) -> str:
        if not isinstance(identifier, exp.Identifier):
            return ""
        text = str(identifier.this)
        return text if identifier.quoted else text.upper()
    return name(column.args.get("table")), name(column.this)


def _watermark(windows: dict[int, JoinWindow], read: int, outer: set[int]) -> int:
    """A joined stream's watermark delay, the most of the joins it takes part in (``outer``:
    those whose unmatched records Spark's outer join writes, by index in ``windows``).

    Spark's stream-stream join drops a record older than the watermark (under the queries'
    ``max`` policy, the newest time of all sides, as Kafka Streams' shared stream time, less
    this delay) and evicts state by it. Kafka Streams keeps a joined record in its join window
    store for the window's size (``before`` + ``after``) plus the grace (ksqlDB's default 24
    hours without GRACE PERIOD), and a record arriving later joins any record still there: so
    that is the delay. Spark writes an outer join's unmatched record when the watermark passes
    its time + ``after``, which must be when the stream time passes its time + ``after`` +
    grace, as Kafka Streams writes it: such a join's delay is its grace alone."""
    delays = [_join_delay(w, index in outer) for index, w in windows.items()
              if read in (index, 0)]
    return max(delays, default=DEFAULT_JOIN_GRACE_MS)


def _join_delay(window: JoinWindow, writes_unmatched: bool) -> int:
    """How far behind the stream time a record of ``window``'s join may come and still join
    (its grace alone where Spark writes the join's unmatched records)."""
    grace = DEFAULT_JOIN_GRACE_MS if window.grace_ms is None else window.grace_ms
    return grace if writes_unmatched else window.before_ms + window.after_ms + grace


def _outer_joins(analysis: Analysis, windows: dict[int, JoinWindow]) -> set[int]:
    """The outer (LEFT, RIGHT, FULL) joins among the stream-stream joins ``windows``, by the
    index of the stream each joins in ``analysis.reads``."""
    return {index for index in windows
            if (analysis.joins[index - 1].side or "").upper() in ("LEFT", "RIGHT", "FULL")}


def _bound_stream_joins(select: exp.Select, analysis: Analysis, windows: dict[int, JoinWindow],
                        first: str, streams: list[str]) -> None:
    """Spark's form of ksqlDB's stream-stream joins (on the rewritten query): each joined
    stream's records within ``[t - before, t + after]`` of the first stream's record (a
    time-range condition Spark bounds its join state by) and equalities Spark can see as
    such; records with a null value (tombstones) dropped on every side, as Kafka Streams' join
    skips them; the result's time the newest of the records joined, its headers the newest
    record's (the last stream's of equal times), and the source offsets of all of them."""
    joins = select.args.get("joins") or []
    for join in joins:  # in ON, NULL rejects a pair as FALSE does: COALESCE(a = b, FALSE) is a = b
        join.set("on", _plain_conjuncts(join.args["on"]))
    for index, window in windows.items():
        alias = analysis.reads[index].alias
        mine = exp.column(TS, table=alias, quoted=True)
        theirs = exp.column(TS, table=first, quoted=True)
        condition = exp.and_(
            exp.GTE(this=mine, expression=exp.Sub(this=theirs.copy(), expression=_interval(
                window.before_ms))),
            exp.LTE(this=mine.copy(), expression=exp.Add(this=theirs.copy(), expression=_interval(
                window.after_ms))))
        source_window = analysis.reads[index].source.window
        if source_window is not None:  # the same key in the same window
            condition = exp.and_(condition, *_same_window(alias, first,
                                                          source_window.kind == "SESSION"))
        join = joins[index - 1]
        join.set("on", exp.and_(exp.Paren(this=join.args["on"]), condition))
    for index, join in enumerate(joins):
        right = analysis.reads[index + 1]
        if right.source.kind is SourceKind.STREAM:
            join.set("on", exp.and_(join.args["on"], exp.Not(this=exp.column(
                NULL_VALUE, table=right.alias, quoted=True))))
    for alias in streams:
        select.where(exp.Not(this=exp.func("coalesce", exp.column(NULL_VALUE, table=alias,
                                                                  quoted=True), exp.false())),
                     copy=False)
    newest = exp.func("greatest", *(exp.column("ROWTIME", table=a, quoted=True)
                                    for a in streams))
    # Kafka Streams writes a pair when its later record arrives, with that record's headers
    headers = exp.Case(ifs=[exp.If(this=exp.EQ(this=exp.column("ROWTIME", table=a, quoted=True),
                                               expression=newest.copy()),
                                   true=exp.column(HEADERS, table=a, quoted=True))
                            for a in reversed(streams)],
                       default=exp.func("coalesce", *(exp.column(HEADERS, table=a, quoted=True)
                                                      for a in streams)))
    hidden = {
        ROWTIME: newest,
        HEADERS: headers,
        SOURCE: exp.Anonymous(this="concat_ws", expressions=[exp.Literal.string(","), *(
            exp.column(SOURCE, table=a, quoted=True) for a in streams)]),
    }
    _set_columns(select, hidden)


def _same_window(alias: str, first: str, session: bool) -> list[exp.Expr]:
    """Windowed streams join on their serialized keys, so on the window too: its start (a time
    window's key holds only its start), and a session's end."""
    bounds = ("start", "end") if session else ("start",)
    return [exp.EQ(this=exp.Dot(this=exp.column(WINDOW, table=alias, quoted=True),
                                expression=exp.to_identifier(bound)),
                   expression=exp.Dot(this=exp.column(WINDOW, table=first, quoted=True),
                                      expression=exp.to_identifier(bound)))
            for bound in bounds]


def _as_of_stream_time(select: exp.Select, analysis: Analysis, tables: list[int],
                       streams: list[str]) -> None:
    """A stream-table join joins each stream record with the table's row as it stood at the
    record's time (the version valid then), as Kafka Streams joins a record with the table's
    state when it processes it: a table row written after the record does not join it. After a
    stream-stream join the record's time is the newest of the records joined (the one an
    outer join's unmatched side leaves NULL counts for nothing)."""
    joins = select.args.get("joins") or []
    for index in tables:
        before = {read.alias for read in analysis.reads[:index]}  # what its ON can see
        times = [exp.column("ROWTIME", table=stream, quoted=True) for stream in streams
                 if stream in before]
        time = times[0] if len(times) == 1 else exp.func("greatest", *times)
        alias = analysis.reads[index].alias
        start = exp.column(VALID_FROM, table=alias, quoted=True)
        until = exp.column(VALID_UNTIL, table=alias, quoted=True)
        valid = exp.and_(exp.GTE(this=time.copy(), expression=start), exp.Or(
            this=exp.Is(this=until, expression=exp.Null()),
            expression=exp.LT(this=time.copy(), expression=until.copy())))
        join = joins[index - 1]
        join.set("on", exp.and_(exp.Paren(this=join.args["on"]), exp.Paren(this=valid)))


def _table_join_columns(select: exp.Select, tables: list[str], keys: list[str],
                        foreign: bool) -> None:
    """A table-table join's hidden columns: the join key (the first table's key, or the next
    table's where an outer join left it NULL; a foreign-key join's is the left table's), the
    newest time of the rows joined; tables carry no headers and no source offsets."""
    hidden = {
        ROWTIME: exp.func("greatest", *(exp.column("ROWTIME", table=t, quoted=True)
                                        for t in tables)),
        HEADERS: exp.cast(exp.Null(), HEADERS_TYPE),
        SOURCE: exp.cast(exp.Null(), "STRING"),
    }
    _set_columns(select, hidden)
    keyed = list(zip(tables, keys, strict=True))[:1 if foreign else None]
    key = exp.func("coalesce", *(exp.column(k, table=t, quoted=True) for t, k in keyed))
    select.append("expressions", exp.alias_(key, JOIN_KEY, quoted=True))


def _keyed_table_join_columns(select: exp.Select, tables: list[str], present: exp.Expr,
                              keys: set[str]) -> None:
    """A keyed table-table join's row per changed key (see
    :func:`metastore.queries.table_state.join_tables_on_keys` and
    :func:`~metastore.queries.table_state.join_tables_on_foreign_key`) as its record: the result row when
    the joins' types and the WHERE admit one, else a tombstone of the key. The time is the
    newest of the rows joined and the change (Kafka Streams' max), a tombstone's the change's;
    tables carry no headers and no source offsets."""
    where = select.args.get("where")
    result = exp.and_(present, exp.Paren(this=where.this)) if where is not None else present
    select.set("where", None)
    changed = exp.column(AT, table=TABLES, quoted=True)
    joined_time = exp.func("greatest", *(exp.column("ROWTIME", table=t, quoted=True)
                                         for t in tables), changed.copy())
    _set_columns(select, {
        NULL_VALUE: exp.Not(this=exp.func("coalesce", result.copy(), exp.false())),
        ROWTIME: exp.If(this=exp.func("coalesce", result.copy(), exp.false()),
                        true=joined_time, false=changed),
        HEADERS: exp.cast(exp.Null(), HEADERS_TYPE),
        SOURCE: exp.cast(exp.Null(), "STRING"),
    })
    key = exp.column(TABLE_JOIN_KEY, table=TABLES, quoted=True)
    for item in select.expressions:  # a tombstone's key is the join key
        if item.alias_or_name in keys:
            part: exp.Expr = key.copy()
            column = item.this.find(exp.Column)
            if len(keys) > 1 and column is not None:  # the key's column (left table's) it reads
                part = exp.Dot(this=part, expression=exp.to_identifier(column.name, quoted=True))
            item.set("this", exp.func("coalesce", item.this, part))


def _set_columns(select: exp.Select, values: Mapping[str, exp.Expr]) -> None:
    """Give the projection's columns named in ``values`` those expressions."""
    for item in select.expressions:
        if isinstance(item, exp.Alias) and item.alias in values:
            item.set("this", values[item.alias])


def _plain_conjuncts(condition: exp.Expr) -> exp.Expr:
    """``condition`` with each ANDed ``COALESCE(x, FALSE)`` replaced by ``x``."""
    node = condition.unnest() if isinstance(condition, exp.Paren) else condition
    if isinstance(node, exp.And):
        return exp.and_(_plain_conjuncts(node.this), _plain_conjuncts(node.expression))
    operands: list[exp.Expr] = []
    if isinstance(node, exp.Coalesce):
        operands = [node.this, *node.expressions]
    elif isinstance(node, exp.Anonymous) and str(node.this).upper() == "COALESCE":
        operands = list(node.expressions)
    if len(operands) == 2 and isinstance(operands[1], exp.Boolean) and not operands[1].this:
        return _plain_conjuncts(operands[0])
    return node


def _interval(millis: int) -> exp.Expr:
    return exp.Interval(this=exp.Literal.string(str(millis)), unit=exp.var("MILLISECOND"))


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


def _sink_time(sink: DataSource) -> str:
    """A sink record's timestamp: its TIMESTAMP column's, else the source record's ROWTIME."""
    column = sink.column(sink.timestamp_column) if sink.timestamp_column else None
    if column is None:
        return quote(ROWTIME)
    if column.type == ty.TIMESTAMP:
        return f"unix_millis({quote(column.name)})"
    if column.type == ty.STRING:
        return formatted_time(sink, column.name, "STRINGTOTIMESTAMP")
    return f"CAST({quote(column.name)} AS BIGINT)"


def _skip_ungroupable(select: exp.Select, null_value: exp.Expr) -> None:
    """ksqlDB's aggregations skip tombstones and rows any GROUP BY expression is NULL for."""
    conditions: list[exp.Expr] = [exp.Not(this=null_value)]
    group = select.args.get("group")
    for expression in group.expressions if group is not None else []:
        conditions.append(exp.Not(this=exp.Is(this=expression.copy(), expression=exp.Null())))
    for condition in conditions:
        select.where(condition, copy=False)


@dataclass(frozen=True)
class _Bounds:
    """Where a window's rows find its bounds: a struct column of TIMESTAMPs ``start`` and
    ``end`` (a time window's, a session's as replayed by
    :func:`metastore.queries.stages.replay_sessions`, or a windowed source's,
    :func:`metastore.spark.views.decode_select`)."""

    window: exp.Expr

    def start(self) -> exp.Expr:
        return self._millis("start")

    def end(self) -> exp.Expr:
        return self._millis("end")

    def _millis(self, which: str) -> exp.Expr:
        field = exp.Dot(this=self.window.copy(), expression=exp.to_identifier(which))
        return exp.Anonymous(this="unix_millis", expressions=[field])


def _rewrite(select: exp.Expr, stream_alias: str, config: dict[str, object] | None = None,
             bounds: _Bounds | None = None, own_windows: frozenset[str] = frozenset()) -> None:
    """ksqlDB expressions as Spark SQL with ksqlDB's meaning: every function call, array index
    and division through :func:`metastore.functions.library.to_spark`; window bounds and
    struct access as the query's views hold them. ``own_windows``: the aliases of joined
    windowed sources, whose qualified bounds are their own records' windows."""

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.name.upper() in ("WINDOWSTART", "WINDOWEND"):
            # the query's window (qualified or not), else the window of the source it names
            window = bounds or _Bounds(exp.column(WINDOW, table=node.table or stream_alias,
                                                  quoted=True))
            if node.table and node.table in own_windows:
                window = _Bounds(exp.column(WINDOW, table=node.table, quoted=True))
            return window.start() if node.name.upper() == "WINDOWSTART" else window.end()
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
