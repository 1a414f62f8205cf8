"""One persistent query as a Spark StreamingQuery: start it from a plan, read its progress.

Each query runs in a Spark session of its own (``spark.newSession()``: the node's SparkContext,
its own temporary views and SQL settings), with ANSI mode off so that an expression over a bad
value yields NULL, as in ksqlDB, instead of failing the query (a record that cannot be decoded is
skipped before: :func:`metastore.spark.views.decode_select`). Its checkpoint (source offsets and aggregation
state) is ``<checkpoint root>/<query id>``; a query restarted anywhere with the same checkpoint
resumes after the last micro-batch it committed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metastore.jvm.classes import (
    COUNTED_KAFKA_WRITE_CLASS,
    FINAL_SESSIONS_CLASS,
    FINAL_WINDOWS_CLASS,
    FOREIGN_KEY_JOIN_CLASS,
    GROUP_MEMBERS_CLASS,
    INTERCEPTOR_CLASS,
    ROW_VERSIONS_CLASS,
    SESSION_MEMBERS_CLASS,
    STREAM_TIME_CLASS,
    TABLE_SIDE_JOIN_CLASS,
    TABLE_TABLE_JOIN_CLASS,
    TRANSACTIONAL_SINK_CLASS,
    UNMATCHED_RECORDS_CLASS,
    WINDOW_KEY_BYTES_CONFIG,
    WINDOWED_PARTITIONER_CLASS,
)
from metastore.planner.exceptions import QueryRuntimeError
from metastore.planner.steps import (
    FinalSessions,
    FinalWindows,
    ForeignKeyTableJoin,
    GroupMembers,
    KeyedOperator,
    Observed,
    QueryPlan,
    RowVersions,
    Step,
    StreamTime,
    TableJoin,
    TableSideJoin,
    UnmatchedRecords,
)
from metastore.runtime.checkpoints import CheckpointDir, LocalDir
from metastore.spark.session import query_session
from metastore.spark.views import query_read_options

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Row, SparkSession
    from pyspark.sql.streaming.listener import StreamingQueryListener
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

log = logging.getLogger(__name__)

ROCKSDB_STATE_STORE = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
"""The state store ``transformWithState`` needs (a query's checkpoint keeps the one it started
with)."""

CHANGELOG_CHECKPOINTING = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
"""A micro-batch of keyed state commits the changes it made to each RocksDB store (a changelog
file) rather than a snapshot of the store's files; snapshots are taken in the background. A
checkpoint goes on from either way of writing, in both directions (Spark's RocksDB state store
reads both), so a query started before it was on keeps its state."""

STREAM_STATE_BATCH_RECORDS = 100_000
"""The most records a micro-batch of a query with stream state reads from each source: its
processors keyed by source partition (stream time, EMIT FINAL's windows) hold a partition's
records of the micro-batch in memory to take them in offset order, so a query catching up on a
long backlog does it in micro-batches of this size."""

Deliver = Callable[[list["Row"]], None]
"""Where a transient query's micro-batch rows go (called on Spark's streaming thread)."""


@dataclass(frozen=True)
class Progress:
    """What the last micro-batch processed: the next offset per (topic, partition)."""

    batch_id: int
    offsets: Mapping[tuple[str, int], int]


def start(spark: SparkSession, plan: QueryPlan, checkpoint: CheckpointDir,
          kafka_options: Mapping[str, str], available_now: bool = False,
          listener: StreamingQueryListener | None = None,
          transactional_id: str | None = None,
          producer_options: Mapping[str, str] | None = None,
          real_time_ms: int | None = None,
          stage_observed: StageObserved | None = None,
          wrote: Callable[[int, int], None] | None = None) -> StreamingQuery:
    """Start ``plan`` as a StreamingQuery writing its sink topic; returns the StreamingQuery.

    ``available_now`` processes what the source topics hold when it starts, then stops (what a
    test run wants); otherwise the query runs until stopped. ``listener`` hears its progress
    (it runs in a session of its own, whose queries only that session's listeners hear).
    With a ``transactional_id`` the query runs exactly once: each micro-batch is written in one
    Kafka transaction with its id (:func:`transactional_sink`); else Spark's Kafka sink writes
    it, at least once. ``producer_options`` are its sink producer's own (``kafka.*``).
    With ``real_time_ms`` the query runs in Spark's real-time mode, in batches of that length
    (a stateless plan, at least once: :mod:`metastore.planner.real_time`), in Spark's update
    output mode, which real-time mode requires and which writes a stateless query's rows as
    append does. ``stage_observed`` hears what the batch stage's observed steps measure;
    ``wrote``, each micro-batch's id and the records the query's own writer wrote of it: the
    exactly-once writer's committed records, or those of a batch stage's Spark Kafka batch
    writer (Spark's streaming Kafka sink counts its own in the query's progress).
    """
    if real_time_ms is not None and (plan.batch is not None or transactional_id is not None):
        raise QueryRuntimeError(f"{plan.query_id}: real-time mode runs neither a batch stage "
                                "nor an exactly-once sink")
    session = query_session(spark)
    if listener is not None:
        session.streams.addListener(listener)
    reads = {"startingOffsets": "earliest" if plan.earliest else "latest"}
    if plan.stream_state:
        reads["maxOffsetsPerTrigger"] = str(STREAM_STATE_BATCH_RECORDS)
    if transactional_id is not None:  # a micro-batch passes through the driver's memory
        reads["maxOffsetsPerTrigger"] = str(min(EXACTLY_ONCE_BATCH_RECORDS, int(
            reads.get("maxOffsetsPerTrigger", EXACTLY_ONCE_BATCH_RECORDS))))
        session.conf.set("spark.sql.streaming.stateStore.checkpointFormatVersion", "1")
    _register(session, plan.steps, kafka_options, reads=reads)
    partitioner = sink_partitioner(plan) if checkpoint.holds_windowed_partitioning() else {}
    checkpoint.prepare(plan.table_state, plan.stream_state, bool(partitioner))
    sink_options = {**kafka_options, **partitioner, **(producer_options or {}),
                    "kafka.interceptor.classes": INTERCEPTOR_CLASS, "topic": plan.topic}
    emit = _counted(transactional_sink(sink_options, transactional_id, checkpoint)
                    if transactional_id is not None else counted_kafka_write(sink_options), wrote)
    if plan.batch is None and transactional_id is None:
        writer = (session.sql(plan.sql).writeStream.format("kafka").options(**sink_options)
                  .outputMode(plan.output_mode))
    elif plan.batch is None:
        def write(rows: DataFrame, batch_id: int) -> None:  # whether it wrote, no one asks
            emit(rows, batch_id)

        writer = session.sql(plan.sql).writeStream.foreachBatch(write).outputMode(
            plan.output_mode)
    else:
        writer = _stage_writer(session, plan, checkpoint, kafka_options, emit, stage_observed)
    writer = writer.option("checkpointLocation", checkpoint.location).queryName(plan.query_id)
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif real_time_ms is not None:
        writer = writer.outputMode("update").trigger(  # type: ignore[call-overload]
            realTime=f"{real_time_ms} milliseconds")  # pyspark 4.2 declares no overload of it
    return writer.start()


Emit = Callable[["DataFrame", int], int | None]
"""Writes a micro-batch's result rows (Spark's Kafka sink columns) with the micro-batch's id:
the records written, -1 when an earlier attempt had written the micro-batch, None when they
are not counted (a push query's, delivered to its client)."""

Kept = list[tuple["DataFrame", Observed]]
"""A batch stage's observed steps: each step's frame, cached, and its :attr:`Step.observed`."""

StageObserved = Callable[[Mapping[str, Any]], None]
"""Hears, once per micro-batch, what each observed step of a batch stage measured, by the
observation's name (as a streaming step's reach a StreamingQueryProgress's observedMetrics)."""


EXACTLY_ONCE_BATCH_RECORDS = 200_000
"""The source records an exactly-once micro-batch reads at most: its result passes through the
driver, one partition at a time, under ``spark.driver.maxResultSize`` (a filter's partition
of a micro-batch is then some 100,000 rows, 10-20 MB). Fewer records a micro-batch cost a
stateful query a micro-batch more of state versions and jobs each (50,000 took a count by key
over 1,000,000 records from 0.99x the at-least-once query's throughput to 0.57x)."""


def transactional_id(scope: str, query_id: str) -> str:
    """The transactional id of an exactly-once query: the same wherever it runs in ``scope``
    (a service, or a test run's namespace), so a producer that starts fences the last one."""
    return f"{scope.rstrip('-') or 'metastore'}-query-{query_id}"


def transactional_sink(sink_options: Mapping[str, str], transactional_id: str,
                       checkpoint: CheckpointDir) -> Emit:
    """Each micro-batch's rows written to the sink topic in one Kafka transaction that commits
    the micro-batch's id (with the id of the query's checkpoint), by the query's producer
    (``TransactionalSink``, whose source says why a micro-batch Spark runs again is written
    once)."""
    config = {name.removeprefix("kafka."): value for name, value in sink_options.items()
              if name.startswith("kafka.")}
    topic = sink_options["topic"]
    checkpoint_id: list[str] = []

    def write(rows: DataFrame, batch_id: int) -> int:
        if not checkpoint_id:  # Spark writes it when the query first starts, before a batch
            checkpoint_id.append(str(json.loads(checkpoint.read_text("metadata"))["id"]))
        jvm: Any = rows.sparkSession._jvm
        return int(_java_class(jvm, TRANSACTIONAL_SINK_CLASS).write(
            rows._jdf, config, topic, transactional_id, checkpoint_id[0], batch_id))

    return write


def counted_kafka_write(sink_options: Mapping[str, str]) -> Emit:
    """Each micro-batch's rows written by Spark's Kafka batch writer, at least once, counted
    (``CountedKafkaWrite``: an accumulator of the rows handed to the writer)."""
    options = dict(sink_options)

    def write(rows: DataFrame, _batch_id: int) -> int:
        jvm: Any = rows.sparkSession._jvm
        return int(_java_class(jvm, COUNTED_KAFKA_WRITE_CLASS).write(rows._jdf, options))

    return write


def _counted(emit: Emit, wrote: Callable[[int, int], None] | None) -> Emit:
    """``emit``, telling ``wrote`` each micro-batch's id and the records it wrote of it."""
    if wrote is None:
        return emit

    def write(rows: DataFrame, batch_id: int) -> int | None:
        written = emit(rows, batch_id)
        if written is not None and written >= 0:
            wrote(batch_id, written)
        return written

    return write


def close_transactional_sink(spark: SparkSession, transactional_id: str) -> None:
    """Close the producer of an exactly-once query this JVM ran (its query stopped)."""
    jvm: Any = spark.sparkContext._jvm
    _java_class(jvm, TRANSACTIONAL_SINK_CLASS).close(transactional_id)


def sink_partitioner(plan: QueryPlan) -> dict[str, str]:
    """The sink producer's partitioner: Kafka's default, or for a windowed sink the key's
    partition without its window (Kafka Streams' ``WindowedStreamPartitioner``)."""
    if not plan.window_key_bytes:
        return {}
    return {"kafka.partitioner.class": WINDOWED_PARTITIONER_CLASS,
            f"kafka.{WINDOW_KEY_BYTES_CONFIG}": str(plan.window_key_bytes)}


def start_transient(session: SparkSession, plan: QueryPlan, checkpoint: Path,
                    kafka_options: Mapping[str, str], deliver: Deliver, *,
                    max_records_per_batch: int,
                    stage_observed: StageObserved | None = None) -> StreamingQuery:
    """Start ``plan`` (:func:`metastore.planner.plan.compile_push`) in ``session`` (its own,
    from :func:`query_session`) as a StreamingQuery that hands each micro-batch's rows to
    ``deliver``, at most ``max_records_per_batch`` source records per micro-batch;
    ``stage_observed`` as :func:`start`'s."""
    reads = {"startingOffsets": "earliest" if plan.earliest else "latest",
             "maxOffsetsPerTrigger": str(max_records_per_batch)}
    _register(session, plan.steps, kafka_options, reads=reads)
    if plan.batch is None:
        writer = (session.sql(plan.sql).writeStream.outputMode(plan.output_mode)
                  .foreachBatch(lambda rows, _batch_id: deliver(rows.collect())))
    else:
        writer = _stage_writer(session, plan, LocalDir(checkpoint), kafka_options,
                               lambda result, _batch_id: deliver(result.collect()),
                               stage_observed)
    return (writer.option("checkpointLocation", LocalDir(checkpoint).location)
            .queryName(plan.query_id).start())


def _stage_writer(session: SparkSession, plan: QueryPlan, checkpoint: CheckpointDir,
                  kafka_options: Mapping[str, str], emit: Emit,
                  observed: StageObserved | None = None) -> DataStreamWriter:
    """The stream of a plan with a :class:`~metastore.planner.steps.BatchStage`: per
    micro-batch, its rows as the stage's view, the stage's steps over the source topics read up
    to the micro-batch's end, and the plan's SQL over them, whose result goes to ``emit``. A
    batch query's observed metrics reach no progress: an observed step's rows are kept (Spark's
    cache) while the result is written, then measured, and ``observed`` hears the measures,
    unless the micro-batch wrote nothing (an exactly-once query's, written before). A
    measurement that fails is logged: the micro-batch's result is written already."""
    stage = plan.batch
    assert stage is not None, "a plan with a batch stage"

    def run_micro_batch(rows: DataFrame, batch_id: int) -> None:
        batch_session = rows.sparkSession
        rows.createOrReplaceTempView(stage.view)
        kept: Kept | None = None if observed is None else []
        try:
            _register(batch_session, stage.steps, kafka_options,
                      micro_batch_ends(checkpoint, batch_id), kept=kept)
            written = emit(batch_session.sql(plan.sql), batch_id)
            if kept and observed is not None and written != -1:
                _hand_measured(kept, observed, plan.query_id, batch_id)
        finally:
            for frame, _ in kept or ():
                frame.unpersist()

    return (session.sql(stage.source_sql).writeStream.foreachBatch(run_micro_batch)
            .outputMode(plan.output_mode))


def start_stream(spark: SparkSession, steps: tuple[Step, ...], view: str, checkpoint: Path,
                 kafka_options: Mapping[str, str],
                 on_batch: Callable[[DataFrame, int], None], *, trigger_ms: int,
                 max_records_per_batch: int, name: str) -> StreamingQuery:
    """Start a StreamingQuery over ``steps``' views that hands each micro-batch of ``view``
    to ``on_batch``, reading from the sources' first offsets, every ``trigger_ms``, at most
    ``max_records_per_batch`` source records at a time."""
    session = query_session(spark)
    _register(session, steps, kafka_options, reads={
        "startingOffsets": "earliest", "maxOffsetsPerTrigger": str(max_records_per_batch)})
    return (session.table(view).writeStream.foreachBatch(on_batch)
            .option("checkpointLocation", LocalDir(checkpoint).location).queryName(name)
            .trigger(processingTime=f"{trigger_ms} milliseconds").start())


def explain(spark: SparkSession, plan: QueryPlan, kafka_options: Mapping[str, str]) -> str:
    """Spark's plan of ``plan`` (parsed, analysed, optimised and physical), without starting
    it. A plan with a batch stage shows its stream, then the SQL each micro-batch runs."""
    session = query_session(spark)
    _register(session, plan.steps, kafka_options)
    frame = session.sql(plan.sql if plan.batch is None else plan.batch.source_sql)
    jvm: Any = frame.sparkSession._jvm
    text = str(jvm.PythonSQLUtils.explainString(frame._jdf.queryExecution(), "extended"))
    if plan.batch is not None:
        text += f"\n== Each micro-batch runs ==\n{plan.sql}\n"
    return text


def micro_batch_ends(checkpoint: CheckpointDir, batch_id: int) -> dict[str, dict[str, int]]:
    """The source offsets micro-batch ``batch_id`` ends at, per topic and partition, from the
    query's offset log (written before the micro-batch runs)."""
    ends: dict[str, dict[str, int]] = {}
    lines = checkpoint.read_text(f"offsets/{batch_id}").splitlines()
    for line in lines[2:]:  # a version line, the batch's metadata, then each source's offsets
        try:
            offsets = json.loads(line)
        except ValueError:
            continue
        for topic, partitions in (offsets.items() if isinstance(offsets, dict) else ()):
            if isinstance(partitions, dict):
                ends[str(topic)] = {str(p): int(o) for p, o in partitions.items()}
    return ends


def _hand_measured(kept: Kept, observed: StageObserved, query_id: str, batch_id: int) -> None:
    """Hand ``observed`` what each kept frame's observation measures over its rows, by the
    observation's name."""
    try:
        observed({name: frame.agg(*_columns(measures)).collect()[0]
                  for frame, (name, measures) in kept})
    except Exception:  # the result is written: failing the micro-batch would write it again
        log.warning("%s: could not measure the checks of micro-batch %d", query_id, batch_id,
                    exc_info=True)


def _columns(expressions: tuple[str, ...]) -> list[Column]:
    from pyspark.sql.functions import expr

    return [expr(expression) for expression in expressions]


def _register(session: SparkSession, steps: tuple[Step, ...], kafka_options: Mapping[str, str],
              ends: Mapping[str, Mapping[str, int]] | None = None,
              reads: Mapping[str, str] | None = None,
              kept: Kept | None = None) -> None:
    """Register each step's view: a Kafka read (streaming or batch) or a SELECT. A batch read of
    a topic in ``ends`` stops there, so every scan of it in a micro-batch reads the same records:
    those up to the micro-batch's end. ``reads``: options of the streaming reads (by default,
    from the earliest offset, unbounded micro-batches). With ``kept``, an observed step's frame
    is cached and added to it with its observation, to be measured once the frame's rows were
    used, instead of being observed."""
    for step in steps:
        if step.topic is not None:
            reader = session.readStream if step.streaming else session.read
            options = query_read_options(step.topic, kafka_options)
            if step.streaming and reads:
                options.update(reads)
            if step.from_start:
                options["startingOffsets"] = "earliest"
            if not step.streaming and ends and step.topic in ends:
                options["endingOffsets"] = json.dumps({step.topic: dict(ends[step.topic])})
            frame = reader.format("kafka").options(**options).load()
        elif step.keyed is not None:
            frame = _keyed_operator(session, step.view, step.keyed)
        else:
            assert step.sql is not None, "a step reads a topic or runs a SELECT"
            frame = session.sql(step.sql)
        if step.observed is not None and kept is not None:
            frame = frame.persist()
            kept.append((frame, step.observed))
        elif step.observed is not None:
            name, measures = step.observed
            frame = frame.observe(name, *_columns(measures))
        if step.watermark_ms is not None:
            frame = frame.withWatermark("__MS_TS", f"{step.watermark_ms} milliseconds")
        frame.createOrReplaceTempView(step.view)


def _keyed_operator(session: SparkSession, view: str, operator: KeyedOperator) -> DataFrame:
    """The view of a keyed stateful operator, one of the project's JVM processors under
    ``transformWithState``, which keeps its state in RocksDB."""
    session.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_STATE_STORE)
    session.conf.set(CHANGELOG_CHECKPOINTING, "true")
    jvm: Any = session._jvm
    jsession = session._jsparkSession
    if isinstance(operator, TableSideJoin):
        _java_class(jvm, TABLE_SIDE_JOIN_CLASS).register(
            jsession, operator.stream_view, operator.table_view, view,
            list(operator.table_columns), operator.left)
    elif isinstance(operator, TableJoin):
        _java_class(jvm, TABLE_TABLE_JOIN_CLASS).register(
            jsession, list(operator.table_views), view,
            [list(columns) for columns in operator.table_columns])
    elif isinstance(operator, ForeignKeyTableJoin):
        _java_class(jvm, FOREIGN_KEY_JOIN_CLASS).register(
            jsession, operator.left_view, operator.right_view, view, list(operator.left_columns),
            list(operator.right_columns))
    elif isinstance(operator, RowVersions):
        _java_class(jvm, ROW_VERSIONS_CLASS).register(jsession, operator.changelog_view, view)
    elif isinstance(operator, GroupMembers):
        _java_class(jvm, GROUP_MEMBERS_CLASS).register(jsession, operator.changes_view, view)
    elif isinstance(operator, StreamTime):
        _java_class(jvm, STREAM_TIME_CLASS).register(jsession, operator.records_view, view)
    elif isinstance(operator, UnmatchedRecords):
        _java_class(jvm, UNMATCHED_RECORDS_CLASS).register(
            jsession, operator.records_view, operator.other_view, view, operator.lookback_ms,
            operator.retention_ms)
    elif isinstance(operator, FinalSessions):
        _java_class(jvm, FINAL_SESSIONS_CLASS).register(
            jsession, operator.grouped_view, view, operator.gap_ms, operator.grace_ms,
            operator.retention_ms)
    elif isinstance(operator, FinalWindows):
        _java_class(jvm, FINAL_WINDOWS_CLASS).register(
            jsession, operator.windowed_view, view, operator.grace_ms, operator.retention_ms)
    else:
        _java_class(jvm, SESSION_MEMBERS_CLASS).register(
            jsession, operator.timed_view, view, operator.gap_ms, operator.grace_ms,
            operator.retention_ms)
    return session.table(view)


