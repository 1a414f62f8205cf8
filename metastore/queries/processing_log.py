"""The processing log, as ksqlDB's: a Kafka topic of the records queries could not process, and
a stream ``KSQL_PROCESSING_LOG`` over it.

Its settings are ksqlDB's server properties ``ksql.logging.processing.*``
(:class:`ProcessingLogSettings`): the topic (``<service id>ksql_processing_log`` by default,
created when the node starts), the stream (created through the command log when the node starts
and the catalog has none), and whether a log record holds the record it is about.

A query that skips a record it cannot deserialize (:mod:`metastore.queries.skipped`) hands the
offsets of that micro-batch's source to :class:`ProcessingLog`, whose thread reads them again in
a Spark batch job with the same decoding (:func:`metastore.spark.views.decode_select`) and writes
one DESERIALIZATION_ERROR entry per unreadable record, in ksqlDB's JSON layout: so the rules of
what is unreadable are the query's own, nothing is held per record in the driver, and a topic
without bad records costs nothing. The log is at least once: a micro-batch Spark runs again
logs its records again.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from metastore.catalog.model import DataSource
from metastore.exceptions import MetastoreError
from metastore.spark.session import query_session
from metastore.spark.types import quote, string_literal
from metastore.spark.views import decode_select, raw_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

PREFIX = "ksql.logging.processing."
TOPIC_NAME = PREFIX + "topic.name"
TOPIC_AUTO_CREATE = PREFIX + "topic.auto.create"
TOPIC_PARTITIONS = PREFIX + "topic.partitions"
TOPIC_REPLICATION_FACTOR = PREFIX + "topic.replication.factor"
STREAM_AUTO_CREATE = PREFIX + "stream.auto.create"
STREAM_NAME = PREFIX + "stream.name"
ROWS_INCLUDE = PREFIX + "rows.include"
PROPERTIES = (TOPIC_NAME, TOPIC_AUTO_CREATE, TOPIC_PARTITIONS, TOPIC_REPLICATION_FACTOR,
              STREAM_AUTO_CREATE, STREAM_NAME, ROWS_INCLUDE)
"""The server properties this module reads, by ksqlDB's names."""

DESERIALIZATION_ERROR = 0
"""ksqlDB's ``MessageType.DESERIALIZATION_ERROR``."""

_CAUSE = "CAUSE ARRAY<STRING>"
STREAM_COLUMNS = (
    "LOGGER STRING, LEVEL STRING, TIME BIGINT, MESSAGE STRUCT<TYPE INT, "
    f"DESERIALIZATIONERROR STRUCT<TARGET STRING, ERRORMESSAGE STRING, RECORDB64 STRING, {_CAUSE}, "
    "`TOPIC` STRING>, "
    f"RECORDPROCESSINGERROR STRUCT<ERRORMESSAGE STRING, RECORD STRING, {_CAUSE}>, "
    "PRODUCTIONERROR STRUCT<ERRORMESSAGE STRING>, "
    f"SERIALIZATIONERROR STRUCT<TARGET STRING, ERRORMESSAGE STRING, RECORD STRING, {_CAUSE}, "
    "`TOPIC` STRING>, "
    f"KAFKASTREAMSTHREADERROR STRUCT<ERRORMESSAGE STRING, THREADNAME STRING, {_CAUSE}>>")
"""The processing log stream's columns, ksqlDB's ``ProcessingLogMessageSchema``."""


class ProcessingLogSettingError(MetastoreError):
    """A ``ksql.logging.processing.*`` property with a value the node cannot use."""

    code = "bad_processing_log_setting"

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name


@dataclass(frozen=True)
class ProcessingLogSettings:
    """ksqlDB's processing log properties; the topic and the stream are created by default."""

    topic_name: str | None = None
    """None: ``<service id>ksql_processing_log``."""
    topic_auto_create: bool = True
    topic_partitions: int = 1
    topic_replication_factor: int = 1
    stream_auto_create: bool = True
    stream_name: str = "KSQL_PROCESSING_LOG"
    rows_include: bool = False
    """Whether an entry holds the record it is about (base64), as ksqlDB's ``rows.include``."""

    @classmethod
    def of(cls, properties: Mapping[str, str]) -> ProcessingLogSettings:
        """The settings ``properties`` name (ksqlDB's names); the others' defaults."""
        unknown = sorted(set(properties) - set(PROPERTIES))
        if unknown:
            raise ProcessingLogSettingError(unknown[0], "unknown property; known: "
                                            + ", ".join(PROPERTIES))
        default = cls()
        return cls(
            topic_name=properties.get(TOPIC_NAME) or None,
            topic_auto_create=_boolean(properties, TOPIC_AUTO_CREATE, default.topic_auto_create),
            topic_partitions=_positive(properties, TOPIC_PARTITIONS, default.topic_partitions),
            topic_replication_factor=_positive(properties, TOPIC_REPLICATION_FACTOR,
                                               default.topic_replication_factor),
            stream_auto_create=_boolean(properties, STREAM_AUTO_CREATE,
                                        default.stream_auto_create),
            stream_name=_stream_name(properties.get(STREAM_NAME, default.stream_name)),
            rows_include=_boolean(properties, ROWS_INCLUDE, default.rows_include))

    def topic(self, service_id: str) -> str:
        """The log's topic: ksqlDB's default is the service id then ``ksql_processing_log``."""
        return self.topic_name or f"{service_id}ksql_processing_log"

    def stream_statement(self, service_id: str) -> str:
        """The statement that creates the log's stream, as ksqlDB's
        ``ProcessingLogServerUtils`` writes it."""
        return (f"CREATE STREAM IF NOT EXISTS {self.stream_name} ({STREAM_COLUMNS}) WITH "
                f"(KAFKA_TOPIC={string_literal(self.topic(service_id))}, VALUE_FORMAT='JSON', "
                "KEY_FORMAT='KAFKA');")


