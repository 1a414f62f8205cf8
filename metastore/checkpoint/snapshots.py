"""The snapshot topic: checkpoints shared through Kafka, so a new node need not replay everything.

``_metastore-<serviceId>-snapshots`` is compacted with one key, so it keeps the newest snapshot
(and, until compaction runs, a few older ones). Nodes publish their checkpoints to it; a node
with no checkpoint of its own takes the newest snapshot of the right topic incarnation and, like
any checkpoint, uses it only if the command log still holds the record it was taken at.
"""

from __future__ import annotations

import logging

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from metastore.checkpoint.exceptions import CheckpointError
from metastore.checkpoint.store import Checkpoint, Incarnation, parse
from metastore.kafka.admin import Admin
from metastore.kafka.exceptions import KafkaUnavailableError
from metastore.kafka.settings import KafkaSettings

log = logging.getLogger(__name__)

MAX_SNAPSHOT_BYTES = 32 * 1024 * 1024
_KEY = b"snapshot"


def snapshot_topic_name(service_id: str) -> str:
    return f"_metastore-{service_id}-snapshots"


class SnapshotTopic:
    def __init__(self, settings: KafkaSettings, admin: Admin, topic: str,
                 replication: int | None = None) -> None:
        self.topic = topic
        self._replication = replication
        self._settings = settings
        self._admin = admin
        self._producer: Producer | None = None

    def _ensure(self) -> None:
        """Create the topic on first publish. Segments roll every 10 minutes, so compaction
        (which never touches the active segment) keeps it to about one snapshot."""
        if self._admin.describe(self.topic) is None:
            self._admin.create(self.topic, partitions=1, replication=self._replication, config={
                "cleanup.policy": "compact", "max.message.bytes": str(MAX_SNAPSHOT_BYTES + 4096),
                "segment.ms": "600000", "min.compaction.lag.ms": "60000"})

    def publish(self, checkpoint: Checkpoint, timeout: float = 30.0) -> bool:
        """Produce ``checkpoint``; False (with a warning) when it is too large or not acknowledged."""
        data = checkpoint.to_bytes()
        if len(data) > MAX_SNAPSHOT_BYTES:
            log.warning("snapshot at offset %d is %d bytes, over the %d-byte limit: not published",
                        checkpoint.header.offset, len(data), MAX_SNAPSHOT_BYTES)
            return False
        if self._producer is None:
            self._ensure()
            self._producer = Producer(self._settings.config(
                message_max_bytes=MAX_SNAPSHOT_BYTES + 65536, compression_type="none",
                enable_idempotence=True, linger_ms=0))
        failures: list[str] = []

        def delivered(error: KafkaError | None, _message: object) -> None:
            if error is not None:
                failures.append(error.str())

        self._producer.produce(self.topic, key=_KEY, value=data, on_delivery=delivered)
        if self._producer.flush(timeout) > 0 or failures:
            log.warning("publishing the snapshot at offset %d failed: %s",
                        checkpoint.header.offset, failures or "timed out")
            return False
        return True

    def newest(self, expected: Incarnation, timeout: float = 10.0) -> Checkpoint | None:
        """The usable snapshot with the highest offset, or None (unusable ones are logged)."""
        if self._admin.describe(self.topic) is None:
            return None
        consumer = Consumer(self._settings.config(
            group_id=f"{self.topic}-reader", enable_auto_commit=False,
            enable_partition_eof=True, auto_offset_reset="earliest",
            fetch_max_bytes=MAX_SNAPSHOT_BYTES + 65536,
            receive_message_max_bytes=MAX_SNAPSHOT_BYTES + 2 * 65536))
        best: Checkpoint | None = None
        try:
            consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
            _low, high = consumer.get_watermark_offsets(TopicPartition(self.topic, 0),
                                                        timeout=timeout, cached=False)
            position = 0
            while position < high:
                message = consumer.poll(timeout)
                if message is None:
                    raise KafkaUnavailableError(f"reading {self.topic} timed out at {position}")
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        break
                    raise KafkaUnavailableError(f"reading {self.topic} failed: {error.str()}")
                position = (message.offset() or 0) + 1
                try:
                    candidate = parse(message.value() or b"", expected)
                except CheckpointError as unusable:
                    log.warning("ignoring the snapshot at %s offset %s: %s", self.topic,
                                message.offset(), unusable)
                    continue
                if best is None or candidate.header.offset > best.header.offset:
                    best = candidate
        except KafkaException as error:
            raise KafkaUnavailableError(f"reading {self.topic} failed: {error}") from error
        finally:
            consumer.close()
        return best

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(5)
