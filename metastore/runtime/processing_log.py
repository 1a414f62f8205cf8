"""The processing log, as ksqlDB's: a Kafka topic of the records queries could not process, and
a stream ``KSQL_PROCESSING_LOG`` over it (its settings: :mod:`metastore.runtime.
processing_log_settings`).

A query's failure (:class:`QueryFailure`) is logged as ksqlDB logs a streams thread's, after
the SERIALIZATION_ERROR or PRODUCTION_ERROR of the sink record it failed on, if a cause says so.
A query that skips a record it cannot deserialize (:mod:`metastore.runtime.skipped`) hands the
offsets of that micro-batch's source to :class:`ProcessingLog`, whose thread reads them again in
a Spark batch job with the same decoding (:func:`metastore.spark.views.decode_select`) and writes
one DESERIALIZATION_ERROR entry per unreadable record, in ksqlDB's JSON layout: so the rules of
what is unreadable are the query's own, nothing is held per record in the driver, and a topic
without bad records costs nothing. The log is best effort, as ksqlDB's log4j appender is: a
micro-batch Spark runs again logs its records again, and entries are lost when the node stops
before it wrote them, when its log's topic is missing, or when more micro-batches wait than its
queue holds (each said in the node's log).
"""

from __future__ import annotations

import json
import logging
import queue
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from metastore.catalog.model import DataSource
from metastore.planner.steps import CheckedRows, Step
from metastore.runtime.error_types import REGISTRY_REFUSAL
from metastore.spark.session import query_session
from metastore.spark.types import quote, string_literal
from metastore.spark.views import decode_select, raw_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

Offsets = Mapping[int, int]
"""A topic's offsets by partition."""


DESERIALIZATION_ERROR = 0
"""ksqlDB's ``MessageType.DESERIALIZATION_ERROR``."""
RECORD_PROCESSING_ERROR = 1
"""ksqlDB's ``MessageType.RECORD_PROCESSING_ERROR``: a row a query's expressions could not
compute (:mod:`metastore.runtime.record_errors`)."""
SERIALIZATION_ERROR = 2
"""ksqlDB's ``MessageType.SERIALIZATION_ERROR``: the sink's serializer could not write a record
(its format's registry refused the schema, or the schema cannot hold the record)."""
PRODUCTION_ERROR = 3
"""ksqlDB's ``MessageType.PRODUCTION_ERROR``: the sink's producer could not send a record."""
KAFKA_STREAMS_THREAD_ERROR = 4
"""ksqlDB's ``MessageType.KAFKA_STREAMS_THREAD_ERROR``: a query's failure."""
UNCAUGHT = "Unhandled exception caught in streams thread"
"""The message of ksqlDB's entry for a query's failure."""


_UNWRITABLE = re.compile(r"SerializationException: Error serializing a record of subject "
                         r"(\S+): ([^\n]+)")
"""The project's JVM writer of a registry format failing on a record its schema cannot hold
(``io.metastore.avro.UnwritableRecord``): the subject, the reason."""
_TOO_LARGE = re.compile(r"RecordTooLargeException:\s*(.+)")
_SEND_TIMEOUT = re.compile(
    r"TimeoutException:\s*((?:Expiring \d+ record\(s\) for (\S+)-\d+|Topic (\S+) not "
    r"present in metadata).*)")


