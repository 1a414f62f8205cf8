"""The copy of the command log that a repair takes and a restore writes back: its committed
records and the shape of its topic, read from Kafka, and the backup file that holds them.

A :class:`StoredRecord` is one committed record with everything needed to write it again at its
offset (key, value, headers, timestamp). A backup file is one JSON document: a header (format and
version, service, topic and topic id, :class:`TopicShape`, record count) and the records, one a
line, their bytes in base64. :func:`write_backup` only ever creates a new file and syncs it to
disk; :func:`read_backup` checks the whole file before anything is written from it.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metastore.kafka.admin import Admin
from metastore.kafka.consumer import Headers, PartitionReader
from metastore.kafka.settings import KafkaSettings
from metastore.log.exceptions import RepairError

BACKUP_FORMAT = "metastore-command-log-backup"
BACKUP_VERSION = 1


# -- records and backups ---------------------------------------------------------------------

@dataclass(frozen=True)
class StoredRecord:
    """One committed record of the command log, everything needed to write it again."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp_ms: int | None = None

    @property
    def identity(self) -> tuple[int, bytes | None, bytes | None, Headers]:
        return self.offset, self.key, self.value, self.headers

    def key_text(self) -> str | None:
        return None if self.key is None else self.key.decode(errors="replace")

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "key": _b64(self.key), "value": _b64(self.value),
                "headers": [[name, _b64(value)] for name, value in self.headers],
                "timestamp": self.timestamp_ms}

    @staticmethod
    def from_json(data: dict[str, Any]) -> StoredRecord:
        timestamp = data.get("timestamp")
        return StoredRecord(
            offset=int(data["offset"]), key=_unb64(data.get("key")),
            value=_unb64(data.get("value")),
            headers=tuple((str(name), _unb64(value)) for name, value in data.get("headers", [])),
            timestamp_ms=None if timestamp is None else int(timestamp))


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: object) -> bytes | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"expected base64 text, got {type(text).__name__}")
    return base64.b64decode(text, validate=True)


@dataclass(frozen=True)
class TopicShape:
    """What the command topic is re-created with."""

    replication: int
    min_insync_replicas: int | None = None
    max_message_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"replication": self.replication, "minInsyncReplicas": self.min_insync_replicas,
                "maxMessageBytes": self.max_message_bytes}

    @staticmethod
    def from_json(data: dict[str, Any]) -> TopicShape:
        def number(name: str) -> int | None:
            value = data.get(name)
            return None if value is None else int(value)

        return TopicShape(int(data["replication"]), number("minInsyncReplicas"),
                          number("maxMessageBytes"))


@dataclass(frozen=True)
class Backup:
    service_id: str
    topic: str
    topic_id: str
    shape: TopicShape
    records: tuple[StoredRecord, ...]
    taken_at: str = ""


def write_backup(path: Path, backup: Backup) -> None:
    """Write ``backup`` to a new file (never over an existing one), one record per line."""
    header = {"format": BACKUP_FORMAT, "version": BACKUP_VERSION, "serviceId": backup.service_id,
              "topic": backup.topic, "topicId": backup.topic_id, "takenAt": backup.taken_at,
              "topicShape": backup.shape.to_json(), "count": len(backup.records)}
    try:
        handle = path.open("x", encoding="utf-8")
    except FileExistsError as error:
        raise RepairError(f"the backup file {path} already exists; name a new file") from error
    except OSError as error:
        raise RepairError(f"cannot create the backup file {path}: {error}") from error
    try:
        with handle:
            handle.write(json.dumps(header)[:-1] + ', "records": [\n')
            for index, record in enumerate(backup.records):
                separator = ",\n" if index < len(backup.records) - 1 else "\n"
                handle.write(json.dumps(record.to_json()) + separator)
            handle.write("]}\n")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as error:
        path.unlink(missing_ok=True)
        raise RepairError(f"writing the backup file {path} failed: {error}") from error


def read_backup(path: Path) -> Backup:
    """The backup in ``path``, checked whole: its format, record count and increasing offsets."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise RepairError(f"cannot read the backup file {path}: {error}") from error
    if not isinstance(data, dict) or data.get("format") != BACKUP_FORMAT:
        raise RepairError(f"{path} is not a command log backup")
    if data.get("version") != BACKUP_VERSION:
        raise RepairError(f"{path} is a backup of format version {data.get('version')}; this "
                          f"version reads {BACKUP_VERSION}")
    try:
        records = tuple(StoredRecord.from_json(item) for item in data["records"])
        backup = Backup(str(data["serviceId"]), str(data["topic"]), str(data["topicId"]),
                        TopicShape.from_json(data["topicShape"]), records,
                        str(data.get("takenAt", "")))
        count = int(data["count"])
    except (KeyError, TypeError, ValueError, binascii.Error) as error:
        raise RepairError(f"the backup file {path} is damaged: {error}") from error
    if count != len(records):
        raise RepairError(f"the backup file {path} is damaged: it announces {count} records "
                          f"and holds {len(records)}")
    offsets = [record.offset for record in records]
    if any(b <= a for a, b in itertools.pairwise(offsets)) or any(o < 0 for o in offsets):
        raise RepairError(f"the backup file {path} is damaged: its offsets do not increase")
    return backup



# -- reading the log ---------------------------------------------------------------------------
def read_records(settings: KafkaSettings, topic: str, group_id: str,
                 timeout: float | None = None) -> list[StoredRecord]:
    """Every committed record up to the log's last stable offset, with headers and timestamps.
    ``timeout`` bounds the read (by default 60 s and a second per 10,000 offsets)."""
    reader = PartitionReader(settings, topic, group_id=group_id, details=True)
    try:
        return [StoredRecord(record.offset, record.key, record.value, record.headers,
                             record.timestamp_ms)
                for batch in reader.read_to_end(timeout) for record in batch]
    finally:
        reader.close()


def topic_shape(admin: Admin, topic: str) -> TopicShape:
    info = admin.describe(topic)
    if info is None:
        raise RepairError(f"the command topic {topic} does not exist")
    config = admin.topic_config(topic)

    def number(name: str) -> int | None:
        value = config.get(name)
        return int(value) if value is not None and value.lstrip("-").isdigit() else None

    return TopicShape(info.replication, number("min.insync.replicas"), number("max.message.bytes"))
