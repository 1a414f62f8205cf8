"""The replica: replays the command log read_committed into the image, in order, forever.

One thread owns the consumer. It applies each polled batch through one delta (so a batch copies
each map once), publishes the new image, and advances ``position``: every offset below it has been
applied, transaction markers included. Writers and readers wait on ``position``.

A replica may start from a checkpoint (:class:`Resume`) instead of the empty image: it reads the
log from the checkpoint's offset and goes on from there only if the record at that offset is the
one the checkpoint was taken at. Otherwise (a re-created or truncated topic) it warns and replays
from the start with the empty image: a checkpoint can save time, never change the outcome.

A record that cannot be decoded, or that has a newer version than this node understands, puts the
replica into DEGRADED with the offset and the reason; it applies nothing after it, keeps serving
the image it has, and never skips the record.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from metastore.catalog.image import EMPTY_IMAGE, Image
from metastore.core.faults import NO_FAULTS, Faults
from metastore.kafka.consumer import PartitionReader, Record
from metastore.kafka.exceptions import KafkaClientError
from metastore.kafka.settings import KafkaSettings
from metastore.log.record import IncompatibleRecordError
from metastore.log.replay import CatchUpCollector, replay_encoded
from metastore.log.state import ReplicaState, record_digest

log = logging.getLogger(__name__)


class NodeState(StrEnum):
    STARTING = "STARTING"
    CATCHING_UP = "CATCHING_UP"
    READY = "READY"
    DEGRADED = "DEGRADED"


@dataclass(frozen=True)
class Degradation:
    kind: str  # INCOMPATIBLE or CORRUPTED
    offset: int
    message: str

    def describe(self) -> str:
        return f"{self.kind} at offset {self.offset}: {self.message}"


ImageListener = Callable[[Image, bool], None]
"""Called with each new image and whether the replica is caught up (READY)."""


@dataclass(frozen=True)
class Resume:
    """A replica state to start from, valid only if the log still holds ``record_digest``'s record
    at ``state.image.offset``."""

    state: ReplicaState
    record_digest: str
    origin: str
    """Where the state came from, for logs and status (a checkpoint file, a snapshot)."""

    @property
    def offset(self) -> int:
        return self.state.image.offset


@dataclass(frozen=True)
class StartReport:
    """How the replica started: from a confirmed checkpoint, or by replaying from offset 0."""

    resumed_from: str | None
    resumed_offset: int | None
    rejected: str | None
    """Why an offered checkpoint was not used."""


_NOT_WRITTEN_HERE = b"\0not written here"

BoundaryHook = Callable[["LogReplica"], None]
"""Called in the replica's thread whenever it has applied records and reached the end of the
committed log: a transaction boundary, where :meth:`LogReplica.capture` is consistent."""


class LogReplica:
    def __init__(self, settings: KafkaSettings, topic: str, group_id: str,
                 start_image: Image = EMPTY_IMAGE, poll_timeout: float = 0.1,
                 progress: Callable[[str], None] | None = None, fetch_wait_ms: int = 10,
                 resume: Resume | None = None, faults: Faults = NO_FAULTS) -> None:
        self._resume = resume
        self.start_report: StartReport | None = None
        self.ready_at: float | None = None
        """``time.monotonic()`` when the replica first became READY."""
        self._at_boundary = False
        """Whether the replica's last poll ended at the end of the committed log."""
        self.on_boundary: BoundaryHook | None = None
        self._last_record: Record | None = None
        self._fetch_wait_ms = fetch_wait_ms
        self._settings = settings
        self._topic = topic
        self._group_id = group_id
        self._poll_timeout = poll_timeout
        self._progress = progress
        self._image = start_image
        self._position = start_image.offset + 1
        self._state = NodeState.STARTING
        self._degradation: Degradation | None = None
        self._catch_up_target: int | None = None
        self._listeners: list[ImageListener] = []
        self._changed = threading.Condition()
        self._applying = threading.Lock()
        """Held while records are applied: by the reader's thread, or by the writer's for the
        records it has just committed (:meth:`apply_written`)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_error: str | None = None
        self.records_applied = 0
        pace = faults.replay_pace
        self._max_batch, self._pause = (pace.batch, pace.pause) if pace else (5000, 0.0)
        self.command_offsets: dict[str, int] = {}
        """The offset of the last record of each command id (for /status); observation only."""
        self.origin_nodes: dict[str, int] = {}
        """Every node id seen writing to the log, with the offset of its last record."""
        self._last_writer: str | None = None
        self._written_here: dict[int, bytes | None] = {}
        """The records the writer applied (:meth:`apply_written`) that the reader has not read
        yet, by offset: the reader checks each against the log as it passes it."""

    # -- observation ---------------------------------------------------------------------------
    @property
    def image(self) -> Image:
        return self._image

    @property
    def position(self) -> int:
        return self._position

    @property
    def state(self) -> NodeState:
        return self._state

    @property
    def degradation(self) -> Degradation | None:
        return self._degradation

    @property
    def last_error(self) -> str | None:
        return self._last_error

    @property
    def last_writer(self) -> str | None:
        """The node that wrote the newest record applied (None: none known)."""
        return self._last_writer

    def resume_from(self, resume: Resume | None) -> None:
        """Offer a checkpoint to start from (before ``start``); it is confirmed against the log."""
        assert self._thread is None, "resume_from() must come before start()"
        self._resume = resume

    def capture(self) -> tuple[ReplicaState, str] | None:
        """The replica's state and the digest of its last record, when it is at a transaction
        boundary (call from the boundary hook, or once the replica has stopped)."""
        with self._applying:  # the writer's thread applies its own records too
            last = self._last_record
            if not self._at_boundary or last is None or last.offset != self._image.offset:
                return None
            state = ReplicaState(self._image, dict(self.command_offsets), dict(self.origin_nodes))
        return state, record_digest(last.key, last.value)

    def add_listener(self, listener: ImageListener) -> None:
        self._listeners.append(listener)

    def wait_for_position(self, target: int, timeout: float) -> bool:
        """True once every offset below ``target`` is applied (False on timeout or degradation)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._position < target:
                if self._degradation is not None:
                    return False
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return True

    def wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._state in (NodeState.STARTING, NodeState.CATCHING_UP):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return self._state is NodeState.READY

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"replica-{self._topic}",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _reader(self, start_offset: int) -> PartitionReader:
        return PartitionReader(self._settings, self._topic, start_offset=start_offset,
                               group_id=self._group_id, fetch_wait_ms=self._fetch_wait_ms)

    def _run(self) -> None:
        resume = self._resume
        reader = self._reader(resume.offset if resume is not None else self._position)
        collector = CatchUpCollector()
        try:
            reader = self._begin(reader, resume, collector)
            last_report = time.monotonic()
            while not self._stop.is_set():
                if self._degradation is not None:
                    collector.release()
                    self._stop.wait(0.5)
                    continue
                if self._read_once(reader, collector):
                    last_report = self._track_catch_up(collector, last_report)
        finally:
            collector.release()
            reader.close()

    def _begin(self, reader: PartitionReader, resume: Resume | None,
               collector: CatchUpCollector) -> PartitionReader:
        """The catch-up target, the checkpoint confirmed (or not), the first state; the reader
        to go on with."""
        self._catch_up_target = self._end_offset(reader)
        if resume is not None:
            reader = self._confirm(resume, reader)
        else:
            self.start_report = StartReport(None, None, None)
        self._set_state(NodeState.CATCHING_UP if self._position < self._catch_up_target
                        else NodeState.READY)
        if self._state is NodeState.READY:
            collector.release(freeze=True)
            self._notify_listeners()
        else:
            collector.hold()
        if self._state is NodeState.CATCHING_UP and self._progress:
            self._progress(f"catching up: {self._catch_up_target - self._position} offsets "
                           "to replay")
        return reader

    def _read_once(self, reader: PartitionReader, collector: CatchUpCollector) -> bool:
        """Poll and apply one batch of records; False when the poll failed."""
        try:
            records = reader.poll(self._poll_timeout, max_records=self._max_batch)
            if self._pause:
                self._stop.wait(self._pause)
        except KafkaClientError as error:
            collector.release()
            self._last_error = str(error)
            log.warning("reading the command log failed: %s", error)
            self._stop.wait(0.5)
            return False
        if self._apply(records, reader.position) or reader.at_end:
            self._at_boundary = reader.at_end  # else: the image did not change
        if reader.at_end and self.on_boundary is not None and self._degradation is None:
            try:
                self.on_boundary(self)
            except Exception:  # checkpointing must never stop the log
                log.exception("boundary hook failed")
        return True

    def _track_catch_up(self, collector: CatchUpCollector, last_report: float) -> float:
        """READY once caught up, progress while catching up; when progress was last shown."""
        if self._state is not NodeState.CATCHING_UP:
            return last_report
        target = self._catch_up_target or 0
        if self._position >= target:
            # The image built by catch-up lives long: keep the cyclic collector from scanning
            # it on every later collection.
            collector.release(freeze=True)
            self._set_state(NodeState.READY)
            self._notify_listeners()
            if self._progress:
                self._progress(f"caught up at offset {self._position}")
        elif self._progress and time.monotonic() - last_report > 2:
            last_report = time.monotonic()
            self._progress(f"catching up: at {self._position} of {target}")
        return last_report

    def _confirm(self, resume: Resume, reader: PartitionReader) -> PartitionReader:
        """Start from ``resume`` if the log holds its record; else a reader from offset 0."""
        rejected: str | None = None
        first: Record | None = None
        if (self._catch_up_target or 0) <= resume.offset:
            rejected = (f"the log ends at offset {self._catch_up_target}, before the checkpoint's "
                        f"offset {resume.offset}")
        else:
            first = self._first_record(reader)
            if first is None:
                return reader  # stopping
            if first.offset != resume.offset:
                rejected = (f"the log no longer holds offset {resume.offset} (it starts at "
                            f"{first.offset})")
            elif record_digest(first.key, first.value) != resume.record_digest:
                rejected = f"the log holds a different record at offset {resume.offset}"
        if rejected is None:
            assert first is not None
            self._image = resume.state.image
            self.command_offsets = dict(resume.state.command_offsets)
            self.origin_nodes = dict(resume.state.origin_nodes)
            self._last_writer = max(self.origin_nodes, key=self.origin_nodes.__getitem__,
                                    default=None)
            self._last_record = first
            with self._changed:
                self._position = max(reader.position, resume.offset + 1)
            self.start_report = StartReport(resume.origin, resume.offset, None)
            log.info("resumed from %s at offset %d", resume.origin, resume.offset)
            return reader
        message = f"not using {resume.origin}: {rejected}; replaying the log from the start"
        log.warning(message)
        if self._progress:
            self._progress(message)
        self.start_report = StartReport(None, None, rejected)
        reader.close()
        return self._reader(0)

    def _first_record(self, reader: PartitionReader) -> Record | None:
        """The first committed record the reader returns (records after it are read again)."""
        while not self._stop.is_set():
            try:
                records = reader.poll(self._poll_timeout, max_records=1)
            except KafkaClientError as error:
                self._last_error = str(error)
                self._stop.wait(0.5)
                continue
            if records:
                return records[0]
        return None

    def _end_offset(self, reader: PartitionReader) -> int:
        while not self._stop.is_set():
            try:
                return reader.end_offset()
            except KafkaClientError as error:
                self._last_error = str(error)
                self._stop.wait(0.5)
        return 0

    def apply_written(self, records: Sequence[Record], snapshot: Image) -> bool:
        """Apply the records this node's writer has just committed, at the offsets the log gave
        them, so that its answer need not wait for the reader's next fetch (which then skips
        them). ``snapshot``: the image the writer validated them on. They are applied only while
        that is still the replica's image and the replica stands at or before the first record:
        nothing committed lies between (a commit by another producer of the service's
        transactional id would have fenced the writer's), so what the reader passes there is
        transaction markers and aborted records. False: not applied here; the reader will."""
        if not records:
            return False
        with self._applying:
            if (self._state is not NodeState.READY or self._degradation is not None
                    or self._image is not snapshot or self._position > records[0].offset):
                return False
            self._apply_in_order(list(records), records[-1].offset + 1)
            self._at_boundary = True  # the snapshot was caught up; these are a whole transaction
            self._written_here.update((record.offset, record.value) for record in records)
        return True

    def _apply(self, records: list[Record], position: int) -> bool:
        """Apply what the reader read; whether any record was (those below the position were
        applied by the writer)."""
        with self._applying:
            fresh = [r for r in records if r.offset >= self._position]
            for record in records[:len(records) - len(fresh)]:
                if self._written_here.pop(record.offset, _NOT_WRITTEN_HERE) != record.value:
                    self._diverged(record.offset)
                    return False
            self._apply_in_order(fresh, position)
        return bool(fresh)

    def _diverged(self, offset: int) -> None:
        """The log holds, below what was applied, a record this node's writer did not apply
        there: something else wrote to the command log (no producer of the service's
        transactional id can commit without fencing the writer). The image is no longer the
        log's: the node degrades and refuses writes."""
        self._degradation = Degradation(
            "CORRUPTED", offset, "the log holds a record this node's writer did not commit "
            "there; another producer writes to the command log")
        log.error("command log %s: %s", self._topic, self._degradation.describe())
        with self._changed:
            self._state = NodeState.DEGRADED
            self._changed.notify_all()

    def _apply_in_order(self, records: list[Record], position: int) -> None:
        if not records and position <= self._position:
            return
        result = replay_encoded(self._image, ((r.offset, r.value) for r in records))
        new_position = position
        if result.error is not None:
            offset = result.error.offset if result.error.offset is not None else position
            kind = "INCOMPATIBLE" if isinstance(result.error, IncompatibleRecordError) else "CORRUPTED"
            self._degradation = Degradation(kind, offset, result.error.message)
            log.error("command log %s: %s", self._topic, self._degradation.describe())
            new_position = offset
        for offset, command_record in result.applied:
            self.command_offsets[command_record.command_id] = offset
            if command_record.origin_node:
                self.origin_nodes[command_record.origin_node] = offset
                self._last_writer = command_record.origin_node
        applied = len(result.applied)
        if applied:
            self._image = result.image
            self.records_applied += applied
            self._last_record = records[applied - 1]
        with self._changed:
            self._position = max(self._position, new_position)
            if self._degradation is not None:
                self._state = NodeState.DEGRADED
            self._changed.notify_all()
        if applied and self._state is not NodeState.CATCHING_UP:
            self._notify_listeners()

    def _notify_listeners(self) -> None:
        ready = self._state is NodeState.READY
        for listener in self._listeners:
            try:
                listener(self._image, ready)
            except Exception:  # a listener must never stop the log
                log.exception("image listener failed")

    def _set_state(self, state: NodeState) -> None:
        with self._changed:
            if self._state is not NodeState.DEGRADED:
                self._state = state
                if state is NodeState.READY and self.ready_at is None:
                    self.ready_at = time.monotonic()
            self._changed.notify_all()