@dataclass(frozen=True)
class QueryFailure:
    """A persistent query failed at ``time_ms`` (its Spark query stopped with ``causes``, the
    failure's first line and innermost cause; ``detail``, its whole text, a cause a line)
    writing to ``sink_topic``."""

    query: str
    causes: tuple[str, ...]
    time_ms: int
    detail: str = ""
    sink_topic: str = ""

    def entries(self) -> list[str]:
        """ksqlDB's entries for the failure, as its JSON layout writes them: a
        SERIALIZATION_ERROR when the sink's serializer failed (the registry refused its schema,
        or the schema cannot hold the record: ksqlDB's serializer logs it, then fails the
        query), else a PRODUCTION_ERROR when the sink's producer
        failed to send (ksqlDB's production exception handler logs it, then fails the query),
        and the KAFKA_STREAMS_THREAD_ERROR of the failure."""
        thread_error = {"errorMessage": UNCAUGHT,
                        "threadName": f"stream execution thread for {self.query}",
                        "cause": list(self.causes)}
        failed = _entry(f"processing.{self.query}.ksql.logger.thread.exception.uncaught",
                        self.time_ms, KAFKA_STREAMS_THREAD_ERROR, "kafkaStreamsThreadError",
                        thread_error)
        return [*self._sink_errors(), failed]

    def _sink_errors(self) -> list[str]:
        """The entry of ksqlDB's serializer or producer for the record the failure is about,
        when a cause says the sink refused it."""
        refused = self.serialization_error()
        if refused is not None:
            target, answer = refused
            error = {"target": target, "errorMessage": "Error serializing message to topic: "
                     f"{self.sink_topic}. {answer}", "record": None, "cause": [answer],
                     "topic": self.sink_topic}
            return [_entry(f"processing.{self.query}.OUTPUT.serializer", self.time_ms,
                           SERIALIZATION_ERROR, "serializationError", error)]
        sending = self.production_error()
        if sending is None:
            return []
        return [_entry(f"processing.{self.query}", self.time_ms, PRODUCTION_ERROR,
                       "productionError", {"errorMessage": sending})]

    def serialization_error(self) -> tuple[str, str] | None:
        """The target (``key`` or ``value``) and the reason, when a cause is the sink topic's
        key or value serializer failing: the registry refusing its subject's schema (ksqlDB's
        serializer registers it as it writes the first record), or a record the schema cannot
        hold; either fails the query, in ksqlDB too."""
        for line in self._lines():
            refused = REGISTRY_REFUSAL.search(line)
            if refused is not None:
                reason = (f"The Schema Registry refused the schema of subject "
                          f"{refused.group(2)} ({refused.group(1)}): {refused.group(3).strip()}")
                subject = refused.group(2)
            else:
                unwritable = _UNWRITABLE.search(line)
                if unwritable is None:
                    continue
                subject, reason = unwritable.group(1), unwritable.group(2).strip()
            target = self._sink_target(subject)
            if target is not None:
                return target, reason
        return None

    def _sink_target(self, subject: str) -> str | None:
        """``key`` or ``value``, when ``subject`` is the sink topic's subject of that side."""
        for target in ("key", "value"):
            if subject == f"{self.sink_topic}-{target}":
                return target
        return None

    def _lines(self) -> list[str]:
        """The failure's lines, its ``Caused by`` lines first."""
        lines = (self.detail or "\n".join(self.causes)).splitlines()
        return sorted(lines, key=lambda text: not text.lstrip().startswith("Caused by:"))

    def production_error(self) -> str | None:
        """The sink producer's message, when a cause is its failure to send a record: one
        too large, or a send to the sink topic that timed out (the failures Kafka Streams
        hands ksqlDB's production exception handler; a source's are no production error)."""
        for line in self._lines():
            too_large = _TOO_LARGE.search(line)
            if too_large is not None:
                return too_large.group(1).strip()
            timed_out = _SEND_TIMEOUT.search(line)
            if timed_out is not None and self.sink_topic in (timed_out.group(2),
                                                             timed_out.group(3)):
                return timed_out.group(1).strip()
        return None


_MESSAGE_FIELDS = ("deserializationError", "recordProcessingError", "productionError",
                   "serializationError", "kafkaStreamsThreadError")


def _entry(logger_name: str, time_ms: int, message_type: int, field: str,
           error: Mapping[str, object]) -> str:
    message: dict[str, object] = {"type": message_type,
                                  **{name: None for name in _MESSAGE_FIELDS}}
    message[field] = dict(error)
    return json.dumps({"logger": logger_name, "level": "ERROR", "time": time_ms,
                       "message": message})


@dataclass(frozen=True)
class SkippedBatch:
    """Records a micro-batch of ``query`` skipped in ``source``: those it read from its topic
    between ``start`` and ``end`` (per partition) that it cannot read."""

    query: str
    source: str
    topic: str
    start: Offsets
    end: Offsets


@dataclass(frozen=True)
class FailedRows:
    """Rows of a micro-batch of ``query`` that failed its checks (ksqlDB's record processing
    errors): ``failed``, the count per check of ``checked``; ``steps``, those that make its
    view from its topic, which read ``start`` to ``end`` of it again."""

    query: str
    checked: CheckedRows
    steps: tuple[Step, ...]
    failed: tuple[int, ...]
    start: Offsets
    end: Offsets


