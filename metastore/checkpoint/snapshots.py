"""The snapshot topic: checkpoints shared through Kafka, so a new node need not replay everything.

``_metastore-<serviceId>-snapshots`` is compacted with one key, so it keeps the newest snapshot
(and, until compaction runs, a few older ones). Nodes publish their checkpoints to it; a node
with no checkpoint of its own takes the newest snapshot of the right topic incarnation and, like
any checkpoint, uses it only if the command log still holds the record it was taken at.
"""

from __future__ import annotations

import logging

from metastore.checkpoint.exceptions import CheckpointError
from metastore.checkpoint.store import Checkpoint, Incarnation, parse
from metastore.kafka.admin import Admin
from metastore.kafka.compacted import CompactedTopic
from metastore.kafka.exceptions import KafkaClientError, KafkaUnavailableError
from metastore.kafka.producer import RecordProducer
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
        self._topic = CompactedTopic(settings, admin, topic, max_value_bytes=MAX_SNAPSHOT_BYTES)
        self._producer: RecordProducer | None = None

    def _ensure(self) -> None:
        """Create the topic on first publish. Segments roll every 10 minutes, so compaction
        (which never touches the active segment) keeps it to about one snapshot."""
        self._topic.ensure(replication=self._replication, config={
            "max.message.bytes": str(MAX_SNAPSHOT_BYTES + 4096),
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
            self._producer = self._topic.writer()
        try:
            self._producer.produce(self.topic, _KEY, data)
            self._producer.deliver(timeout)
        except KafkaClientError as error:
            log.warning("publishing the snapshot at offset %d failed: %s",
                        checkpoint.header.offset, error)
            return False
        return True

    def newest(self, expected: Incarnation, timeout: float = 30.0) -> Checkpoint | None:
        """The usable snapshot with the highest offset, or None (unusable ones are logged).
        ``timeout`` bounds reading the topic."""
        best: Checkpoint | None = None
        try:
            for record in self._topic.read(f"{self.topic}-reader", timeout):
                try:
                    candidate = parse(record.value or b"", expected)
                except CheckpointError as unusable:
                    log.warning("ignoring the snapshot at %s offset %s: %s", self.topic,
                                record.offset, unusable)
                    continue
                if best is None or candidate.header.offset > best.header.offset:
                    best = candidate
        except KafkaUnavailableError:
            raise
        except KafkaClientError as error:  # whatever the reason, the node replays instead
            raise KafkaUnavailableError(f"reading {self.topic} failed: {error}") from error
        return best

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(5)
