"""One running PRINT (ksqlDB's ``TopicStreamWriter``): a consumer of every partition of a topic.

It reads from the topic's beginning (FROM BEGINNING) or its end, read_committed, with no
consumer group membership and nothing committed (a consumer that cannot be assigned the topic's
partitions is closed at once: :class:`~metastore.kafka.exceptions.KafkaClientError`). Each
:meth:`TopicPrinter.poll` gives the next lines: ``Key format:`` / ``Value format:`` when what
the records could be changed (see :mod:`metastore.kafka.record_formatter`), then one line per
record, every INTERVAL-th record only, until LIMIT lines were given. The caller closes it (its
client gone, or done).
"""

from __future__ import annotations

import threading
import uuid

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaException,
    TopicPartition,
)

from metastore.kafka.exceptions import KafkaClientError
from metastore.kafka.record_formatter import Record, RecordFormatter, formats_line
from metastore.kafka.settings import KafkaSettings, create_client

MAX_RECORDS_PER_POLL = 500


class TopicPrinter:
    def __init__(self, settings: KafkaSettings, topic: str, partitions: int,
                 from_beginning: bool = False, interval: int = 1,
                 limit: int | None = None) -> None:
        if interval < 1:
            raise ValueError(f"INTERVAL must be greater than one, but was: {interval}")
        self.topic = topic
        self._interval = interval
        self._limit = limit
        self._polled = 0
        self._written = 0
        self._formatter = RecordFormatter()
        self._shown_formats: tuple[list[str], list[str]] | None = None
        self._lock = threading.Lock()
        consumer = create_client(Consumer, settings.config(
            group_id=f"metastore-print-{uuid.uuid4().hex}", enable_auto_commit=False,
            isolation_level="read_committed", enable_partition_eof=False))
        start = OFFSET_BEGINNING if from_beginning else OFFSET_END
        try:
            consumer.assign([TopicPartition(topic, p, start) for p in range(partitions)])
        except BaseException as exc:
            consumer.close()  # a printer that does not start holds no consumer
            if isinstance(exc, KafkaException):
                raise KafkaClientError(f"reading {topic} failed: its partitions could not be "
                                       f"assigned: {exc}", retriable=True) from exc
            raise
        self._consumer: Consumer | None = consumer

    @property
    def done(self) -> bool:
        """Whether LIMIT lines were given."""
        return self._limit is not None and self._written >= self._limit

    def poll(self, timeout: float) -> list[str]:
        """The next lines, waiting up to ``timeout`` seconds for records (none: an empty list)."""
        with self._lock:
            if self._consumer is None or self.done:
                return []
            try:
                messages = self._consumer.consume(MAX_RECORDS_PER_POLL, timeout)
            except KafkaException as exc:
                raise KafkaClientError(f"reading {self.topic} failed: {exc}",
                                       retriable=True) from exc
        records = []
        for message in messages:
            if message.error() is not None:
                continue
            kind, stamp = message.timestamp()
            records.append(Record(None if kind == TIMESTAMP_NOT_AVAILABLE else stamp,
                                  message.key(), message.value(), message.partition() or 0))
        if not records:
            return []
        lines: list[str] = []
        for line in self._formatter.format(records):
            if self._polled % self._interval == 0:
                self._written += 1
                lines.append(line)
            self._polled += 1
            if self.done:
                break
        return self._format_lines() + lines

    def _format_lines(self) -> list[str]:
        """The formats' lines, when they changed since last shown (always, the first time)."""
        formats = (self._formatter.keys.names, self._formatter.values.names)
        shown = self._shown_formats
        self._shown_formats = formats
        lines = []
        if shown is None or shown[0] != formats[0]:
            lines.append(formats_line("Key format: ", formats[0]))
        if shown is None or shown[1] != formats[1]:
            lines.append(formats_line("Value format: ", formats[1]))
        return lines

    def close(self) -> None:
        with self._lock:
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None


__all__ = ["TopicPrinter"]
