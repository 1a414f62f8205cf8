"""Repair and restore the command log: back it up, leave out records that cannot be replayed,
and write the rest into a re-created topic at the offsets they had.

A record that a node cannot replay (undecodable, of a newer version, or one whose command makes
``apply`` raise) stops every node at its offset for good. :func:`repair` reads the whole committed
log, writes every record to a backup file, finds the records that fail to replay (replaying the
rest as a node would), and, when told to, fences the writer, deletes the topic, re-creates it with
the same shape and writes the kept records back. :func:`restore` writes a backup back the same way,
so a repair can be undone.

Records keep their offsets. Query ids derive from offsets (``CSAS_<SINK>_<offset>``) and TERMINATE
names them, so moving a record could change what a later command refers to. Transaction markers
and aborted records occupy offsets too; the writer reproduces the gaps between kept records with
commit markers, aborted filler transactions of a second transactional id and, for a gap at the
very start, records deleted with DeleteRecords. Every offset Kafka assigns is checked, so the
repaired log replays to exactly the image the plan announced.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import itertools
import json
import os
import time
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from metastore.catalog.image import EMPTY_IMAGE, Image
from metastore.checkpoint.store import Incarnation
from metastore.exceptions import MetastoreError
from metastore.kafka.admin import Admin
from metastore.kafka.consumer import EndOffsetProbe
from metastore.kafka.exceptions import KafkaClientError, KafkaUnavailableError
from metastore.kafka.producer import TransactionalProducer, classify
from metastore.kafka.settings import KafkaSettings
from metastore.log.record import IncompatibleRecordError, UnappliableRecordError
from metastore.log.replay import replay_encoded
from metastore.log.topic import CommandTopicSpec, command_topic_name, ensure_command_topic
from metastore.membership import membership_topic_name

BACKUP_FORMAT = "metastore-command-log-backup"
BACKUP_VERSION = 1
HEARTBEAT_ALIVE_MS = 6_000
"""A node is alive while its last heartbeat is younger than three 2 s intervals (membership)."""
TRANSACTION_TIMEOUT_MS = 120_000
FILLER_KEY = b"metastore-repair-gap"
Progress = Callable[[str], None]


class RepairError(MetastoreError):
    """The repair or restore was refused, or could not be completed."""

    code = "repair_refused"


class RewriteError(RepairError):
    """Writing the re-created topic failed: it is incomplete until a restore from the backup."""

    code = "rewrite_failed"


# -- records and backups ---------------------------------------------------------------------
Headers = tuple[tuple[str, bytes | None], ...]


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
    """Every committed record up to the log's last stable offset, with headers and timestamps."""
    consumer = Consumer(settings.config(
        group_id=group_id, enable_auto_commit=False, enable_partition_eof=True,
        isolation_level="read_committed", auto_offset_reset="earliest", fetch_wait_max_ms=10))
    partition = TopicPartition(topic, 0)
    try:
        try:
            _low, end = consumer.get_watermark_offsets(partition, timeout=10, cached=False)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"reading the end offset of {topic} failed: {exc}") from exc
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + (timeout if timeout is not None else 60 + end / 10_000)
        records: list[StoredRecord] = []
        position = 0
        while position < end:
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(f"timed out reading {topic} at offset {position} of {end}")
            try:
                messages = consumer.consume(10_000, 0.5)
            except KafkaException as exc:
                raise KafkaClientError(f"consume failed: {exc}") from exc
            for message in messages:
                position = max(position, _absorb(message, records))
        return records
    finally:
        consumer.close()


def _absorb(message: Message, records: list[StoredRecord]) -> int:
    """Add ``message`` to ``records``; the position it proves the reader has reached."""
    offset = message.offset() or 0
    error = message.error()
    if error is not None:
        if error.code() == KafkaError._PARTITION_EOF:
            return offset
        if error.fatal() or not error.retriable():
            raise KafkaClientError(f"consume failed: {error.str()}")
        return 0
    kind, stamp = message.timestamp()
    found = message.headers() or []
    pairs = found.items() if isinstance(found, dict) else found
    headers = tuple((name, value.encode() if isinstance(value, str) else value)
                    for name, value in pairs)
    records.append(StoredRecord(offset, message.key(), message.value(), headers,
                                None if kind == TIMESTAMP_NOT_AVAILABLE else stamp))
    return offset + 1