@dataclass(frozen=True)
class CarriedRows:
    """Rows of a micro-batch of ``query`` that failed the checks of ``checked``, a join's (see
    :attr:`~metastore.planner.steps.CheckedRows.carried`), as its observation carried them: for
    each check, each failing row's record (JSON text) and cause, at most ``checked.carried``."""

    query: str
    checked: CheckedRows
    rows: tuple[tuple[tuple[str | None, str | None], ...], ...]
    time_ms: int

    def entries(self, rows_include: bool) -> list[str]:
        """ksqlDB's RECORD_PROCESSING_ERROR entries, one per row and failed check."""
        return [_entry(f"processing.{self.query}.{check.logger}", self.time_ms,
                       RECORD_PROCESSING_ERROR, "recordProcessingError",
                       {"errorMessage": check.message,
                        "record": record if rows_include else None, "cause": [cause]})
                for check, rows in zip(self.checked.checks, self.rows, strict=True)
                for record, cause in rows]


_Logged = SkippedBatch | QueryFailure | FailedRows | CarriedRows
"""What the processing log's thread writes."""


READABLE = "__MS_LOG_READABLE"
KEY_READABLE = "__MS_LOG_KEY_READABLE"
_VALUE = "__MS_LOG_RECORD_VALUE"
"""The unreadable record's value, kept while its key is read alone."""
_RAW = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")


def entries_select(source: DataSource, raw_table: str, query: str, rows_include: bool) -> str:
    """The processing log's entries (a ``value`` column of JSON) for the records of
    ``raw_table`` (a Kafka read of ``source``'s topic) that ``source`` cannot read: ksqlDB's
    DESERIALIZATION_ERROR, its target ``key`` when the key alone is unreadable, else ``value``."""
    carried = tuple(f"{column} AS __MS_LOG_{column}" for column in _RAW)
    unreadable = (f"SELECT * FROM ({decode_select(source, raw_table, carried, READABLE)}) "
                  f"WHERE NOT {READABLE}")
    key_only = ("SELECT " + ", ".join(
        f"{'CAST(NULL AS BINARY)' if column == 'value' else f'__MS_LOG_{column}'} AS {column}"
        for column in _RAW) + f", __MS_LOG_value AS {_VALUE} FROM ({unreadable})")
    targeted = decode_select(source, f"({key_only})", (*carried, _VALUE), KEY_READABLE)
    target = f"IF({KEY_READABLE}, 'value', 'key')"
    record = (f"base64(IF({KEY_READABLE}, {_VALUE}, __MS_LOG_key))" if rows_include
              else "CAST(NULL AS STRING)")
    formats = (f"IF({KEY_READABLE}, {string_literal(source.value_format)}, "
               f"{string_literal(source.key_format)})")
    message = (f"concat('Failed to deserialize ', {target}, ' from topic: ', __MS_LOG_topic, "
               f"'. It is no ', {formats}, ' ', {target}, ' the columns of ', "
               f"{string_literal(source.name)}, ' can read (partition ', __MS_LOG_partition, "
               "', offset ', __MS_LOG_offset, ').')")
    error = (f"named_struct('target', {target}, 'errorMessage', {message}, 'recordB64', "
             f"{record}, 'cause', CAST(array() AS ARRAY<STRING>), 'topic', __MS_LOG_topic)")
    entry = _entry_sql(string_literal(logger(query)), DESERIALIZATION_ERROR,
                       "deserializationError", error)
    return f"SELECT {entry} AS value FROM ({targeted})"


def failed_rows_select(batch: FailedRows, rows_include: bool) -> str:
    """The processing log's entries (a ``value`` column of JSON) for the rows of the view of
    ``batch``'s checks that fail them: ksqlDB's RECORD_PROCESSING_ERROR, one per row and
    failed check, logged as ``processing.<query>.<step>``."""
    checked = batch.checked
    selects = []
    for check, failed in zip(checked.checks, batch.failed, strict=True):
        if not failed:
            continue
        record = (check.record or checked.record) if rows_include else "CAST(NULL AS STRING)"
        error = (f"named_struct('errorMessage', {string_literal(check.message)}, 'record', "
                 f"{record}, 'cause', array({check.cause}))")
        entry = _entry_sql(string_literal(f"processing.{batch.query}.{check.logger}"),
                           RECORD_PROCESSING_ERROR, "recordProcessingError", error)
        selects.append(f"SELECT {entry} AS value FROM {quote(checked.view)} "
                       f"WHERE {check.condition}")
    return " UNION ALL ".join(selects)


def _entry_sql(logger_sql: str, message_type: int, field: str, error_sql: str) -> str:
    """Spark SQL of an entry's JSON, in ksqlDB's layout: ``error_sql`` as the ``field`` of a
    message of ``message_type``, logged now by ``logger_sql``."""
    entry = (f"named_struct('logger', {logger_sql}, 'level', 'ERROR', 'time', "
             "unix_millis(current_timestamp()), 'message', named_struct('type', "
             f"{message_type}, '{field}', {error_sql}))")
    return f"to_json({entry}, map('ignoreNullFields', 'false'))"