def _boolean(properties: Mapping[str, str], name: str, default: bool) -> bool:
    value = properties.get(name)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ProcessingLogSettingError(name, f"{value!r} is not true or false")
    return value.strip().lower() == "true"


def _positive(properties: Mapping[str, str], name: str, default: int) -> int:
    value = properties.get(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise ProcessingLogSettingError(name, f"{value!r} is not a positive integer")
    return number


def _stream_name(value: str) -> str:
    if not value.replace("_", "").isalnum() or value[0].isdigit():
        raise ProcessingLogSettingError(STREAM_NAME, f"{value!r} is not a stream name (letters, "
                                        "digits and underscores, not starting with a digit)")
    return value.upper()


Offsets = Mapping[int, int]
"""A topic's offsets by partition."""


@dataclass(frozen=True)
class SkippedBatch:
    """Records a micro-batch of ``query`` skipped in ``source``: those it read from its topic
    between ``start`` (None for its first micro-batch: the topic's earliest offsets) and
    ``end`` that it cannot read."""

    query: str
    source: str
    topic: str
    start: Offsets | None
    end: Offsets


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
    entry = (f"named_struct('logger', {string_literal(logger(query))}, 'level', 'ERROR', "
             "'time', unix_millis(current_timestamp()), 'message', named_struct('type', "
             f"{DESERIALIZATION_ERROR}, 'deserializationError', {error}))")
    return (f"SELECT to_json({entry}, map('ignoreNullFields', 'false')) AS value "
            f"FROM ({targeted})")


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
        self._pending: queue.Queue[SkippedBatch | None] = queue.Queue(max_pending)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.written_batches = 0
        """Micro-batches whose unreadable records were logged."""

    def skipped(self, batch: SkippedBatch) -> None:
        """Log the unreadable records of ``batch`` (Spark's listener thread: returns at once)."""
        self._started()
        try:
            self._pending.put_nowait(batch)
        except queue.Full:
            log.warning("processing log: %d micro-batches wait already; the unreadable records "
                        "of %s in %s (topic %s) are not logged", self._pending.maxsize,
                        batch.query, batch.source, batch.topic)

    def stop(self) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._pending.put(None)
            thread.join(timeout=30)

    def _started(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="processing-log",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while (batch := self._pending.get()) is not None:
            try:
                self._write(batch)
            except Exception as error:  # Spark or Kafka gone: the node's log says so
                log.warning("processing log: logging the unreadable records of %s in %s "
                            "failed: %s", batch.query, batch.source,
                            str(error).strip().splitlines()[0] if str(error).strip() else error)

    def _write(self, batch: SkippedBatch) -> None:
        spark = self._spark()
        source = self._source(batch.source)
        if spark is None or source is None or source.topic != batch.topic:
            return
        if not self._topic_exists(self.topic):
            log.info("processing log: its topic %s does not exist; the unreadable records of "
                     "%s in %s are not logged", self.topic, batch.query, batch.source)
            return
        session = query_session(spark)  # reads JSON as the queries do
        options = {**raw_options(batch.topic, self._kafka_options),
                   "startingOffsets": _offsets_json(batch.topic, batch.start, batch.end),
                   "endingOffsets": _offsets_json(batch.topic, batch.end, batch.end)}
        session.read.format("kafka").options(**options).load().createOrReplaceTempView(
            "__ms_log_raw")
        entries = session.sql(entries_select(source, quote("__ms_log_raw"), batch.query,
                                             self._rows_include))
        entries.write.format("kafka").options(**self._kafka_options, topic=self.topic).save()
        self.written_batches += 1


def _offsets_json(topic: str, offsets: Offsets | None, partitions: Offsets) -> str:
    """Spark's offsets JSON for ``topic``: ``offsets`` for each of ``partitions``, the earliest
    (-2) where there is none."""
    chosen = {str(p): (offsets or {}).get(p, -2) for p in sorted(partitions)}
    return json.dumps({topic: chosen})


def batch_offsets(sources: Sequence[tuple[str | None, str | None]], topic: str
                  ) -> tuple[Offsets | None, Offsets] | None:
    """The offsets of ``topic`` a micro-batch read from, from its progress' sources (each
    source's start and end offsets as Spark's JSON): the lowest start and highest end per
    partition over the sources that read it; None when none did."""
    start: dict[int, int] | None = None
    end: dict[int, int] = {}
    for started, ended in sources:
        ends = _topic_offsets(ended, topic)
        if not ends:
            continue
        for partition, offset in ends.items():
            end[partition] = max(offset, end.get(partition, offset))
        starts = _topic_offsets(started, topic)
        if starts:
            start = start if start is not None else {}
            for partition, offset in starts.items():
                start[partition] = min(offset, start.get(partition, offset))
    return (start, end) if end else None


def _topic_offsets(text: str | None, topic: str) -> dict[int, int]:
    try:
        offsets = json.loads(text) if text else None
    except ValueError:
        return {}
    partitions = offsets.get(topic) if isinstance(offsets, dict) else None
    if not isinstance(partitions, dict):
        return {}
    return {int(p): int(o) for p, o in partitions.items() if str(p).isdigit()}


__all__ = ["DESERIALIZATION_ERROR", "PROPERTIES", "ProcessingLog", "ProcessingLogSettingError",
           "ProcessingLogSettings", "SkippedBatch", "batch_offsets", "entries_select", "logger"]