def _java_class(jvm: Any, name: str) -> Any:
    found = jvm
    for part in name.split("."):
        found = getattr(found, part)
    return found


def progress(streaming_query: StreamingQuery) -> Progress | None:
    """The offsets the last micro-batch reached, or None before the first one."""
    data = _last_progress(streaming_query)
    if data is None:
        return None
    return Progress(int(data.get("batchId", -1)), _source_offsets(data, "endOffset"))


def latest_offsets(streaming_query: StreamingQuery) -> dict[tuple[str, int], int]:
    """The end offsets Spark saw in its sources at the last trigger (none before one)."""
    data = _last_progress(streaming_query)
    return {} if data is None else _source_offsets(data, "latestOffset")


def _last_progress(streaming_query: StreamingQuery) -> dict[str, Any] | None:
    last = streaming_query.lastProgress
    if last is None:
        return None
    return json.loads(last.json) if hasattr(last, "json") else dict(last)


def _source_offsets(data: dict[str, Any], field: str) -> dict[tuple[str, int], int]:
    offsets: dict[tuple[str, int], int] = {}
    for source in data.get("sources") or []:
        marks = source.get(field)
        if isinstance(marks, str):
            try:
                marks = json.loads(marks)
            except ValueError:
                continue
        if not isinstance(marks, dict):
            continue
        for topic, partitions in marks.items():
            for partition, offset in (partitions or {}).items():
                offsets[(topic, int(partition))] = int(offset)
    return offsets


def failure(streaming_query: StreamingQuery) -> str | None:
    """The reason a stopped query failed (its first line, and the innermost cause Spark's
    text names when there is one), or None."""
    error = streaming_query.exception()
    if error is None:
        return None
    return failure_text(str(getattr(error, "desc", None) or error)) or type(error).__name__


FAILURE_DETAIL_CHARS = 20_000
"""How much of a failure's whole text (its causes, one a line) is kept to classify it."""


def failure_detail(streaming_query: StreamingQuery) -> str | None:
    """A stopped query's whole failure text, its ``Caused by:`` lines included (at most
    :data:`FAILURE_DETAIL_CHARS`), or None."""
    error = streaming_query.exception()
    if error is None:
        return None
    return str(getattr(error, "desc", None) or error)[:FAILURE_DETAIL_CHARS]


def failure_text(text: str) -> str:
    """A JVM failure's text as one line: its first, then its innermost ``Caused by:``; at
    most 1,000 characters."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    causes = [line.removeprefix("Caused by:").strip() for line in lines
              if line.startswith("Caused by:")]
    shown = lines[0] if not causes or causes[-1] in lines[0] else (
        f"{lines[0][:600]} (caused by {causes[-1][:380]})")
    return shown[:1000]