def logger(query: str) -> str:
    """The logger of a query's source deserializer, as ksqlDB names it."""
    return f"processing.{query}.KsqlTopic.Source.deserializer"


class ProcessingLog:
    """Writes the processing log's entries of one node, on a thread of its own: a bounded
    queue of :class:`SkippedBatch` (when it is full, a batch is dropped with a warning)."""

    def __init__(self, spark: Callable[[], SparkSession | None],
                 kafka_options: Mapping[str, str], topic: str,
                 source: Callable[[str], DataSource | None],
                 topic_exists: Callable[[str], bool], rows_include: bool = False,
                 max_pending: int = 100) -> None:
        """``source``: a source of the catalog by name; ``topic_exists``: whether the log's
        topic is there to write (else nothing is written: a producer would wait for it)."""
        self._spark = spark
        self._topic_exists = topic_exists
        self._kafka_options = dict(kafka_options)
        self.topic = topic
        self._source = source
        self._rows_include = rows_include
        self._pending: queue.Queue[_Logged | None] = queue.Queue(max_pending)
        self._thread: threading.Thread | None = None
        self._session: tuple[SparkSession, SparkSession] | None = None
        """The node's session and the log's own of it (a session per job would leave Spark a
        listener bus each)."""
        self._closed = False
        self._lock = threading.Lock()

    def skipped(self, batch: SkippedBatch) -> None:
        """Log the unreadable records of ``batch`` (Spark's listener thread: returns at once;
        once the log is stopped, does nothing)."""
        self._enqueue(batch)

    def failed(self, failure: QueryFailure) -> None:
        """Log a query's failure (returns at once)."""
        self._enqueue(failure)

    def failed_rows(self, batch: FailedRows | CarriedRows) -> None:
        """Log the rows of ``batch`` a query could not process (returns at once)."""
        self._enqueue(batch)

    def _enqueue(self, item: _Logged) -> None:
        with self._lock:
            if self._closed:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="processing-log",
                                                daemon=True)
                self._thread.start()
        try:
            self._pending.put_nowait(item)
        except queue.Full:
            log.warning("processing log: %d entries wait already; %s is not logged",
                        self._pending.maxsize, item)

    def stop(self) -> None:
        """Stop logging: what waits is dropped (said in the node's log), the job under way
        ends or is left behind after 30 s."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
        dropped = 0
        while True:
            try:
                dropped += self._pending.get_nowait() is not None
            except queue.Empty:
                break
        if dropped:
            log.warning("processing log: the node stops; %d micro-batches' entries (records "
                        "unreadable, rows not computed) are not logged", dropped)
        if thread is not None:
            self._pending.put(None)
            thread.join(timeout=30)

    def _run(self) -> None:
        """Write each batch that waits until :meth:`stop` puts None."""
        while (item := self._pending.get()) is not None:
            try:
                if isinstance(item, QueryFailure):
                    self._write_entries(item.entries(), item)
                elif isinstance(item, CarriedRows):
                    self._write_entries(item.entries(self._rows_include), item)
                elif isinstance(item, FailedRows):
                    self._write_failed_rows(item)
                else:
                    self._write(item)
            except Exception as error:  # Spark or Kafka gone: the node's log says so
                lines = str(error).strip().splitlines()
                log.warning("processing log: logging %s failed: %s", item,
                            lines[0] if lines else type(error).__name__)

    def _write_entries(self, entries: list[str], item: QueryFailure | CarriedRows) -> None:
        """Write ``entries``, those of ``item``, as they are."""
        spark = self._spark()
        if spark is None or not self._topic_exists(self.topic):
            log.warning("processing log: Spark is down or its topic %s does not exist; %s is "
                        "not logged", self.topic, item)
            return
        session = self._session_of(spark)
        session.createDataFrame([(entry,) for entry in entries], "value STRING").coalesce(
            1).write.format("kafka").options(**self._kafka_options, topic=self.topic).save()

    def _write_failed_rows(self, batch: FailedRows) -> None:
        spark = self._spark()
        if spark is None or not self._topic_exists(self.topic):
            log.warning("processing log: Spark is down or its topic %s does not exist; the "
                        "rows %s could not process are not logged", self.topic, batch.query)
            return
        session = self._session_of(spark)
        for step in batch.steps:
            if step.topic is not None:
                frame = self._read_offsets(session, step.topic, batch.start, batch.end)
            else:
                assert step.sql is not None, "a step reads a topic or runs a SELECT"
                frame = session.sql(step.sql)
            frame.createOrReplaceTempView(step.view)
        entries = session.sql(failed_rows_select(batch, self._rows_include))
        entries.write.format("kafka").options(**self._kafka_options, topic=self.topic).save()

    def _read_offsets(self, session: SparkSession, topic: str, start: Offsets,
                      end: Offsets) -> DataFrame:
        """A batch read of ``topic`` from ``start`` to ``end``, of the partitions ``end``
        names (even if the topic has more now)."""
        options = {**raw_options(topic, self._kafka_options),
                   "startingOffsets": _offsets_json(topic, start, end),
                   "endingOffsets": _offsets_json(topic, end, end)}
        del options["subscribe"]
        options["assign"] = json.dumps({topic: sorted(end)})
        return session.read.format("kafka").options(**options).load()

    def _write(self, batch: SkippedBatch) -> None:
        spark = self._spark()
        source = self._source(batch.source)
        if spark is None or source is None or source.topic != batch.topic:
            log.warning("processing log: %s is gone from the catalog or Spark is down; the "
                        "unreadable records of %s are not logged", batch.source, batch.query)
            return
        if not self._topic_exists(self.topic):
            log.warning("processing log: its topic %s does not exist; the unreadable records "
                        "of %s in %s are not logged", self.topic, batch.query, batch.source)
            return
        session = self._session_of(spark)
        self._read_offsets(session, batch.topic, batch.start, batch.end).createOrReplaceTempView(
            "__ms_log_raw")
        entries = session.sql(entries_select(source, quote("__ms_log_raw"), batch.query,
                                             self._rows_include))
        entries.write.format("kafka").options(**self._kafka_options, topic=self.topic).save()


    def _session_of(self, spark: SparkSession) -> SparkSession:
        """The log's session of ``spark``, which reads JSON as the queries do: made once, and
        again only when the node's Spark was started anew (the writing thread alone calls it)."""
        if self._session is None or self._session[0] is not spark:
            self._session = (spark, query_session(spark))
        return self._session[1]


