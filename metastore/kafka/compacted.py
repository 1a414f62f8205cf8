"""A keyed, compacted topic of one partition.

Writers replace their key's value; compaction eventually keeps only the newest value of every key.
A reader reads every record up to the end (each key's newest value and, until compaction runs,
some older ones), or follows the topic as it grows. Node heartbeats and shared checkpoints
(snapshots) live in such topics.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from metastore.kafka.admin import Admin
from metastore.kafka.consumer import RECORD_OVERHEAD_BYTES, PartitionReader, Record
from metastore.kafka.producer import RecordProducer
from metastore.kafka.settings import KafkaSettings


class CompactedTopic:
    """``topic``, with clients sized for values of up to ``max_value_bytes`` (librdkafka's
    limits when None); ``timeout`` bounds a write's delivery."""

    def __init__(self, settings: KafkaSettings, admin: Admin, topic: str,
                 max_value_bytes: int | None = None, timeout: float = 30.0) -> None:
        self.topic = topic
        self._settings = settings
        self._admin = admin
        self._max_value_bytes = max_value_bytes
        self._timeout = timeout

    def exists(self) -> bool:
        return self._admin.describe(self.topic) is not None

    def ensure(self, replication: int | None = None,
               config: Mapping[str, str] | None = None) -> None:
        """Create the topic (one partition, ``cleanup.policy=compact``, ``config``) unless it
        exists."""
        if not self.exists():
            self._admin.create(self.topic, partitions=1, replication=replication,
                               config={"cleanup.policy": "compact", **(config or {})})

    def writer(self) -> RecordProducer:
        """A producer of this topic's records (idempotent, uncompressed, sent at once)."""
        sizes = {} if self._max_value_bytes is None else {
            "message_max_bytes": self._max_value_bytes + RECORD_OVERHEAD_BYTES}
        return RecordProducer(self._settings, timeout_ms=int(self._timeout * 1000),
                              enable_idempotence=True, compression_type="none", **sizes)

    def follow(self, group_id: str) -> PartitionReader:
        """A reader from the beginning; poll it to follow the topic as it grows."""
        return PartitionReader(self._settings, self.topic, group_id=group_id, fetch_wait_ms=500,
                               max_record_bytes=self._max_value_bytes)

    def read(self, group_id: str, timeout: float | None = None) -> Iterator[Record]:
        """Every record up to the end of the topic as it is now; none when it does not exist.
        ``timeout`` bounds the whole read (see :meth:`PartitionReader.read_to_end`)."""
        if not self.exists():
            return
        reader = self.follow(group_id)
        try:
            for batch in reader.read_to_end(timeout):
                yield from batch
        finally:
            reader.close()
