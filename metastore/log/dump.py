"""Read the committed command log once (for `metastore log`, the history a node serves, and
consistency checks)."""

from __future__ import annotations

import time
from typing import Any

from metastore.kafka.consumer import PartitionReader, Record
from metastore.kafka.exceptions import KafkaUnavailableError
from metastore.kafka.settings import KafkaSettings
from metastore.log.record import RecordError, decode


def read_committed(settings: KafkaSettings, topic: str, group_id: str,
                   timeout: float | None = None, details: bool = False,
                   start: int = 0, until: int | None = None) -> list[Record]:
    """Every committed record from ``start`` up to the log's current end, or ``until`` if it
    is before (read_committed, markers skipped); with ``details``, with their headers and
    times."""
    reader = PartitionReader(settings, topic, start_offset=start, group_id=group_id,
                             details=details)
    try:
        end = reader.end_offset() if until is None else min(until, reader.end_offset())
        deadline = time.monotonic() + (timeout if timeout is not None else 60 + end / 10_000)
        records: list[Record] = []
        while reader.position < end:
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(
                    f"timed out reading {topic} at offset {reader.position} of {end}")
            records.extend(reader.poll(0.5, max_records=10_000))
        return [record for record in records if record.offset < end]
    finally:
        reader.close()


HISTORY_FIELDS = ("statement", "submitter", "originNode")


def history_rows(records: list[Record], brief: bool = False) -> list[dict[str, Any]]:
    """Who wrote what, when: each record's offset, Kafka timestamp (ms), command id and decoded
    command (its ``statement``, ``submitter`` and ``originNode``; with ``brief``, only those),
    or the reason it cannot be decoded. ``metastore log dump`` prints them;
    ``GET /v1/metastore/log`` serves the brief ones."""
    rows: list[dict[str, Any]] = []
    for record in records:
        try:
            data: dict[str, Any] = decode(record.value, record.offset).to_json()
        except RecordError as error:
            data = {"error": error.message}
        if brief:
            data = {key: value for key, value in data.items()
                    if key in (*HISTORY_FIELDS, "error")}
        rows.append({"offset": record.offset, "timestamp": record.timestamp_ms,
                     "key": record.key.decode(errors="replace") if record.key else None, **data})
    return rows
