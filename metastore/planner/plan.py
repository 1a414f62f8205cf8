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
   keyed state (:mod:`metastore.planner.table_state`), tables joined after stream-stream joins
   too (over the joined records, :mod:`metastore.planner.joined_rows`); a table joined before
   a stream-stream join, under a windowed aggregation of one, or under an EMIT FINAL or SESSION
   stage is a *batch* Kafka read of every version of its rows (each valid from its time until
   its key's next version), which Spark re-plans, so re-reads, at every micro-batch (a
   stream-static join); a stream record joins the version valid at its time;
3. the ksqlDB SELECT, transpiled with sqlglot to Spark SQL over those views, each output column
   cast to the sink column's type; a stream-stream join bounded by its WITHIN and watermarked by
   its window and GRACE PERIOD (one whose unmatched records Spark writes, by its grace:
   :mod:`metastore.planner.join_terms`), or, an outer one without GRACE PERIOD, the UNION ALL
   of :mod:`metastore.planner.outer_at_once`;
4. the sink encoding of :mod:`metastore.planner.encoding`.

Aggregations run in Spark's ``update`` output mode: each micro-batch writes the new value of
every key (and window) it changed, an upsert keyed by the GROUP BY key. What one streaming
SELECT cannot express is a :class:`BatchStage`: batch SQL that runs per micro-batch over its
rows and the source topics read in batch up to it, written with ``foreachBatch``: aggregating a
table's changelog (an update takes a row out of its old group; the rows and groups are keyed
state, :mod:`metastore.planner.table_groups`, so the stage reads no topic), SESSION windows
(sessions merge) and EMIT FINAL (:mod:`metastore.planner.final_windows`). An aggregation of a
stream-stream join aggregates the join's rows, a view of their own
(:mod:`metastore.planner.joined_rows`). A table-table join
whose checkpoint predates keyed table state re-joins in a stage too
(:mod:`metastore.planner.stages`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import sqlglot
from sqlglot import exp

from metastore.catalog.exceptions import UpgradeError
from metastore.catalog.image import Image
from metastore.catalog.model import DataSource, PersistentQuery
from metastore.engine import overrides
from metastore.engine.analysis import Analysis, analyse
from metastore.engine.scope import SourceRead, reads_scope
from metastore.functions import failures
from metastore.functions import library as functions
from metastore.functions.registry import UntranslatableError
from metastore.planner import encoding, prepared_columns, real_time, record_checks
from metastore.planner.exceptions import QueryRuntimeError, UnsupportedByRuntimeError
from metastore.planner.final_windows import (
    close_sessions,
    final_stage,
    keyed_final,
    replay_final,
)
from metastore.planner.join_terms import (
    as_of_stream_time,
    bound_stream_joins,
    join_watermark,
    keyed_table_join_columns,
    outer_join_key,
    table_join_columns,
)
from metastore.planner.joined_rows import JOINED, split_stream_joins
from metastore.planner.outer_at_once import (
    keyed_unmatched,
    union_sql,
)
from metastore.planner.plan_format import PlanFormatError, called_functions, plan_text, read_plan
from metastore.planner.prepared_columns import required_columns
from metastore.planner.replacement import check_replacement
from metastore.planner.session_state import keyed_final_sessions, keyed_sessions
from metastore.planner.stages import (
    JOIN_KEY,
    aggregate_touched_groups,
    changelog_stage,
    leave_out_sentinels,
    replay_sessions,
    session_changes,
    session_stage,
    table_join_changes,
    table_join_stage,
    touched_by_foreign_key,
    touched_keys,
    touched_sessions,
)
from metastore.planner.steps import (
    HEADERS,
    NULL_KEY,
    NULL_VALUE,
    ORDER,
    ROWTIME,
    SENTINEL,
    SESSION,
    SOURCE,
    TABLE_FUNCTION,
    TOUCHED,
    WINDOW,
    WINDOW_END,
    WINDOW_START,
    BatchStage,
    CheckedRows,
    QueryPlan,
    Step,
    formatted_time,
    stream_steps,
    table_versions_select,
)
from metastore.planner.strategy import Strategy, choose
from metastore.planner.support import explain, runtime_problem
from metastore.planner.table_groups import aggregate_changelog
from metastore.planner.table_state import (
    TABLES,
    JoinedTable,
    hidden_columns,
    join_changelog,
    join_tables,
    join_tables_before_streams,
    join_tables_on_foreign_key,
    join_tables_on_keys,
)
from metastore.spark.query import struct_access
from metastore.spark.types import quote, spark_type, string_literal
from metastore.sql import types as ty
from metastore.sql.parser import parse
from metastore.sql.statements import Query, SelectStatement, SourceKind


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
    :meth:`metastore.runtime.checkpoints.CheckpointDir.holds_table_state` and
    :meth:`~metastore.runtime.checkpoints.CheckpointDir.holds_stream_state`)."""
    return compiled_query(query, image, table_state=table_state, stream_state=stream_state)[0]


def compiled_query(query: PersistentQuery, image: Image, *, table_state: bool = True,
                   stream_state: bool = True) -> tuple[QueryPlan, Analysis]:
    """:func:`compile_query`'s plan, and the analysis it was planned from."""
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
                 stream_state=stream_state), analysis


def stored_plan(query: PersistentQuery, image: Image, replacing: str | None = None) -> str:
    """The plan a query's command keeps (a :class:`~metastore.engine.validation.QueryPlanner`):
    compiled on the image the command leaves, with keyed table and stream state; a query it
    cannot plan, or not in the real-time mode it asks for (:func:`real_time.check`), is refused
    with the reason, and nothing is written. A replacement must be able to go on from the
    checkpoint of the plan it is ``replacing``
    (:func:`~metastore.planner.replacement.check_replacement`)."""
    try:
        plan, analysis = compiled_query(query, image)
    except QueryRuntimeError as error:
        raise UnsupportedByRuntimeError(explain(f"it cannot be planned: {error}"),
                                        query.sink) from error
    problem = real_time.check(plan, analysis, dict(query.config))
    if problem is not None:
        raise UnsupportedByRuntimeError(explain(problem), query.sink)
    if replacing is not None:
        try:
            running = read_plan(replacing)
        except PlanFormatError as error:
            raise UpgradeError(f"Query is not upgradeable. {error}", query.sink) from error
        check_replacement(running, plan, query.sink)
    return plan_text(plan)