def topic_shape(admin: Admin, topic: str) -> TopicShape:
    info = admin.describe(topic)
    if info is None:
        raise RepairError(f"the command topic {topic} does not exist")
    config = admin.topic_config(topic)

    def number(name: str) -> int | None:
        value = config.get(name)
        return int(value) if value is not None and value.lstrip("-").isdigit() else None

    return TopicShape(info.replication, number("min.insync.replicas"), number("max.message.bytes"))


# -- finding what cannot be replayed -----------------------------------------------------------
@dataclass(frozen=True)
class Skipped:
    """A record left out, and why: REQUESTED (--skip-offset), CORRUPTED, INCOMPATIBLE (a newer
    record version) or UNAPPLIABLE (replaying it raised)."""

    offset: int
    key: str | None
    kind: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "key": self.key, "kind": self.kind, "reason": self.reason}


def replay_records(image: Image, run: Sequence[StoredRecord]) -> tuple[Image, Skipped | None]:
    """Replay ``run`` as a node does (:func:`replay_encoded`); the image before the first record
    that fails, and that record."""
    result = replay_encoded(image, ((record.offset, record.value) for record in run))
    if result.error is None:
        return result.image, None
    record = run[len(result.applied)]
    kind = ("INCOMPATIBLE" if isinstance(result.error, IncompatibleRecordError)
            else "UNAPPLIABLE" if isinstance(result.error, UnappliableRecordError)
            else "CORRUPTED")
    return result.image, Skipped(record.offset, record.key_text(), kind, result.error.message)


def find_unreplayable(records: Sequence[StoredRecord],
                      leave_out: Set[int] = frozenset()) -> tuple[Image, list[Skipped]]:
    """Replay ``records`` without ``leave_out``, leaving out each record that fails as well; the
    resulting image and the records that failed, in order."""
    pending = [record for record in records if record.offset not in leave_out]
    image, failures, start = EMPTY_IMAGE, [], 0
    while start < len(pending):
        image, failure = replay_records(image, pending[start:])
        if failure is None:
            break
        failures.append(failure)
        start = next(i for i in range(start, len(pending)) if pending[i].offset == failure.offset) + 1
    return image, failures


@dataclass(frozen=True)
class RepairPlan:
    """What a repair keeps and leaves out, and the image the kept records replay to."""

    service_id: str
    topic: str
    topic_id: str
    shape: TopicShape
    records: tuple[StoredRecord, ...]
    skipped: tuple[Skipped, ...]
    left_in: tuple[Skipped, ...]
    """Records that fail to replay but were not asked to be skipped."""
    image: Image

    @property
    def kept(self) -> list[StoredRecord]:
        gone = {s.offset for s in self.skipped}
        return [record for record in self.records if record.offset not in gone]

    @property
    def refusal(self) -> str | None:
        if self.left_in:
            offsets = ", ".join(str(s.offset) for s in self.left_in)
            return (f"{len(self.left_in)} record(s) cannot be replayed (offsets {offsets}); pass "
                    "--skip-unappliable to leave them out, or --skip-offset for each")
        if not self.skipped:
            return "nothing to do: every committed record of the log replays"
        return None

    def to_json(self) -> dict[str, Any]:
        return {"serviceId": self.service_id, "topic": self.topic, "topicId": self.topic_id,
                "records": len(self.records),
                "endOffset": self.records[-1].offset + 1 if self.records else 0,
                "kept": len(self.records) - len(self.skipped),
                "skipped": [s.to_json() for s in self.skipped],
                "unappliableNotSkipped": [s.to_json() for s in self.left_in],
                "fingerprint": self.image.fingerprint, "sources": len(self.image.sources),
                "queries": len(self.image.queries), "refused": self.refusal}


