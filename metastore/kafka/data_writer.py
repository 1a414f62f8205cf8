"""Records a node writes into data topics (``INSERT INTO ... VALUES``), outside the command log.

One idempotent, non-transactional producer per node (``acks=all``, Java's partitioner), created
on the first write and closed when the node stops. Each write waits for the broker's
acknowledgement: a record Kafka refused or did not acknowledge in time raises its typed
:class:`KafkaClientError`, never passes for written. Writes are serialised: one record at a time is in flight.
"""

from __future__ import annotations

import threading

from metastore.kafka.exceptions import KafkaUnavailableError
from metastore.kafka.producer import RecordProducer
from metastore.kafka.settings import KafkaSettings

JAVA_PARTITIONER = "murmur2_random"
"""The partition of a keyed record as Java's producers choose it (murmur2 of the key), as
ksqlDB's INSERT VALUES and the queries' Spark sinks write: librdkafka's default (CRC32) would
put a key's records in another partition than the queries' records of the same key."""


class DataWriter:
    def __init__(self, settings: KafkaSettings, timeout_ms: int = 10_000) -> None:
        self._settings = settings
        self._timeout_ms = timeout_ms
        self._producer: RecordProducer | None = None
        self._lock = threading.Lock()
        self._closed = False

    def write(self, topic: str, key: bytes | None, value: bytes | None,
              timestamp_ms: int) -> int:
        """Produce one record and wait for its acknowledgement: its offset."""
        with self._lock:
            if self._closed:
                raise KafkaUnavailableError("the node is stopping: its data writer is closed")
            if self._producer is None:
                self._producer = RecordProducer(self._settings, self._timeout_ms,
                                                enable_idempotence=True, acks="all",
                                                allow_auto_create_topics=False,
                                                partitioner=JAVA_PARTITIONER)
            try:
                self._producer.produce(topic, key, value, timestamp_ms=timestamp_ms)
                offsets = self._producer.deliver()
            except BaseException:  # a failed producer may be fatal: the next write gets a new one
                self._producer.close()
                self._producer = None
                raise
            return offsets[-1] if offsets else -1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._producer is not None:
                self._producer.close(timeout=5)
                self._producer = None
