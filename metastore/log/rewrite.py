"""Writing records back into a re-created command topic, each at the offset it had, once
nobody else can write to it.

Records keep their offsets. Query ids derive from offsets (``CSAS_<SINK>_<offset>``) and TERMINATE
names them, so moving a record could change what a later command refers to. Transaction markers
and aborted records occupy offsets too; the writer reproduces the gaps between kept records with
commit markers, aborted filler transactions of a second transactional id and, for a gap at the
very start, records deleted with DeleteRecords. Every offset Kafka assigns is checked, and
:func:`verify` reads the written topic back, so the rewritten log holds exactly the records meant.

Before anything is deleted, :func:`quiesce` refuses while a node of the service heartbeats,
fences the service's writer and waits out transactions other producers hold open on the topic.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from metastore.cluster.membership import read_heartbeats
from metastore.core.exceptions import MetastoreError
from metastore.kafka.admin import Admin
from metastore.kafka.consumer import EndOffsetProbe, Headers
from metastore.kafka.exceptions import KafkaTopicError, KafkaUnavailableError
from metastore.kafka.producer import RecordProducer, TransactionalProducer
from metastore.kafka.settings import KafkaSettings
from metastore.log.backup import StoredRecord, TopicShape, read_records
from metastore.log.exceptions import RepairError, RewriteError
from metastore.log.topic import CommandTopicSpec, ensure_command_topic

HEARTBEAT_ALIVE_MS = 6_000
"""A node is alive while its last heartbeat is younger than three 2 s intervals (membership)."""
TRANSACTION_TIMEOUT_MS = 120_000
FILLER_KEY = b"metastore-repair-gap"
Progress = Callable[[str], None]


def note(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


# -- making sure nobody writes -----------------------------------------------------------------
def live_nodes(settings: KafkaSettings, admin: Admin, service_id: str) -> list[str]:
    """The nodes of ``service_id`` whose last heartbeat is recent: ``node (url), age``."""
    beats = read_heartbeats(settings, admin, service_id,
                            group_id=f"{service_id}-log-repair-{time.time_ns()}", timeout=30)
    now = int(time.time() * 1000)
    return [f"{beat.node_id} ({beat.url}), last heartbeat {(now - beat.timestamp_ms) / 1000:.1f}s ago"
            for beat in beats if now - beat.timestamp_ms <= HEARTBEAT_ALIVE_MS]


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
    note(progress, f"fenced the writer of service {service_id}")
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



# -- writing records back at their offsets -----------------------------------------------------
class _Transactions:
    """A transactional producer that checks the offset Kafka gives every record it writes."""

    def __init__(self, settings: KafkaSettings, transactional_id: str, timeout: float) -> None:
        self._producer = TransactionalProducer(
            settings, transactional_id, timeout_ms=int(timeout * 1000), linger_ms=5,
            transaction_timeout_ms=TRANSACTION_TIMEOUT_MS)
        self._expected: list[int] = []
        self._producer.init()

    @property
    def open(self) -> bool:
        return self._producer.in_transaction

    def produce(self, topic: str, offset: int, key: bytes | None, value: bytes | None,
                headers: Headers = (), timestamp_ms: int | None = None) -> None:
        if not self.open:
            self._producer.begin()
        self._producer.produce(topic, key, value, headers, timestamp_ms)
        self._expected.append(offset)

    def flush(self) -> None:
        """Deliver what was produced; every record must be at the offset it was meant for."""
        delivered = self._producer.deliver()
        if delivered != self._expected:
            raise RepairError(f"records landed at offsets {_span(delivered)} "
                              f"instead of {_span(self._expected)}: something else writes to the "
                              "topic")
        self._expected = []

    def commit(self) -> None:
        self.flush()
        self._producer.commit()

    def abort(self) -> None:
        self.flush()
        self._producer.rollback()

    def close(self) -> None:
        self._producer.close()


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

    def __init__(self, settings: KafkaSettings, admin: Admin, topic: str, service_id: str,
                 timeout: float = 30.0) -> None:
        self._settings = settings
        self._admin = admin
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
        producer = RecordProducer(self._settings, timeout_ms=int(self._timeout * 1000),
                                  enable_idempotence=True, acks="all")
        try:
            producer.produce(self._topic, FILLER_KEY, None)
            delivered = producer.deliver()
        finally:
            producer.close()
        if delivered != [0]:
            raise RepairError(f"the record occupying offset 0 landed at {delivered}")
        self._admin.delete_records(self._topic, before=1, timeout=self._timeout)
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
    return new_topic_id(admin, topic, old_id, within)


def new_topic_id(admin: Admin, topic: str, old_id: str | None, within: float,
                 pause: float = 0.1) -> str:
    """The re-created topic's id, once the broker's metadata has caught up with the controller:
    a broker may describe the deleted topic, or none, for a moment after the new one was
    created."""
    deadline = time.monotonic() + within
    while True:
        try:
            new_id = admin.topic_id(topic)
        except KafkaTopicError:
            new_id = None
        if new_id is not None and new_id != old_id:
            return new_id
        if time.monotonic() > deadline:
            raise RepairError(f"{topic} kept its topic id {old_id}: it was not re-created"
                              if new_id is not None else f"{topic} was not re-created")
        time.sleep(pause)


def rewrite(settings: KafkaSettings, admin: Admin, service_id: str, topic: str,
            shape: TopicShape, records: Sequence[StoredRecord], backup: Path,
            progress: Progress | None = None) -> str:
    """Re-create the topic and write ``records`` at their offsets; the new topic id."""
    try:
        new_id = recreate(admin, topic, shape)
        note(progress, f"re-created {topic} (topic id {new_id})")
        placer = _Placer(settings, admin, topic, service_id)
        try:
            placer.place(records, progress)
        finally:
            placer.close()
    except MetastoreError as error:
        raise RewriteError(
            f"writing {topic} failed: {error}. The topic is incomplete: restore it with "
            f"`metastore log restore --backup {backup} --service-id {service_id} --yes`") from error
    note(progress, f"wrote {len(records)} records in {placer.transactions} transactions")
    return new_id


def verify(settings: KafkaSettings, service_id: str, topic: str,
            expected: Sequence[StoredRecord]) -> list[StoredRecord]:
    found = read_records(settings, topic, f"{service_id}-log-repair-{time.time_ns()}")
    if [r.identity for r in found] != [r.identity for r in expected]:
        offsets = [r.offset for r in found]
        raise RewriteError(f"{topic} holds {len(found)} records at offsets {_span(offsets)} after "
                           f"writing {len(expected)} at {_span([r.offset for r in expected])}; "
                           "they differ")
    return found