def plan_repair(records: Sequence[StoredRecord], service_id: str, topic: str, topic_id: str,
                shape: TopicShape, skip_offsets: Set[int] = frozenset(),
                skip_unappliable: bool = False) -> RepairPlan:
    """Which records to keep; an offset in ``skip_offsets`` must hold a committed record."""
    by_offset = {record.offset: record for record in records}
    strangers = sorted(set(skip_offsets) - by_offset.keys())
    if strangers:
        end = records[-1].offset + 1 if records else 0
        raise RepairError(
            f"offset(s) {', '.join(map(str, strangers))} hold no committed record of {topic} "
            f"(its committed records end at offset {end}; the others are transaction markers or "
            "aborted records): see `metastore log dump`")
    requested = [Skipped(o, by_offset[o].key_text(), "REQUESTED", "--skip-offset")
                 for o in sorted(skip_offsets)]
    image, failures = find_unreplayable(records, skip_offsets)
    skipped = sorted([*requested, *(failures if skip_unappliable else [])], key=lambda s: s.offset)
    return RepairPlan(service_id, topic, topic_id, shape, tuple(records), tuple(skipped),
                      () if skip_unappliable else tuple(failures), image)


# -- making sure nobody writes -----------------------------------------------------------------
def live_nodes(settings: KafkaSettings, admin: Admin, service_id: str) -> list[str]:
    """The nodes of ``service_id`` whose last heartbeat is recent: ``node (url), age``."""
    topic = membership_topic_name(service_id)
    if admin.describe(topic) is None:
        return []
    consumer = Consumer(settings.config(group_id=f"{service_id}-log-repair-{time.time_ns()}",
                                        enable_auto_commit=False, enable_partition_eof=True,
                                        isolation_level="read_uncommitted"))
    latest: dict[str, tuple[str, int]] = {}
    try:
        _low, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10,
                                                   cached=False)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        position, deadline = 0, time.monotonic() + 30
        while position < end:
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(f"timed out reading {topic} at offset {position} of "
                                            f"{end}")
            for message in consumer.consume(1000, 0.5):
                offset = message.offset() or 0
                if message.error() is not None:
                    position = max(position, offset)
                    continue
                position = max(position, offset + 1)
                try:
                    beat = json.loads(message.value() or b"")
                    latest[str(beat["nodeId"])] = (str(beat.get("url", "")),
                                                   int(beat["timestampMs"]))
                except (ValueError, KeyError, TypeError):
                    continue
    except KafkaException as exc:
        raise KafkaUnavailableError(f"reading {topic} failed: {exc}") from exc
    finally:
        consumer.close()
    now = int(time.time() * 1000)
    return [f"{node} ({url}), last heartbeat {(now - at) / 1000:.1f}s ago"
            for node, (url, at) in sorted(latest.items()) if now - at <= HEARTBEAT_ALIVE_MS]


def quiesce(settings: KafkaSettings, admin: Admin, service_id: str, topic: str,
            progress: Progress | None = None) -> None:
    """Refuse while a node heartbeats; fence the service's writer (``init_transactions`` on its
    transactional.id aborts an open transaction and fences every earlier producer); refuse while
    another producer holds a transaction open on the topic."""
    alive = live_nodes(settings, admin, service_id)
    if alive:
        raise RepairError(f"nodes of service {service_id} are running: {'; '.join(alive)}. Stop "
                          "every node first (a stopped node's heartbeat ages out within "
                          f"{HEARTBEAT_ALIVE_MS // 1000}s)")
    fence = TransactionalProducer(settings, service_id)
    try:
        fence.init()
    finally:
        fence.close()
    _note(progress, f"fenced the writer of service {service_id}")
    if admin.describe(topic) is None:
        return
    committed = EndOffsetProbe(settings, topic, group_id=f"{service_id}-log-repair",
                               committed=True)
    written = EndOffsetProbe(settings, topic, group_id=f"{service_id}-log-repair",
                             committed=False)
    try:
        deadline = time.monotonic() + 15
        while True:
            stable, high = committed.end_offset(), written.end_offset()
            if stable >= high:
                return
            if time.monotonic() > deadline:
                raise RepairError(
                    f"offsets {stable}..{high - 1} of {topic} belong to a transaction that is "
                    "still open, of a producer other than the service's writer: stop it first")
            time.sleep(0.1)
    finally:
        committed.close()
        written.close()


