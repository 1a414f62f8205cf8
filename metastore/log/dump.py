"""Read the whole committed command log once (for `metastore log` and consistency checks)."""

from __future__ import annotations

import time

from metastore.kafka.consumer import PartitionReader, Record
from metastore.kafka.exceptions import KafkaUnavailableError
from metastore.kafka.settings import KafkaSettings


def read_committed(settings: KafkaSettings, topic: str, group_id: str,
                   timeout: float | None = None, details: bool = False) -> list[Record]:
    """Every committed record up to the log's current end (read_committed, markers skipped);
    with ``details``, with their headers and times."""
    reader = PartitionReader(settings, topic, group_id=group_id, details=details)
    try:
        end = reader.end_offset()
        deadline = time.monotonic() + (timeout if timeout is not None else 60 + end / 10_000)
        records: list[Record] = []
        while reader.position < end:
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(
                    f"timed out reading {topic} at offset {reader.position} of {end}")
            records.extend(reader.poll(0.5, max_records=10_000))
        return records
    finally:
        reader.close()