def _offsets_json(topic: str, offsets: Offsets, partitions: Offsets) -> str:
    """Spark's offsets JSON for ``topic``: ``offsets`` for each of ``partitions``."""
    return json.dumps({topic: {str(p): offsets[p] for p in sorted(partitions)}})


EARLIEST = -2
"""Spark's offset for a partition's earliest record."""


def batch_offsets(sources: Sequence[tuple[str | None, str | None]], topic: str,
                  first: tuple[int, int] | None, earliest: bool
                  ) -> tuple[Offsets, Offsets] | None:
    """The offsets of ``topic`` a micro-batch read from, from its progress' sources (each
    source's start and end offsets as Spark's JSON): the lowest start and highest end per
    partition over the sources that read it; None when none did.

    A query's first micro-batch has no start: it is the earliest offsets when the query reads
    from the start (``earliest``), else Spark's latest offsets when the query started, which
    the progress does not say: then only the partition of ``first`` (the first unreadable
    record's partition and offset) is read, from that offset."""
    start: dict[int, int] = {}
    end: dict[int, int] = {}
    for started, ended in sources:
        ends = _topic_offsets(ended, topic)
        for partition, offset in ends.items():
            end[partition] = max(offset, end.get(partition, offset))
        for partition, offset in (_topic_offsets(started, topic) if ends else {}).items():
            start[partition] = min(offset, start.get(partition, offset))
    if not end:
        return None
    if start or earliest:
        return {p: start.get(p, EARLIEST) for p in end}, end
    if first is None or first[0] not in end:
        return None
    return {first[0]: first[1]}, {first[0]: end[first[0]]}


def _topic_offsets(text: str | None, topic: str) -> dict[int, int]:
    try:
        offsets = json.loads(text) if text else None
    except ValueError:
        return {}
    partitions = offsets.get(topic) if isinstance(offsets, dict) else None
    if not isinstance(partitions, dict):
        return {}
    return {int(p): int(o) for p, o in partitions.items() if str(p).isdigit()}


__all__ = ["DESERIALIZATION_ERROR", "RECORD_PROCESSING_ERROR", "SERIALIZATION_ERROR",
           "CarriedRows", "FailedRows", "ProcessingLog", "SkippedBatch", "batch_offsets",
           "entries_select", "failed_rows_select", "logger"]