def _note(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


# -- writing records back at their offsets -----------------------------------------------------
class _Transactions:
    """A transactional producer that checks the offset Kafka gives every record it writes."""

    def __init__(self, settings: KafkaSettings, transactional_id: str, timeout: float) -> None:
        self._timeout = timeout
        self._producer = Producer(settings.config(
            transactional_id=transactional_id, enable_idempotence=True, acks="all", linger_ms=5,
            transaction_timeout_ms=TRANSACTION_TIMEOUT_MS, message_timeout_ms=int(timeout * 1000)))
        self._expected: list[int] = []
        self._delivered: list[int] = []
        self._failed: KafkaError | None = None
        self.open = False
        self._call("init_transactions", self._producer.init_transactions, timeout)

    def _call(self, action: str, fn: Callable[..., object], *args: object) -> None:
        try:
            fn(*args)
        except KafkaException as exc:
            raise classify(exc.args[0], action) from exc

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._failed = self._failed or error
        elif message.offset() is not None:
            self._delivered.append(int(message.offset() or 0))

    def produce(self, topic: str, offset: int, key: bytes | None, value: bytes | None,
                headers: Headers = (), timestamp_ms: int | None = None) -> None:
        if not self.open:
            self._call("begin_transaction", self._producer.begin_transaction)
            self.open = True
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, headers=list(headers),
                                       timestamp=timestamp_ms or 0, on_delivery=self._on_delivery)
                break
            except BufferError:
                self._producer.poll(0.1)
            except KafkaException as exc:
                raise classify(exc.args[0], "produce") from exc
        self._expected.append(offset)

    def flush(self) -> None:
        """Deliver what was produced; every record must be at the offset it was meant for."""
        remaining = self._producer.flush(self._timeout)
        if self._failed is not None:
            raise classify(self._failed, "produce")
        if remaining:
            raise KafkaUnavailableError(f"{remaining} record(s) not delivered within "
                                        f"{self._timeout:.0f}s")
        if sorted(self._delivered) != self._expected:
            raise RepairError(f"records landed at offsets {_span(sorted(self._delivered))} "
                              f"instead of {_span(self._expected)}: something else writes to the "
                              "topic")
        self._expected, self._delivered = [], []

    def commit(self) -> None:
        self.flush()
        self._call("commit_transaction", self._producer.commit_transaction, self._timeout)
        self.open = False

    def abort(self) -> None:
        self.flush()
        self._call("abort_transaction", self._producer.abort_transaction, self._timeout)
        self.open = False

    def close(self) -> None:
        if self.open:
            with contextlib.suppress(KafkaException):
                self._producer.abort_transaction(self._timeout)
            self.open = False


def _span(offsets: Sequence[int]) -> str:
    if not offsets:
        return "(none)"
    return str(offsets[0]) if len(offsets) == 1 else f"{offsets[0]}..{offsets[-1]}"


