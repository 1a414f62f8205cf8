"""A read_committed reader of one partition that knows when it has reached the end.

Transaction markers occupy offsets but are never delivered, so "caught up" cannot be judged from
the last record seen. librdkafka reports a partition EOF carrying the fetch position once it has
reached the last stable offset; :meth:`PartitionReader.poll` turns records and EOFs into one
``position`` that only moves forward, and :meth:`end_offset` asks the broker for the LSO.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from metastore.kafka.exceptions import KafkaClientError, KafkaUnavailableError
from metastore.kafka.settings import KafkaSettings


@dataclass(frozen=True)
class Record:
    offset: int
    key: bytes | None
    value: bytes | None


class PartitionReader:
    """Reads ``topic``/``partition`` from ``start_offset`` with isolation.level=read_committed.

    ``fetch_wait_ms`` bounds how long the broker holds a fetch open when nothing new is there.
    A commit marker does not end a waiting read_committed fetch early, so this bound is also how
    late a reader may learn that a transaction committed: lower means faster writes and more
    fetch requests from an idle node.
    """

    def __init__(self, settings: KafkaSettings, topic: str, partition: int = 0,
                 start_offset: int = 0, group_id: str = "metastore-reader",
                 fetch_wait_ms: int = 10) -> None:
        self.topic = topic
        self.partition = partition
        self.position = start_offset
        self.at_end = False
        """Whether the last poll ended at the end of the committed log (no open transaction
        straddles ``position``)."""
        self._consumer = Consumer(settings.config(
            group_id=group_id, enable_auto_commit=False, enable_partition_eof=True,
            isolation_level="read_committed", auto_offset_reset="earliest",
            fetch_wait_max_ms=fetch_wait_ms, fetch_error_backoff_ms=50))
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
            records.append(Record(offset=offset, key=message.key(), value=message.value()))
            self.position = offset + 1
        return records

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


class EndOffsetProbe:
    """Asks the broker for a partition's last stable offset (no assignment, no fetching)."""

    def __init__(self, settings: KafkaSettings, topic: str, partition: int = 0,
                 group_id: str = "metastore-probe", committed: bool = True) -> None:
        """``committed``: the last stable offset (read_committed), else the high watermark."""
        self._partition = TopicPartition(topic, partition)
        self._config = settings.config(
            group_id=group_id, enable_auto_commit=False,
            isolation_level="read_committed" if committed else "read_uncommitted",
            topic_metadata_refresh_interval_ms=10_000)
        self._consumer = Consumer(self._config)

    def end_offset(self, timeout: float = 10.0) -> int:
        try:
            _low, high = self._consumer.get_watermark_offsets(self._partition, timeout=timeout,
                                                              cached=False)
        except KafkaException as exc:
            # An unassigned consumer may keep asking a dead leader: start over with fresh metadata.
            self._consumer.close()
            self._consumer = Consumer(self._config)
            raise KafkaUnavailableError(
                f"reading the end offset of {self._partition.topic} failed: {exc}") from exc
        return int(high)

    def close(self) -> None:
        self._consumer.close()
