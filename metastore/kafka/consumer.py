"""Readers of partitions, and probes of where partitions end.

Transaction markers occupy offsets but are never delivered, so "caught up" cannot be judged from
the last record seen. librdkafka reports a partition EOF carrying the fetch position once it has
reached the last stable offset; :meth:`PartitionReader.poll` turns records and EOFs into one
``position`` that only moves forward, and :meth:`PartitionReader.end_offset` asks the broker for
the LSO. :class:`EndOffsets` asks for the end offsets of any partitions without reading them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from metastore.kafka.exceptions import KafkaClientError, KafkaUnavailableError
from metastore.kafka.settings import KafkaSettings, create_client

RECORD_OVERHEAD_BYTES = 65_536
"""What a fetch or a produce request needs beyond the largest value it carries."""


Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Record:
    offset: int
    key: bytes | None
    value: bytes | None

    @property
    def headers(self) -> Headers:
        """None read: a reader reads them only when asked (``details``)."""
        return ()

    @property
    def timestamp_ms(self) -> int | None:
        return None


@dataclass(frozen=True)
class DetailedRecord(Record):
    """A record with its headers and timestamp (what is needed to write it again)."""

    headers: Headers = ()
    timestamp_ms: int | None = None


def _detailed(message: Message, offset: int) -> DetailedRecord:
    kind, stamp = message.timestamp()
    found = message.headers() or []
    pairs = found.items() if isinstance(found, dict) else found
    headers = tuple((name, value.encode() if isinstance(value, str) else value)
                    for name, value in pairs)
    return DetailedRecord(offset, message.key(), message.value(), headers,
                          None if kind == TIMESTAMP_NOT_AVAILABLE else stamp)


class PartitionReader:
    """Reads ``topic``/``partition`` from ``start_offset`` with isolation.level=read_committed.

    ``fetch_wait_ms`` bounds how long the broker holds a fetch open when nothing new is there.
    A commit marker does not end a waiting read_committed fetch early, so this bound is also how
    late a reader may learn that a transaction committed: lower means faster writes and more
    fetch requests from an idle node. ``max_record_bytes`` raises the fetch sizes for records
    larger than the client's defaults; ``details`` returns :class:`DetailedRecord`.
    """

    def __init__(self, settings: KafkaSettings, topic: str, partition: int = 0,
                 start_offset: int = 0, group_id: str = "metastore-reader",
                 fetch_wait_ms: int = 10, max_record_bytes: int | None = None,
                 details: bool = False) -> None:
        self.topic = topic
        self.partition = partition
        self.position = start_offset
        self.at_end = False
        """Whether the last poll ended at the end of the committed log (no open transaction
        straddles ``position``)."""
        self._details = details
        sizes = {} if max_record_bytes is None else {
            "fetch_max_bytes": max_record_bytes + RECORD_OVERHEAD_BYTES,
            "receive_message_max_bytes": max_record_bytes + 2 * RECORD_OVERHEAD_BYTES}
        self._consumer = create_client(Consumer, settings.config(
            group_id=group_id, enable_auto_commit=False, enable_partition_eof=True,
            isolation_level="read_committed", auto_offset_reset="earliest",
            fetch_wait_max_ms=fetch_wait_ms, fetch_error_backoff_ms=50, **sizes))
        offset = start_offset if start_offset > 0 else OFFSET_BEGINNING
        self._consumer.assign([TopicPartition(topic, partition, offset)])

    def poll(self, timeout: float, max_records: int = 500) -> list[Record]:
        """Records committed after ``position``; an EOF moves ``position`` past trailing markers."""
        try:
            # consume(n, t) waits for n messages or t seconds: ask for what is there first, then
            # wait for one message at most, then drain without waiting.
            messages = self._consumer.consume(max_records, 0)
            if not messages:
                messages = self._consumer.consume(1, timeout)
                if messages and max_records > 1:
                    messages += self._consumer.consume(max_records - 1, 0)
        except KafkaException as exc:
            raise KafkaClientError(f"consume failed: {exc}", retriable=True) from exc
        records: list[Record] = []
        if messages:
            last_error = messages[-1].error()
            self.at_end = last_error is not None and last_error.code() == KafkaError._PARTITION_EOF
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    eof_offset = message.offset()
                    if eof_offset is not None and eof_offset > self.position:
                        self.position = eof_offset
                    continue
                if error.fatal() or not error.retriable():
                    # Later messages of this batch were consumed too: read them again, after
                    # handing over the records before the error (the error recurs next poll).
                    self._rewind()
                    if records:
                        return records
                    raise KafkaClientError(f"consume failed: {error.str()}")
                continue
            offset = message.offset()
            assert offset is not None
            records.append(_detailed(message, offset) if self._details else
                           Record(offset=offset, key=message.key(), value=message.value()))
            self.position = offset + 1
        return records

    def read_to_end(self, timeout: float | None = None,
                    max_records: int = 10_000) -> Iterator[list[Record]]:
        """Batches of the records from ``position`` up to the end offset as it is now.

        ``timeout`` bounds the whole read: by default 60 s and a second per 10,000 offsets.
        """
        end = self.end_offset()
        deadline = time.monotonic() + (timeout if timeout is not None else 60 + end / 10_000)
        while self.position < end:
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(
                    f"timed out reading {self.topic} at offset {self.position} of {end}")
            yield self.poll(0.5, max_records)

    def _rewind(self) -> None:
        """Fetch again from ``position``: nothing after it was handed over."""
        self.at_end = False
        offset = self.position if self.position > 0 else OFFSET_BEGINNING
        self._consumer.assign([TopicPartition(self.topic, self.partition, offset)])

    def end_offset(self, timeout: float = 10.0) -> int:
        """The last stable offset: the end of the committed log as a read_committed reader sees it."""
        try:
            _low, high = self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, self.partition), timeout=timeout, cached=False)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"reading the end offset of {self.topic} failed: {exc}") from exc
        return int(high)

    def close(self) -> None:
        self._consumer.close()


class EndOffsets:
    """Asks the broker where partitions end (no assignment, no fetching).

    ``committed``: the last stable offset (read_committed), else the high watermark. A request
    that fails starts the client over: an unassigned consumer may keep asking a dead leader.
    """

    def __init__(self, settings: KafkaSettings, group_id: str = "metastore-probe",
                 committed: bool = True) -> None:
        self._config = settings.config(
            group_id=group_id, enable_auto_commit=False,
            isolation_level="read_committed" if committed else "read_uncommitted",
            topic_metadata_refresh_interval_ms=10_000)
        self._consumer = create_client(Consumer, self._config)

    def end_offsets(self, partitions: Iterable[tuple[str, int]],
                    timeout: float = 10.0) -> dict[tuple[str, int], int]:
        """The end offset of every ``(topic, partition)``; ``timeout`` bounds each request."""
        return {partition: high for partition, (_low, high)
                in self.watermarks(partitions, timeout).items()}

    def watermarks(self, partitions: Iterable[tuple[str, int]],
                   timeout: float = 10.0) -> dict[tuple[str, int], tuple[int, int]]:
        """The log start and end offsets of every ``(topic, partition)``."""
        marks: dict[tuple[str, int], tuple[int, int]] = {}
        for topic, partition in partitions:
            try:
                low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=timeout, cached=False)
            except KafkaException as exc:
                # Start over with fresh metadata.
                self._consumer.close()
                self._consumer = create_client(Consumer, self._config)
                raise KafkaUnavailableError(
                    f"reading the end offset of {topic} failed: {exc}") from exc
            marks[topic, partition] = (int(low), int(high))
        return marks

    def end_offset(self, topic: str, partition: int = 0, timeout: float = 10.0) -> int:
        return self.end_offsets([(topic, partition)], timeout)[topic, partition]

    def close(self) -> None:
        self._consumer.close()


class EndOffsetProbe:
    """Asks the broker for one partition's end offset (:class:`EndOffsets` of one partition)."""

    def __init__(self, settings: KafkaSettings, topic: str, partition: int = 0,
                 group_id: str = "metastore-probe", committed: bool = True) -> None:
        """``committed``: the last stable offset (read_committed), else the high watermark."""
        self._topic = topic
        self._partition = partition
        self._offsets = EndOffsets(settings, group_id, committed)

    def end_offset(self, timeout: float = 10.0) -> int:
        return self._offsets.end_offset(self._topic, self._partition, timeout)

    def close(self) -> None:
        self._offsets.close()