class _Placer:
    """Writes records into an empty topic, each at its own offset.

    Between two kept records the topic must hold offsets that read_committed readers skip: one
    is the commit marker of the open transaction; two are an aborted transaction of one filler
    record (of a second transactional id) while the main transaction stays open; more are a commit
    marker and an aborted filler transaction. A gap at the very start is written and deleted
    (DeleteRecords) instead, since nothing can be committed yet.
    """

    def __init__(self, settings: KafkaSettings, topic: str, service_id: str,
                 timeout: float = 30.0) -> None:
        self._settings = settings
        self._topic = topic
        self._service_id = service_id
        self._timeout = timeout
        self._main = _Transactions(settings, service_id, timeout)
        self._filler: _Transactions | None = None
        self._high = EndOffsetProbe(settings, topic, group_id=f"{service_id}-log-repair",
                                    committed=False)
        self.next = 0
        self.transactions = 0

    def place(self, records: Sequence[StoredRecord], progress: Progress | None = None) -> None:
        last_note = time.monotonic()
        for index, record in enumerate(records):
            gap = record.offset - self.next
            if gap < 0:
                raise RepairError(f"record offsets must increase: {record.offset} after "
                                  f"{self.next - 1}")
            if gap:
                self._fill(gap)
            self._main.produce(self._topic, record.offset, record.key, record.value,
                               record.headers, record.timestamp_ms)
            self.next += 1
            if progress is not None and time.monotonic() - last_note > 5:
                last_note = time.monotonic()
                progress(f"written {index + 1} of {len(records)} records")
        if self._main.open:
            self._commit()

    def _fill(self, gap: int) -> None:
        if not self._main.open:
            if gap == 1:
                self._truncate_head()
            else:
                self._aborted_filler(gap - 1)
        elif gap == 1:
            self._commit()
        elif gap == 2:
            self._main.flush()
            self._aborted_filler(1)
        else:
            self._commit()
            self._aborted_filler(gap - 2)

    def _commit(self) -> None:
        self._main.commit()
        self.transactions += 1
        self.next += 1
        self._await(self.next)

    def _aborted_filler(self, count: int) -> None:
        if self._filler is None:
            self._filler = _Transactions(self._settings, f"{self._service_id}-log-repair-filler",
                                         self._timeout)
        for _ in range(count):
            self._filler.produce(self._topic, self.next, FILLER_KEY, None)
            self.next += 1
        self._filler.abort()
        self.next += 1
        self._await(self.next)

    def _truncate_head(self) -> None:
        """Occupy offset 0 with a record and delete it: the log then starts at offset 1."""
        producer = Producer(self._settings.config(enable_idempotence=True, acks="all"))
        delivered: list[int] = []
        producer.produce(self._topic, key=FILLER_KEY, value=None,
                         on_delivery=lambda error, message: delivered.append(
                             -1 if error is not None else int(message.offset() or 0)))
        producer.flush(self._timeout)
        if delivered != [0]:
            raise RepairError(f"the record occupying offset 0 landed at {delivered}")
        admin = AdminClient(self._settings.config())
        futures = admin.delete_records([TopicPartition(self._topic, 0, 1)],
                                       request_timeout=self._timeout)
        try:
            for future in futures.values():
                future.result(self._timeout)
        except KafkaException as exc:
            raise classify(exc.args[0], "delete_records") from exc
        self.next = 1

    def _await(self, target: int) -> None:
        """Wait until the topic's high watermark reaches ``target`` (markers are asynchronous)."""
        deadline = time.monotonic() + self._timeout
        while True:
            high = self._high.end_offset()
            if high == target:
                return
            if high > target:
                raise RepairError(f"the topic reached offset {high}, beyond the expected {target}: "
                                  "something else writes to it")
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(f"the topic did not reach offset {target} within "
                                            f"{self._timeout:.0f}s (it is at {high})")
            time.sleep(0.002)

    def close(self) -> None:
        self._main.close()
        if self._filler is not None:
            self._filler.close()
        self._high.close()


def recreate(admin: Admin, topic: str, shape: TopicShape, within: float = 60.0) -> str:
    """Delete ``topic`` if it exists and create it again with ``shape``; its new topic id."""
    old_id = admin.topic_id(topic) if admin.describe(topic) is not None else None
    if old_id is not None:
        admin.delete(topic)
    spec = CommandTopicSpec(topic, shape.replication, shape.min_insync_replicas)
    config = spec.configs(shape.replication)
    if shape.max_message_bytes is not None:
        config["max.message.bytes"] = str(shape.max_message_bytes)
    deadline = time.monotonic() + within
    while not admin.create(topic, partitions=1, replication=shape.replication, config=config):
        if time.monotonic() > deadline:
            raise RepairError(f"{topic} still exists {within:.0f}s after it was deleted")
        time.sleep(0.2)
    ensure_command_topic(admin, spec, admin.broker_count())
    new_id = admin.topic_id(topic)
    if new_id == old_id:
        raise RepairError(f"{topic} kept its topic id {old_id}: it was not re-created")
    return new_id