def plan_of(query: PersistentQuery, image: Image, *, table_state: bool = True,
            stream_state: bool = True) -> QueryPlan:
    """What runs ``query``: the plan its command keeps (under the image's query id), whatever
    this release would compile; else, for a query written before plans were kept, or replaced
    over a checkpoint older than the keyed state its plan keeps, the plan its SQL compiles to
    with the state the checkpoint holds (``table_state``, ``stream_state``)."""
    if query.plan:
        plan = replace(read_plan(query.plan), query_id=query.query_id)
        if (table_state or not plan.table_state) and (stream_state or not plan.stream_state):
            return plan
    return compile_query(query, image, table_state=table_state, stream_state=stream_state)


def compile_push(query_id: str, analysis: Analysis, config: dict[str, object]) -> QueryPlan:
    """The plan of a push query (``SELECT ... EMIT CHANGES``) from its transient analysis
    (:func:`metastore.engine.pull_queries.check_select`), which it rewrites: the same plan as
    a persistent query's, but its SQL yields the result's columns, in SELECT order, and
    :data:`~metastore.planner.steps.NULL_VALUE` (a table's row deleted), not Kafka records. The
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
    strategy = choose(analysis, config or {}, transient=transient, table_state=table_state,
                      stream_state=stream_state)
    planner = _Planner(query_id, analysis, sink, config, strategy, transient)
    return planner.result_plan() if transient else planner.sink_plan()


class _Planner:
    """One query's plan, built in named steps that follow its :class:`Strategy`: read the
    sources, project the result's columns, join, add the stateful stages, then write the SQL of
    the result's rows (a push query's) or of the sink's records."""

    def __init__(self, query_id: str, analysis: Analysis, sink: DataSource,
                 config: dict[str, object] | None, strategy: Strategy,
                 transient: bool = False) -> None:
        select = analysis.query.select
        assert isinstance(select, exp.Select)
        self.query_id, self.analysis, self.sink, self.config = query_id, analysis, sink, config
        self.strategy = strategy
        self.transient = transient
        self.select = select
        self.scope = reads_scope(analysis.reads, analysis.query.window is not None)
        self.outer: exp.Select | None = None  # the query over a stream-stream join's rows
        self.prefix = "q_" + re.sub(r"[^0-9a-zA-Z_]", "_", query_id).lower()
        self.steps: list[Step] = []
        self.batch: BatchStage | None = None
        self.source_topics: list[str] = []
        self.stream_aliases: list[str] = []
        self.stream_views: dict[str, str] = {}  # each stream's streaming view, by alias
        self.batch_views: dict[str, str] = {}  # each stream's batch read, for an at-once join
        self.stream_view = ""  # the first stream's view
        self.versioned: list[int] = []  # tables read as every version of their rows
        self.joined_tables: list[tuple[DataSource, str, str]] = []  # a table join's sides
        self.keyed: list[JoinedTable] = []  # tables joined as keyed state
        self.sessions_view = ""  # what a SESSION aggregation reads
        self.session_stream = ""  # the stream under keyed sessions
        self.final_stream = ""  # the stream under an EMIT FINAL's keyed windows
        self.changelog_view = ""  # a table aggregation's changelog, when its groups are keyed
        self.join_laterals: list[exp.Lateral] = []  # how it reads a joined row's tables
        self.unmatched_state = False
        self.having: exp.Expr | None = None
        self.aggregated_values: list[exp.Expr] = []  # an aggregated row's (ksqlDB's record)
        self.table_rows: tuple[exp.Expr, exp.Expr | None] | None = None  # a table join's row:
        # whether the join has one, and the WHERE its deletion holds
        self.generated: list[exp.Expr] = []
        self.joined_rows = f"{self.prefix}_stream_joined"
        self.stream_reads: tuple[str, ...] = ()  # the steps of the first stream's view
        self.failures: list[failures.Failure] = []  # what ksqlDB would throw on
        self.texts = record_checks.ClauseTexts({}, None)
        self.joined_at = 0  # where the step of those rows goes
        for index, read in enumerate(analysis.reads):
            self._read(index, read)
        assert self.source_topics, "support admits only queries reading a stream"
        self.stream_alias = self.stream_aliases[0]
        if strategy.table_join and not strategy.keyed_rows:
            self.batch = table_join_stage(self.joined_tables, self.prefix)
        self.key_names = {c.name for c in sink.key_columns}
        self.rows_alias = (TABLES if strategy.aggregated_join else JOINED
                           if strategy.split_streams else self.stream_alias)  # aggregated rows
        # a projection or filter of a windowed source keeps its records' windows in the sink's
        # key, and a join of windowed streams the left stream's windows
        self.source_window = analysis.window if not analysis.aggregate else None
        self.keeps_key = not (analysis.aggregate or analysis.joins or analysis.query.partition_by)
        self.bounds = self._window_bounds()
        self._project()
        self._join()
        self._stateful_stages()
        self.inner = self._inner_sql()
        self.aggregated = self._aggregated_checks()
        self.joined = self._joined_checks()
        # a stateless aggregation writes each changed group's new value; a stage its records
        self.mode = "update" if analysis.aggregate and self.batch is None else "append"

    # -- reading the sources ----------------------------------------------------------------

    def _read(self, index: int, read: SourceRead) -> None:
        source, alias, strategy = read.source, read.alias, self.strategy
        view = f"{self.prefix}_{index}"
        if strategy.table_join:  # its changelog triggers micro-batches; the stage reads it
            self._note_stream(source, alias)
            self.steps += stream_steps(source, f"{self.prefix}_changes_{index}", None,
                                       fail_on_error=strategy.fail_on_error)
            self.joined_tables.append((source, view, source.key_columns[0].name))
        elif source.kind is SourceKind.STREAM or strategy.changelog:
            view = self._read_stream(index, source, alias, view)
        elif strategy.keys_tables or strategy.tables_after or strategy.tables_before:  # keyed
            self.steps += stream_steps(source, f"{view}_changes", None, from_start=True,
                                       fail_on_error=strategy.fail_on_error)
            self.keyed.append(JoinedTable(source, alias, f"{view}_changes"))
        else:  # a stream-table join reads every version of the table's rows
            self.steps += [Step(f"{view}_raw", topic=source.topic, streaming=False),
                           Step(view, table_versions_select(source, quote(f"{view}_raw")))]
            self.versioned.append(index)
        read.table.replace(exp.Table(this=exp.to_identifier(view, quoted=True),
                                     alias=exp.TableAlias(this=exp.to_identifier(alias))))

    def _note_stream(self, source: DataSource, alias: str) -> None:
        self.stream_aliases.append(alias)
        self.source_topics.append(source.topic)

    def _read_stream(self, index: int, source: DataSource, alias: str, view: str) -> str:
        """Read a stream (or the one table's changelog) as a stream; the view the query reads."""
        strategy = self.strategy
        self.stream_view = self.stream_view or view
        self._note_stream(source, alias)
        windows = strategy.join_windows
        watermark = join_watermark(windows, index, strategy.outer_joins) if windows else None
        if index == 0 and strategy.tables_before:  # its records' keyed joins with tables come
            watermark = None  # first: their view is watermarked
        # a stream joined with tables as keyed state falls into windows after the join
        later_windows = strategy.session is not None or strategy.final is not None or (
            strategy.keys_tables or strategy.split_streams)
        read = stream_steps(source, view, None if later_windows else self.analysis.windowing,
                            watermark, fail_on_error=strategy.fail_on_error)
        self.steps += read
        self.stream_reads = self.stream_reads or tuple(step.view for step in read)
        self.stream_views[alias] = view
        if strategy.at_once is not None:  # and its records read in batch, for the other side's
            self.batch_views[alias] = f"{view}_all"
            self.steps += [replace(step, streaming=False, watermark_ms=None, observed=None)
                           for step in stream_steps(source, f"{view}_all", None, watermark)]
        return self._stream_stage(source, view)

    def _stream_stage(self, source: DataSource, view: str) -> str:
        """The stateful stage between a stream and its aggregation, if it has one: the view the
        aggregation then reads (the stage's output), else ``view``."""
        strategy, aggregate = self.strategy, self.analysis.aggregate
        if strategy.changelog and aggregate and strategy.groups_keyed:
            self.changelog_view = view  # the stage is built after the rewrite, from its groups
        elif strategy.changelog and aggregate:
            self.batch = changelog_stage(source, view)
        elif strategy.sessions_keyed:  # the stage is built after the rewrite, from its groups
            self.session_stream = view
            self.sessions_view = f"{view}_input"
        elif strategy.session is not None:
            self.batch = session_stage(source, view, earlier=not self.analysis.query.emit_final)
            self.sessions_view = f"{view}_input"
        elif strategy.final is not None and strategy.stream_state:
            self.final_stream = view
        elif strategy.final is not None:
            self.batch = final_stage(source, view, strategy.final)
        else:
            return view
        return f"{view}_input"

    # -- the result's columns ---------------------------------------------------------------

    def _window_bounds(self) -> _Bounds:
        """Where each row's window is: its aggregation's, its session, or its sources'."""
        if self.strategy.session is not None:  # each record's session, as Kafka Streams merges
            return _Bounds(exp.column(SESSION, table=self.stream_alias, quoted=True))
        if self.source_window is not None and len(self.stream_aliases) > 1:  # a RIGHT or FULL
            # join's record without a left side is keyed by the right side's window
            return _Bounds(exp.func("coalesce", *(exp.column(WINDOW, table=a, quoted=True)
                                                  for a in self.stream_aliases)))
        return _Bounds(exp.column(WINDOW, table=self.rows_alias, quoted=True))

    def _project(self) -> None:
        """Rewrite the SELECT into Spark's terms with the columns every record carries."""
        analysis, select = self.analysis, self.select
        items = self._projection_items()
        rowtime: exp.Expr = exp.column("ROWTIME", table=self.rows_alias, quoted=True)
        if analysis.aggregate:  # an aggregate's record carries the newest input's time
            rowtime = self._newest_time()
        items.append(exp.alias_(rowtime, ROWTIME, quoted=True))
        self.texts = record_checks.clause_texts(
            analysis.projection, self.key_names, select.args.get("where"),
            partitioned=bool(analysis.query.partition_by) and not analysis.aggregate,
            column_text=self._column_text, source_keys=() if analysis.joins else
            {c.name for c in analysis.reads[0].source.key_columns},
            projects_keys=self.transient)
        self.having = select.args.get("having")
        if analysis.aggregate:
            self._mark_prepared(items)
            self.texts = record_checks.with_aggregates(
                self.texts, analysis.projection,
                self.having.this if self.having is not None else None, self._column_text)
            self.aggregated_values = self._aggregated_values()
        null_value = self._null_value()
        items += (self._aggregate_items(null_value) if analysis.aggregate
                  else self._record_items(null_value))
        if self.keeps_key:  # a record without a key keeps none, though its key columns read NULL
            items.append(exp.alias_(exp.column(NULL_KEY, table=self.stream_alias, quoted=True),
                                    NULL_KEY, quoted=True))
        if analysis.windowed:
            self._windowed_items(items)
        elif not analysis.aggregate:
            self._record_window_items(items)
        self.generated = _take_table_functions(items)
        select.set("expressions", items)
        own_windows = frozenset(read.alias for read in analysis.reads if read.source.window
                                is not None) if analysis.joins and not analysis.aggregate else None
        alias = JOINED if self.strategy.split_streams else self.stream_alias
        _rewrite(select, alias, self.config, self.bounds, own_windows or frozenset(),
                 self.failures)
        record_checks.drop_thrown_predicates(select, self.failures)
        _rewrite(exp.Select(expressions=self.aggregated_values), alias, self.config,
                 self.bounds, own_windows or frozenset())

    def _clauses(self) -> tuple[list[exp.Expr], exp.Expr | None, list[exp.Expr],
                                exp.Expr | None]:
        """The query's SELECT expressions, WHERE, GROUP BY and HAVING, as ksqlDB reads them."""
        where, group = self.select.args.get("where"), self.select.args.get("group")
        return ([expression for _, expression in self.analysis.projection],
                where.this if where is not None else None,
                list(group.expressions) if group is not None else [],
                self.having.this if self.having is not None else None)

    def _newest_time(self) -> exp.Expr:
        """An aggregated row's time: its newest input's."""
        return exp.Max(this=exp.column("ROWTIME", table=self.rows_alias, quoted=True))

    def _mark_prepared(self, items: list[exp.Expr]) -> None:
        """Name each aggregate call's argument as ksqlDB's Aggregate.Prepare step does, for
        its record processing errors (:mod:`metastore.planner.prepared_columns`)."""
        projection, where, group, having = self._clauses()
        prepared_columns.mark([*items, *([having] if having is not None else [])], projection,
                              where, group, having, self._column_text)

    def _aggregated_values(self) -> list[exp.Expr]:
        """ksqlDB's aggregated row, which its record processing errors after the aggregation
        log as their record: the columns the aggregation reads, each aggregate call's result
        (as ``KSQL_AGG_VARIABLE_<n>`` numbers them) and the window's bounds; as SELECT items of
        the aggregation, not yet translated. ksqlDB's values of the columns read are the newest
        input row's; here a grouped column's is the group's, ROWTIME the newest, any other NULL:
        an aggregation keeps no more state for its checks than without them, so a replacement
        ksqlDB allows (a changed projection) goes on from the same state."""
        projection, where, group, having = self._clauses()
        values: list[exp.Expr] = [
            self._newest_time() if column.name == "ROWTIME" and not column.table
            else column.copy() if any(column == grouped for grouped in group) else exp.Null()
            for column in required_columns(projection, where, group, having,
                                           self._column_text).values()]
        values += [node.copy() for tree in [*projection, *([having] if having else [])]
                   for node in tree.walk(bfs=False) if functions.is_aggregate(node)]
        if self.analysis.windowed:
            values += [exp.column("WINDOWSTART"), exp.column("WINDOWEND")]
        return [exp.alias_(value, f"{record_checks.CHECKED_VALUE}{index}", quoted=True)
                for index, value in enumerate(values)]

    def _projection_items(self) -> list[exp.Expr]:
        """The query's own columns, by the sink's names."""
        analysis, select = self.analysis, self.select
        source_keys = {c.name for c in analysis.reads[0].source.key_columns}
        items: list[exp.Expr] = []
        for name, expression in analysis.projection:
            item = _with_synthetic_key(expression.copy(), analysis)
            is_key = name in self.key_names
            if is_key and not (analysis.aggregate or analysis.query.partition_by):
                item = outer_join_key(item, select)
            if analysis.query.partition_by and not analysis.aggregate and is_key and not \
                    record_checks.reads_key_only(item, source_keys):
                # ksqlDB computes a new key from the value: a tombstone has none to compute from
                tombstone = exp.column(NULL_VALUE, table=self.stream_alias, quoted=True)
                item = exp.If(this=tombstone, true=exp.Null(), false=item)
            items.append(exp.alias_(item, name, quoted=True))
        if analysis.synthetic_key is not None:  # a key SELECT * leaves out (ksqlDB's ROWKEY)
            key_name, key_value = analysis.synthetic_key
            if key_name in self.key_names and all(n != key_name for n, _ in analysis.projection):
                items.append(exp.alias_(key_value.copy(), key_name, quoted=True))
        return items

    def _null_value(self) -> exp.Expr:
        """Whether a row deletes its key: a tombstone of the stream read, a key without a
        table-table join's row; joins drop a stream's tombstones, and read no deleted rows."""
        stream_null = exp.column(NULL_VALUE, table=self.stream_alias, quoted=True)
        if self.strategy.aggregated_join:
            return exp.column(NULL_VALUE, table=TABLES, quoted=True)
        if not self.analysis.joins:
            return stream_null
        if not (self.strategy.join_windows or self.strategy.table_join):  # a stream-table join
            self.select.where(exp.Not(this=stream_null), copy=False)  # Kafka Streams skips them
        return exp.false()

    def _aggregate_items(self, null_value: exp.Expr) -> list[exp.Expr]:
        """An aggregate's headers (the newest input's, as Kafka Streams carries them), and its
        deletion by HAVING (a group HAVING rejects is deleted from the table, as in ksqlDB)."""
        carried = exp.column(HEADERS, table=self.rows_alias, quoted=True)
        newest = exp.column("ROWOFFSET", table=self.rows_alias, quoted=True)
        items = [exp.alias_(exp.func("max_by", carried, newest), HEADERS, quoted=True)]
        _skip_ungroupable(self.select, null_value)
        if self.having is not None:
            self.select.set("having", None)
            having = exp.Paren(this=self.having.this)
            having.meta[failures.CLAUSE] = failures.HAVING  # its failures are still the HAVING's
            items.append(exp.alias_(exp.Not(this=exp.func("coalesce", having, exp.false())),
                                    NULL_VALUE, quoted=True))
        return items

    def _record_items(self, null_value: exp.Expr) -> list[exp.Expr]:
        """A record's deletion and headers: a table's row that fails the filter is deleted; a
        stream's filter drops a tombstone, a projection keeps it."""
        select, stream_alias = self.select, self.stream_alias
        where = select.args.get("where")
        if self.strategy.changelog and where is not None:
            select.set("where", None)
            moved = exp.Paren(this=where.this)
            moved.meta[failures.CLAUSE] = failures.WHERE  # its failures are still the WHERE's
            null_value = exp.Or(this=null_value, expression=exp.Not(this=exp.func(
                "coalesce", moved, exp.false())))
        items = [exp.alias_(null_value.copy(), NULL_VALUE, quoted=True),
                 exp.alias_(exp.column(HEADERS, table=stream_alias, quoted=True), HEADERS,
                            quoted=True)]
        if select.args.get("where") is not None and not self.analysis.joins:
            select.where(exp.Not(this=exp.column(NULL_VALUE, table=stream_alias, quoted=True)),
                         copy=False)
        return items

    def _windowed_items(self, items: list[exp.Expr]) -> None:
        """A windowed aggregation groups by its window, and its rows carry the window's bounds
        (and, for sessions, which sessions the micro-batch changed)."""
        select, session = self.select, self.strategy.session
        group = select.args.get("group") or exp.Group(expressions=[])
        window_column: exp.Expr = exp.column(WINDOW, table=self.rows_alias, quoted=True)
        if session is not None:
            window_column = exp.column(SESSION, table=self.stream_alias, quoted=True)
        group.append("expressions", window_column)
        select.set("group", group)
        items.append(exp.alias_(self.bounds.start(), WINDOW_START, quoted=True))
        if session is None:
            return
        items.append(exp.alias_(self.bounds.end(), WINDOW_END, quoted=True))
        if not self.analysis.query.emit_final:
            touched = exp.Max(this=exp.Cast(this=exp.column(SENTINEL, table=self.stream_alias,
                                                            quoted=True),
                                            to=exp.DataType.build("INT")))
            items.append(exp.alias_(touched, TOUCHED, quoted=True))
        if not any(item.alias_or_name == NULL_VALUE for item in items):
            items.append(exp.alias_(exp.false(), NULL_VALUE, quoted=True))

    def _record_window_items(self, items: list[exp.Expr]) -> None:
        """A record's source offsets and, from a windowed source, its window's bounds."""
        items.append(exp.alias_(exp.column(SOURCE, table=self.stream_alias, quoted=True), SOURCE,
                                quoted=True))
        if self.source_window is not None:
            items.append(exp.alias_(self.bounds.start(), WINDOW_START, quoted=True))
            if self.source_window.kind == "SESSION":
                items.append(exp.alias_(self.bounds.end(), WINDOW_END, quoted=True))

    # -- joins ------------------------------------------------------------------------------

    def _join(self) -> None:
        """Split off a stream-stream join's rows, join tables as keyed state, and write each
        join in Spark's own terms (after the rewrite into ksqlDB's)."""
        strategy = self.strategy
        self.joined_at = len(self.steps)
        if strategy.split_streams:
            self.outer = self.select
            self.select = split_stream_joins(
                self.outer, self.analysis, strategy.joined_reads, self.joined_rows,
                None if strategy.tables_after else strategy.window,
                [*self.generated, *self._joined_record_columns()])
        if strategy.join_windows:  # before the tables' JOINs leave, when they are keyed state
            bound_stream_joins(self.select, self.analysis, strategy.join_windows,
                                self.stream_alias, self.stream_aliases)
        if self.keyed:
            self._join_keyed_tables()
        if strategy.keyed_rows:
            self._join_keyed_table_rows()
        if self.versioned:
            as_of_stream_time(self.select, self.analysis, self.versioned, self.stream_aliases)
        if strategy.table_join and not strategy.keyed_rows:
            table_join_columns(self.select, self.stream_aliases,
                                [t[2] for t in self.joined_tables],
                                self.analysis.foreign_key_join)
        if self.generated:
            _explode(self.outer or self.select, self.generated,
                     JOINED if self.outer is not None else self.stream_alias)

    def _joined_record_columns(self) -> list[exp.Column]:
        """The columns of each joined stream's row in a processing-log record, which the joined
        rows carry when the rows after them are checked (tables joined after the streams,
        without aggregation: :meth:`_joined_checks`)."""
        strategy = self.strategy
        if not (self.failures and strategy.tables_after) or self.analysis.aggregate:
            return []
        return [exp.column(name, table=read.alias, quoted=True)
                for read in self.analysis.reads[:strategy.joined_reads]
                for name in record_checks.record_columns(read.source)]

    def _join_keyed_tables(self) -> None:
        """A stream's (or a stream-stream join's rows') joins with tables as keyed state."""
        if self.outer is not None:
            self.steps += join_tables(self.outer, self.joined_rows, JOINED, self.keyed,
                                      self.prefix, None,
                                      list(self.outer.args.get("laterals") or []))
            return
        strategy = self.strategy
        if strategy.tables_before:
            self.steps += join_tables_before_streams(
                self.select, self.stream_view, self.stream_alias, self.keyed, self.prefix,
                join_watermark(strategy.join_windows, 0, strategy.outer_joins))
            return
        self.steps += join_tables(self.select, self.stream_view, self.stream_alias, self.keyed,
                                  self.prefix, None if self.final_stream else
                                  self.analysis.windowing)
        if self.final_stream:  # the EMIT FINAL's state reads the joined records
            joined = self.select.args["from_"].this
            self.final_stream = joined.name
            joined.set("this", exp.to_identifier(f"{self.final_stream}_input", quoted=True))

    def _join_keyed_table_rows(self) -> None:
        """A table-table join whose sides are keyed state, on keys or a foreign key."""
        select, prefix = self.select, self.prefix
        tables = [JoinedTable(source, alias, f"{prefix}_changes_{index}") for index, (
            (source, _, _), alias) in enumerate(zip(self.joined_tables, self.stream_aliases,
                                                    strict=True))]
        if self.analysis.foreign_key_join:
            join_steps, present = join_tables_on_foreign_key(
                select, tables, spark_type(self.joined_tables[1][0].key_columns[0].type), prefix)
        else:
            join_steps, present = join_tables_on_keys(select, tables, prefix)
        self.steps += join_steps
        if self.strategy.aggregated_join:
            self.changelog_view = f"{prefix}_joined"
            join_rows, self.join_laterals = join_changelog(select, self.changelog_view, present,
                                                           self.stream_aliases)
            self.steps.append(join_rows)
        else:
            where = select.args.get("where")
            self.table_rows = (present.copy(), where.this.copy() if where is not None else None)
            keyed_table_join_columns(select, self.stream_aliases, present, self.key_names)

    # -- stateful stages --------------------------------------------------------------------

    def _stateful_stages(self) -> None:
        """The keyed state under a table aggregation, SESSION windows or EMIT FINAL windows."""
        select, strategy = self.select, self.strategy
        if self.changelog_view:
            group_steps, self.batch = aggregate_changelog(
                select, self.changelog_view, self.rows_alias, f"{self.changelog_view}_input",
                self.join_laterals)
            self.steps += group_steps
        if self.session_stream:
            assert strategy.session is not None
            keyed = keyed_final_sessions if self.analysis.query.emit_final else keyed_sessions
            session_steps, self.batch = keyed(select, self.session_stream, self.sessions_view,
                                              strategy.session)
            self.steps += session_steps
        if self.final_stream:
            assert strategy.final is not None
            final_steps, self.batch = keyed_final(select, self.final_stream,
                                                  f"{self.final_stream}_input", strategy.final)
            self.steps += final_steps
        if self._aggregates_touched_groups:
            aggregate_touched_groups(select, self.rows_alias)

    @property
    def _aggregates_touched_groups(self) -> bool:
        """Whether the batch stage aggregates the rows of the groups a micro-batch's changes
        touched, those changes as sentinels (a table's aggregation, or a join of tables')."""
        strategy = self.strategy
        return (self.batch is not None and strategy.session is None and strategy.final is None
                and (strategy.aggregated_join or not strategy.table_join))

    def _inner_sql(self) -> str:
        """The SQL of the query's rows, before they are typed as the sink's columns."""
        strategy = self.strategy
        inner = (self._at_once_sql() if strategy.at_once is not None
                 else self.select.sql(dialect="spark", identify=True))
        if self.outer is not None:
            self.steps.insert(self.joined_at, Step(self.joined_rows, inner))
            inner = self.outer.sql(dialect="spark", identify=True)
        if strategy.table_join and not strategy.keyed_rows:
            inner = self._table_join_changes(inner)
        return self._replayed_windows(inner)

    def _at_once_sql(self) -> str:
        """An outer stream-stream join without GRACE PERIOD: its unmatched records keyed
        state when the checkpoint may hold it (and no stream is then read in batch)."""
        strategy = self.strategy
        assert strategy.at_once is not None
        found = keyed_unmatched(self.select, strategy.at_once, self.analysis, self.stream_views,
                                strategy.join_windows[1], self.prefix
                                ) if strategy.stream_state else None
        if found is not None:
            batch_reads = tuple(self.batch_views.values())
            before = [step for step in self.steps[:self.joined_at]
                      if not step.view.startswith(batch_reads)]
            after = [step for step in self.steps[self.joined_at:]
                     if not step.view.startswith(batch_reads)]
            self.steps = [*before, *found[0], *after]
            self.joined_at = len(before) + len(found[0])
            self.unmatched_state = True
        return union_sql(self.select, strategy.at_once, self.batch_views,
                         found[1] if found else None)

    def _table_join_changes(self, inner: str) -> str:
        """A table-table join re-joined in a stage: the rows of the keys a micro-batch changed."""
        assert self.batch is not None
        select = self.select
        names = [item.alias_or_name for item in select.expressions
                 if item.alias_or_name != JOIN_KEY]
        changed_keys = touched_keys(self.batch.view)
        if self.analysis.foreign_key_join:
            (_, left_view, left_key), (_, _, right_key) = self.joined_tables[:2]
            on = (select.args.get("joins") or [])[0].args["on"]
            changed_keys = touched_by_foreign_key(
                self.batch.view, (left_view, self.stream_aliases[0], left_key),
                (self.stream_aliases[1], right_key), on.sql(dialect="spark", identify=True))
        return table_join_changes(inner, names, sorted(self.key_names), changed_keys)

    def _replayed_windows(self, inner: str) -> str:
        """EMIT FINAL and SESSION windows a batch stage replays, closes or diffs."""
        batch, select, strategy = self.batch, self.select, self.strategy
        final, session = strategy.final, strategy.session
        if batch is not None and final is not None and not self.final_stream:
            batch = replay_final(batch, select, final)
        if batch is not None and session is not None:
            emit_final = self.analysis.query.emit_final
            if not self.session_stream:  # keyed EMIT FINAL sessions are written as they close
                batch = replay_sessions(batch, select, session)
                if emit_final:
                    batch = close_sessions(batch, select, session, self.sessions_view)
            if not emit_final:
                batch, inner = session_changes(batch, inner, select, self.sink)
        self.batch = batch
        return inner

    # -- the plan ---------------------------------------------------------------------------

    @property
    def _deletes(self) -> bool:
        return (not self.analysis.aggregate or self.having is not None
                or self.strategy.session is not None)

    def _typed_columns(self) -> list[str]:
        return [f"CAST({quote(c.name)} AS {spark_type(c.type)}) AS {quote(c.name)}"
                for c in self.sink.columns if c.role.is_key or c.role.value == "VALUE"]

    def _query_plan(self, sql: str, topic: str, *, earliest: bool = True,
                    window_key_bytes: int = 0, checked: CheckedRows | None = None) -> QueryPlan:
        plan = QueryPlan(
            self.query_id, tuple(self.steps), sql, self.mode, topic,
            tuple(dict.fromkeys(self.source_topics)), self.batch, earliest=earliest,
            table_state=bool(self.keyed or self.strategy.keyed_rows or self.changelog_view),
            stream_state=bool(self.session_stream or self.final_stream or self.unmatched_state),
            window_key_bytes=window_key_bytes, checked=checked, aggregated=self.aggregated)
        return replace(plan, functions=called_functions(plan))

    def result_plan(self) -> QueryPlan:
        """A push query's plan: its rows are the result's columns and whether they delete."""
        deleted = quote(NULL_VALUE) if self._deletes else "false"
        sql = (f"SELECT {', '.join(self._typed_columns())}, {deleted} AS {quote(NULL_VALUE)} "
               f"FROM ({self.inner})")
        if self.analysis.kind is SourceKind.STREAM:  # a stream's result has no deletions
            sql = f"SELECT * FROM ({sql}) WHERE NOT {quote(NULL_VALUE)}"
        return self._query_plan(sql, "", checked=self._checked_rows())

    def sink_plan(self) -> QueryPlan:
        """A persistent query's plan: its rows are the sink's Kafka records."""
        checked = self._checked_rows()  # before a batch stage of time order is added
        windowed = self.analysis.windowed or self.source_window is not None
        sql = self._time_checked(self._records_sql())
        if self.strategy.join_windows and self.batch is None:
            self.batch, sql = _in_time_order(sql, self.prefix)
        elif self.analysis.windowed and self.batch is None:  # a TUMBLING or HOPPING aggregation's
            self.batch, sql = _in_time_order(sql, self.prefix, WINDOWED_RECORD_ORDER)
        return self._query_plan(
            sql, self.sink.topic, earliest=overrides.offset_reset(self.config or {}) != "latest",
            window_key_bytes=(16 if self._session_key else 8) if windowed else 0, checked=checked)

    def _checked_rows(self) -> CheckedRows | None:
        """The checks of the query's stream rows (observed on its stream view, or on the view
        of its stream's joins with tables), for a query that reads one stream, or one table's
        changelog, and joins nothing else, without a table function or a batch stage other than
        SESSION or EMIT FINAL windows' keyed state's (whose operators read the stream's records
        after their WHERE, through a shuffle: a micro-batch's stage that reads their output
        again computes the stream's view once) (:mod:`metastore.planner.record_checks`); or of
        a join of streams' rows, which its SELECT's view holds (:meth:`_joined_checks`)."""
        if self.joined is not None:
            return self.joined
        reads, source = self.stream_reads, self.analysis.reads[0].source
        if len(reads) > 1 and reads[-2] == f"{reads[-1]}_timed":
            reads = reads[:-1]  # a record's, not the HOPPING windows' rows it is in
        read_as_stream = source.kind is SourceKind.STREAM or self.strategy.changelog
        joined = self._checked_joins()
        windows_state = bool(self.session_stream or self.final_stream)
        if ((len(self.analysis.reads) != 1 and joined is None) or not read_as_stream
                or not reads or self.generated or (self.batch is not None and not windows_state)
                or self.changelog_view):
            return None
        where = self.select.args.get("where") or failures.moved_clause(self.select,
                                                                      failures.WHERE)
        checked = record_checks.checked_rows(
            self.failures, self.texts, where.this if where is not None else None,
            bool(self.analysis.aggregate), self.stream_alias, source,
            reads if joined is None else (f"{self.prefix}_join_{len(self.keyed)}",),
            joined or (), self.scope.alias_of)
        if checked is not None:
            self.steps = [replace(step, observed=record_checks.observed(checked))
                          if step.view == checked.view else step for step in self.steps]
        return checked

    def _aggregated_checks(self) -> CheckedRows | None:
        """The checks of an aggregation's aggregated rows (its HAVING's and its SELECT's outside
        its aggregate calls' arguments), when its aggregate SELECT is a step of its own, in the
        stream or in the batch stage: that SELECT, with the checks' columns and the record's,
        becomes the view they are observed on
        (:func:`~metastore.planner.record_checks.selected_rows`). Of a table's aggregation, the
        record's time is its newest change's, as the row written."""
        staged, sessions = self._aggregates_in_stage(), self._aggregates_sessions()
        if not self.analysis.aggregate or self._names_checked_columns() or not (
                staged or sessions or self._selects_rows()):
            return None  # a replayed EMIT FINAL's or SESSION's: its stage computes it twice
        having = next((item.this.this for item in self.select.expressions  # NOT coalesce(..)
                       if item.alias == NULL_VALUE), None) if self.having is not None else None
        view = (touched_sessions(self.sessions_view) if sessions
                else f"{self.prefix}_aggregated")
        found = record_checks.selected_rows(
            self.failures, self.texts, having.sql(dialect="spark", identify=True)
            if having is not None else None, view, self.analysis.reads[0].source.topic,
            len(self.aggregated_values), aggregated=True)
        if found is None:
            return None
        newest = order = self._newest_time()
        sentinels = self.rows_alias if staged and self._aggregates_touched_groups else None
        if sentinels is not None:
            order = exp.Filter(this=newest.copy(), expression=exp.Where(
                this=exp.column(SENTINEL, table=sentinels, quoted=True)))
        values = [exp.alias_(order.copy(), value.alias, quoted=True) if value.this == newest
                  else value for value in self.aggregated_values]
        if sessions:
            self._observed_sessions(found, values, order)
        else:
            self._observed_select(found, values, order, self.select.args.get("where"),
                                  staged=staged, sentinels=sentinels)
        return found.checked

    def _aggregates_sessions(self) -> bool:
        """Whether the aggregate SELECT is a SESSION aggregation's over its keyed sessions, whose
        stage computes it for the sessions a micro-batch touched and for those it merged away
        (:func:`~metastore.planner.stages.session_changes`)."""
        return bool(self.session_stream) and not self.analysis.query.emit_final

    def _observed_sessions(self, found: record_checks.SelectedChecks, values: list[exp.Expr],
                           order: exp.Expr) -> None:
        """Compute the checks' columns in a SESSION aggregation's SELECT of the sessions a
        micro-batch touched, and observe its view of those: the SELECT of the sessions it
        merged away computes no check, and they are not logged."""
        assert self.batch is not None
        touched = found.checked.view
        computed = touched.removesuffix("_touched")
        assert {computed, touched} <= {step.view for step in self.batch.steps}, touched
        sql = self._checked_select(found, values, order, self.select.args.get("where"))
        observed = record_checks.observed(found.checked, quote(record_checks.CHECKED_ORDER))
        self.batch = replace(self.batch, steps=tuple(
            replace(step, sql=sql) if step.view == computed
            else replace(step, observed=observed) if step.view == touched else step
            for step in self.batch.steps))

    def _aggregates_in_stage(self) -> bool:
        """Whether the aggregate SELECT is the batch stage's, computed each micro-batch over
        the rows of the groups its changes touched (a table aggregation's) or over the records
        of the windows or sessions it closed (an EMIT FINAL's keyed state)."""
        return self._aggregates_touched_groups or bool(self.final_stream) or (
            bool(self.session_stream) and self.analysis.query.emit_final)

    def _joined_checks(self) -> CheckedRows | None:
        """The checks of a join's joined rows (its WHERE's, SELECT's and PARTITION BY's), for a
        join of streams or of tables whose SELECT computes those rows in a streaming step: that
        SELECT, with the checks' columns and the record's (each source's row, as after a
        stream-table join), becomes the view they are observed on. A join of streams' WHERE
        leaves the SELECT, to filter that view after its rows are checked; a table join's is in
        its rows' deletion, as is whether the join has a row at all (ksqlDB evaluates nothing
        of a key without one)."""
        analysis, strategy = self.analysis, self.strategy
        if analysis.aggregate or not analysis.joins or self.generated or not self._selects_rows():
            return None
        if (self.keyed and not (strategy.tables_before or strategy.tables_after)) or (
                strategy.split_streams and not strategy.tables_after):
            return None  # its rows are not its SELECT's over its sources' (or their views')
        if self.table_rows is not None:
            present, where = self.table_rows
            return self._checked_join(where, present, None)
        if not strategy.join_windows:
            return None
        where = self._rows_select.args.get("where")
        users, added = record_checks.split_where(where.this) if where is not None else (None, None)
        return self._checked_join(users, None, added)

    @property
    def _rows_select(self) -> exp.Select:
        """The SELECT that computes the query's rows: the query's, or, split after its
        stream-stream joins, the one over the joined rows (:data:`JOINED`)."""
        return self.outer if self.outer is not None else self.select

    def _checked_join(self, users: exp.Expr | None, present: exp.Expr | None,
                      added: exp.Expr | None) -> CheckedRows | None:
        """Check a join's rows in the view of its SELECT: ``users``, the query's WHERE;
        ``present``, whether the row exists (a table join's); ``added``, the WHERE the view
        keeps, where the query's leaves it (a join of streams')."""
        analysis = self.analysis
        values: list[exp.Expr] = [
            exp.alias_(exp.column(name, table=read.alias, quoted=True),
                       f"{record_checks.CHECKED_VALUE}{index}", quoted=True)
            for index, (read, name) in enumerate(
                (read, name) for read in analysis.reads
                for name in record_checks.record_columns(read.source))]
        kept = users.sql(dialect="spark", identify=True) if users is not None else None
        found = record_checks.selected_rows(
            self.failures, self.texts, kept, f"{self.prefix}_joined_checked",
            analysis.reads[0].source.topic, len(values), aggregated=False,
            present=present.sql(dialect="spark", identify=True) if present is not None else None)
        if found is None:
            return None
        filtered = users is not None and present is None
        if filtered:  # the view drops the rows the WHERE rejects without throwing, as before
            assert users is not None
            values.append(exp.alias_(users.copy(), record_checks.CHECKED_KEPT, quoted=True))
            kept_or_failed = users.copy() if found.where_fails is None else exp.or_(
                users.copy(), sqlglot.parse_one(found.where_fails, dialect="spark"))
            added = exp.and_(kept_or_failed, *([added] if added else []))
        first = analysis.reads[0].alias
        self._observed_select(found, values, exp.func(
            "named_struct", exp.Literal.string("partition"),
            exp.column("ROWPARTITION", table=first, quoted=True), exp.Literal.string("offset"),
            exp.column("ROWOFFSET", table=first, quoted=True)),
            exp.Where(this=added) if added is not None else None)
        if filtered:
            self.inner += f" WHERE {quote(record_checks.CHECKED_KEPT)}"
        return found.checked

    def _selects_rows(self) -> bool:
        """Whether the query's rows are its SELECT's, as a streaming step could compute them
        (and no column of its own takes the name of the checks' columns)."""
        strategy = self.strategy
        return (self.batch is None and strategy.at_once is None
                and (self.outer is None or not self.analysis.aggregate)
                and not (strategy.table_join and not strategy.keyed_rows)
                and not self._names_checked_columns())

    def _names_checked_columns(self) -> bool:
        """Whether a column of the query takes the name of the checks' columns."""
        return any(c.name.lower().startswith(record_checks.CHECKED_PREFIX)
                   for c in self.sink.columns)

    def _observed_select(self, found: record_checks.SelectedChecks, values: list[exp.Expr],
                         order: exp.Expr, where: exp.Expr | None, *, staged: bool = False,
                         sentinels: str | None = None) -> None:
        """Make the query's SELECT, with ``values`` and ``found``'s columns and ``where`` for
        its WHERE, the step ``found`` observes, which carries its first failing rows by
        ``order``; the query's rows are that view's. ``staged``: the SELECT is the batch
        stage's, whose step it becomes; ``sentinels``: as :meth:`_checked_select`'s."""
        view = found.checked.view
        step = Step(view, self._checked_select(found, values, order, where, sentinels),
                    observed=record_checks.observed(found.checked,
                                                    quote(record_checks.CHECKED_ORDER)))
        if staged:
            assert self.batch is not None
            self.batch = replace(self.batch, steps=(*self.batch.steps, step))
        else:
            self.steps.append(step)
        self.inner = f"SELECT * FROM {quote(view)}"

    def _checked_select(self, found: record_checks.SelectedChecks, values: list[exp.Expr],
                        order: exp.Expr, where: exp.Expr | None, sentinels: str | None = None
                        ) -> str:
        """The query's SELECT with ``values``, ``found``'s columns and ``order`` added, and
        ``where`` for its WHERE; ``sentinels``: the alias of rows it aggregates with sentinels,
        which the aggregate calls it adds leave out, as its own do."""
        checks = sqlglot.parse_one(f"SELECT {', '.join(found.columns)}", dialect="spark")
        added = [item.copy() for item in [*values, *checks.expressions]]
        if sentinels is not None:
            for item in added:
                leave_out_sentinels(item, sentinels)
        observed = self._rows_select.copy()
        observed.set("expressions", [
            *self._rows_select.expressions, *added,
            exp.alias_(order, record_checks.CHECKED_ORDER, quoted=True)])
        observed.set("where", where.copy() if where is not None else None)
        return observed.sql(dialect="spark", identify=True)

    def _column_text(self, column: exp.Column) -> str:
        """``column`` as ksqlDB's messages name it (``ALIAS_COLUMN`` after a join)."""
        if record_checks.bound_by_lambda(column):
            return column.name
        return self.scope.column_text(column, "SELECT")

    def _checked_joins(self) -> list[record_checks.CheckedJoin] | None:
        """The tables a stream joins as keyed state, each with its columns' names in the view
        of the joins (:func:`~metastore.planner.table_state.join_tables`), when the query reads
        nothing else; else None."""
        if not self.keyed or self.outer is not None or len(self.analysis.reads) != 1 + len(
                self.keyed):
            return None
        return [record_checks.CheckedJoin(table.alias, table.source,
                                          hidden_columns(table, number))
                for number, table in enumerate(self.keyed, start=1)]

    @property
    def _session_key(self) -> bool:
        return self.strategy.session is not None or (
            self.source_window is not None and self.source_window.kind == "SESSION")

    def _records_sql(self) -> str:
        """The sink's records (key, value, headers) from the typed rows."""
        windowed = self.analysis.windowed or self.source_window is not None
        hidden = None if self.analysis.aggregate else SOURCE
        typed = [*self._typed_columns(), f"{_sink_time(self.sink)} AS {quote(ROWTIME)}"]
        typed += [quote(NULL_VALUE)] if self._deletes else []
        typed.append(quote(HEADERS))
        typed += [quote(NULL_KEY)] if self.keeps_key else []
        typed += [quote(hidden)] if hidden is not None else []
        typed += [quote(WINDOW_START)] if windowed else []
        typed += [quote(WINDOW_END)] if self._session_key else []
        value = encoding.value_expression(self.sink)
        if self._deletes:
            value = f"CASE WHEN {quote(NULL_VALUE)} THEN NULL ELSE {value} END"
        headers = encoding.headers(quote(ROWTIME), quote(SOURCE) if hidden == SOURCE else None,
                                   quote(HEADERS))
        key = encoding.key_expression(self.sink, quote(WINDOW_START) if windowed else None,
                                      quote(WINDOW_END) if self._session_key else None)
        if self.keeps_key:
            key = f"CASE WHEN {quote(NULL_KEY)} THEN NULL ELSE {key} END"
        records = [f"{key} AS key", f"{value} AS value", f"{headers} AS headers"]
        if self.strategy.join_windows and self.batch is None:
            records.append(f"{quote(ROWTIME)} AS {ORDER}")
        return (f"SELECT {', '.join(records)} FROM (SELECT {', '.join(typed)} FROM "
                f"({self.inner}) AS __ms_result) AS __ms_typed")

    def _time_checked(self, sql: str) -> str:
        """ksqlDB drops a record its timestamp column rejects."""
        sink = self.sink
        if sink.timestamp_column is None:
            return sql
        column = sink.column(sink.timestamp_column)
        if column is not None and column.type == ty.STRING:
            # text that does not match the TIMESTAMP_FORMAT has no time: ksqlDB fails the
            # record; a tombstone has no text and passes
            deleted = f"{quote(NULL_VALUE)} OR " if self._deletes else ""
            return sql + (f" WHERE {deleted}({quote(ROWTIME)} IS NOT NULL AND "
                          f"{quote(ROWTIME)} >= 0)")
        return sql + f" WHERE {quote(ROWTIME)} IS NULL OR {quote(ROWTIME)} >= 0"


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
    for index, expression in enumerate(group.expressions if group is not None else []):
        grouped = exp.Not(this=exp.Is(this=expression.copy(), expression=exp.Null()))
        grouped.meta[failures.GROUP_KEY] = index  # its failures are the GROUP BY's
        conditions.append(grouped)
    for condition in conditions:
        select.where(condition, copy=False)


@dataclass(frozen=True)
class _Bounds:
    """Where a window's rows find its bounds: a struct column of TIMESTAMPs ``start`` and
    ``end`` (a time window's, a session's as replayed by
    :func:`metastore.planner.stages.replay_sessions`, or a windowed source's,
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
             bounds: _Bounds | None = None, own_windows: frozenset[str] = frozenset(),
             found: list[failures.Failure] | None = None) -> None:
    """ksqlDB expressions as Spark SQL with ksqlDB's meaning: every function call, array index
    and division through :func:`metastore.functions.library.to_spark`; window bounds and
    struct access as the query's views hold them. ``own_windows``: the aliases of joined
    windowed sources, whose qualified bounds are their own records' windows; ``found``: where
    to record the nodes whose NULL stands for ksqlDB's exception."""

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
                                     config=config or {}, failures=found)
    try:
        functions.to_spark(select, context)
    except UntranslatableError as error:
        raise QueryRuntimeError(explain(str(error))) from error