def rewrite(settings: KafkaSettings, admin: Admin, service_id: str, topic: str,
            shape: TopicShape, records: Sequence[StoredRecord], backup: Path,
            progress: Progress | None = None) -> str:
    """Re-create the topic and write ``records`` at their offsets; the new topic id."""
    try:
        new_id = recreate(admin, topic, shape)
        _note(progress, f"re-created {topic} (topic id {new_id})")
        placer = _Placer(settings, topic, service_id)
        try:
            placer.place(records, progress)
        finally:
            placer.close()
    except MetastoreError as error:
        raise RewriteError(
            f"writing {topic} failed: {error}. The topic is incomplete: restore it with "
            f"`metastore log restore --backup {backup} --service-id {service_id} --yes`") from error
    _note(progress, f"wrote {len(records)} records in {placer.transactions} transactions")
    return new_id


def _verify(settings: KafkaSettings, service_id: str, topic: str,
            expected: Sequence[StoredRecord]) -> list[StoredRecord]:
    found = read_records(settings, topic, f"{service_id}-log-repair-{time.time_ns()}")
    if [r.identity for r in found] != [r.identity for r in expected]:
        offsets = [r.offset for r in found]
        raise RewriteError(f"{topic} holds {len(found)} records at offsets {_span(offsets)} after "
                           f"writing {len(expected)} at {_span([r.offset for r in expected])}; "
                           "they differ")
    return found


# -- the two operations ------------------------------------------------------------------------
@dataclass(frozen=True)
class RepairOptions:
    skip_offsets: frozenset[int] = frozenset()
    skip_unappliable: bool = False
    dry_run: bool = False
    confirmed: bool = False
    """--yes: fence, delete, re-create and write; without it nothing is touched."""


@dataclass(frozen=True)
class Rewritten:
    """What a repair or restore wrote."""

    backup: Path
    old_topic_id: str | None
    new_topic_id: str
    image: Image
    bad_record: Skipped | None = None

    def to_json(self, service_id: str, topic: str) -> dict[str, Any]:
        old = (None if self.old_topic_id is None
               else Incarnation(service_id, topic, self.old_topic_id).path())
        return {"backup": str(self.backup), "oldTopicId": self.old_topic_id,
                "newTopicId": self.new_topic_id, "fingerprint": self.image.fingerprint,
                "sources": len(self.image.sources), "queries": len(self.image.queries),
                "badRecord": None if self.bad_record is None else self.bad_record.to_json(),
                "queryCheckpoints": {
                    "old": old, "new": Incarnation(service_id, topic, self.new_topic_id).path()}}


@dataclass(frozen=True)
class RepairReport:
    plan: RepairPlan
    rewritten: Rewritten | None = None

    def to_json(self) -> dict[str, Any]:
        return {**self.plan.to_json(), "written": self.rewritten is not None,
                "result": None if self.rewritten is None
                else self.rewritten.to_json(self.plan.service_id, self.plan.topic)}


def repair(settings: KafkaSettings, service_id: str, backup: Path,
           options: RepairOptions | None = None, progress: Progress | None = None) -> RepairReport:
    """Plan a repair of the service's command log and, with ``options.confirmed``, carry it out:
    fence, back up every record to ``backup``, re-create the topic, write the kept records at
    their offsets, and check that the new log replays to the planned image."""
    options = options or RepairOptions()
    if backup.exists():
        raise RepairError(f"the backup file {backup} already exists; name a new file")
    if not backup.parent.is_dir():
        raise RepairError(f"the directory of the backup file, {backup.parent}, does not exist")
    topic = command_topic_name(service_id)
    admin = Admin(settings)
    if admin.describe(topic) is None:
        raise RepairError(f"service {service_id} has no command topic ({topic} does not exist)")
    writing = options.confirmed and not options.dry_run
    if writing:
        quiesce(settings, admin, service_id, topic, progress)
    topic_id = admin.topic_id(topic)
    records = read_records(settings, topic, f"{service_id}-log-repair-{time.time_ns()}")
    _note(progress, f"read {len(records)} committed records of {topic}")
    plan = plan_repair(records, service_id, topic, topic_id, topic_shape(admin, topic),
                       options.skip_offsets, options.skip_unappliable)
    if not writing or plan.refusal is not None:
        return RepairReport(plan)
    write_backup(backup, Backup(service_id, topic, topic_id, plan.shape, plan.records,
                                datetime.now(UTC).isoformat(timespec="seconds")))
    _note(progress, f"backed up {len(records)} records to {backup}")
    new_id = rewrite(settings, admin, service_id, topic, plan.shape, plan.kept, backup, progress)
    found = _verify(settings, service_id, topic, plan.kept)
    image, failure = replay_records(EMPTY_IMAGE, found)
    if failure is not None or image.fingerprint != plan.image.fingerprint:
        problem = (f"offset {failure.offset} fails: {failure.reason}" if failure is not None
                   else f"it replays to {image.fingerprint}, not the planned "
                        f"{plan.image.fingerprint}")
        raise RewriteError(f"the repaired log does not replay as planned: {problem}. Restore it "
                           f"with `metastore log restore --backup {backup} --service-id "
                           f"{service_id} --yes`")
    return RepairReport(plan, Rewritten(backup, topic_id, new_id, image))


@dataclass(frozen=True)
class RestoreReport:
    backup: Backup
    path: Path
    current: int
    """Committed records the topic held before (0 when it did not exist)."""
    discarded: tuple[StoredRecord, ...]
    """Records of the current log the backup does not hold."""
    rewritten: Rewritten | None = None
    refusal: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"serviceId": self.backup.service_id, "topic": self.backup.topic,
                "backup": str(self.path), "backupTakenAt": self.backup.taken_at,
                "records": len(self.backup.records), "currentRecords": self.current,
                "discarded": [{"offset": r.offset, "key": r.key_text()} for r in self.discarded],
                "refused": self.refusal, "written": self.rewritten is not None,
                "result": None if self.rewritten is None
                else self.rewritten.to_json(self.backup.service_id, self.backup.topic)}


@dataclass(frozen=True)
class RestoreOptions:
    dry_run: bool = False
    confirmed: bool = False
    discard_newer: bool = False
    """Go on although the current log holds records the backup does not (they are lost)."""


def restore(settings: KafkaSettings, service_id: str, path: Path,
            options: RestoreOptions | None = None,
            progress: Progress | None = None) -> RestoreReport:
    """Write the records of the backup in ``path`` back into a re-created command topic, at their
    offsets (undoing a repair); with ``options.confirmed`` only."""
    options = options or RestoreOptions()
    backup = read_backup(path)
    topic = command_topic_name(service_id)
    if (backup.service_id, backup.topic) != (service_id, topic):
        raise RepairError(f"{path} is a backup of service {backup.service_id} ({backup.topic}), "
                          f"not of {service_id}")
    admin = Admin(settings)
    writing = options.confirmed and not options.dry_run
    if writing:
        quiesce(settings, admin, service_id, topic, progress)
    exists = admin.describe(topic) is not None
    old_id = admin.topic_id(topic) if exists else None
    current = (read_records(settings, topic, f"{service_id}-log-repair-{time.time_ns()}")
               if exists else [])
    held = {record.identity for record in backup.records}
    discarded = tuple(record for record in current if record.identity not in held)
    refusal = None
    if discarded and not options.discard_newer:
        refusal = (f"the current log holds {len(discarded)} record(s) the backup does not "
                   f"(offsets {', '.join(str(r.offset) for r in discarded[:20])}"
                   f"{', ...' if len(discarded) > 20 else ''}); pass --discard-newer to lose them")
    report = RestoreReport(backup, path, len(current), discarded, refusal=refusal)
    if not writing or refusal is not None:
        return report
    new_id = rewrite(settings, admin, service_id, topic, backup.shape, backup.records, path,
                     progress)
    found = _verify(settings, service_id, topic, backup.records)
    image, failure = replay_records(EMPTY_IMAGE, found)
    return RestoreReport(backup, path, len(current), discarded,
                         Rewritten(path, old_id, new_id, image, failure))

