"""The replica: replays the command log read_committed into the image, in order, forever.

One thread owns the consumer. It applies each polled batch through one delta (so a batch copies
each map once), publishes the new image, and advances ``position``: every offset below it has been
applied, transaction markers included. Writers and readers wait on ``position``.

A record that cannot be decoded, or that has a newer version than this node understands, puts the
replica into DEGRADED with the offset and the reason; it applies nothing after it, keeps serving
the image it has, and never skips the record.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from metastore.catalog.image import EMPTY_IMAGE, Image
from metastore.kafka.consumer import PartitionReader, Record
from metastore.kafka.exceptions import KafkaClientError
from metastore.kafka.settings import KafkaSettings
from metastore.log.record import IncompatibleRecordError
from metastore.log.replay import replay_encoded

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


class LogReplica:
    def __init__(self, settings: KafkaSettings, topic: str, group_id: str,
                 start_image: Image = EMPTY_IMAGE, poll_timeout: float = 0.1,
                 progress: Callable[[str], None] | None = None, fetch_wait_ms: int = 10) -> None:
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
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_error: str | None = None
        self.records_applied = 0
        self._max_batch, self._pause = 5000, 0.0
        self.command_offsets: dict[str, int] = {}
        """The offset of the last record of each command id (for /status); observation only."""
        self.origin_nodes: dict[str, int] = {}
        """Every node id seen writing to the log, with the offset of its last record."""

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

    def slow_down(self, batch: int, pause: float) -> None:
        """Fault injection for tests: replay at most ``batch`` records per ``pause`` seconds."""
        self._max_batch, self._pause = batch, pause

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

    def _run(self) -> None:
        reader = PartitionReader(self._settings, self._topic, start_offset=self._position,
                                 group_id=self._group_id, fetch_wait_ms=self._fetch_wait_ms)
        try:
            self._catch_up_target = self._end_offset(reader)
            self._set_state(NodeState.CATCHING_UP if self._position < self._catch_up_target
                            else NodeState.READY)
            if self._state is NodeState.READY:
                self._notify_listeners()
            if self._state is NodeState.CATCHING_UP and self._progress:
                self._progress(f"catching up: {self._catch_up_target - self._position} offsets "
                               "to replay")
            last_report = time.monotonic()
            while not self._stop.is_set():
                if self._degradation is not None:
                    self._stop.wait(0.5)
                    continue
                try:
                    records = reader.poll(self._poll_timeout, max_records=self._max_batch)
                    if self._pause:
                        self._stop.wait(self._pause)
                except KafkaClientError as error:
                    self._last_error = str(error)
                    log.warning("reading the command log failed: %s", error)
                    self._stop.wait(0.5)
                    continue
                self._apply(records, reader.position)
                if self._state is NodeState.CATCHING_UP:
                    target = self._catch_up_target or 0
                    if self._position >= target:
                        # The image built by catch-up lives long: keep the cyclic collector
                        # from rescanning it on every later collection.
                        gc.freeze()
                        self._set_state(NodeState.READY)
                        self._notify_listeners()
                        if self._progress:
                            self._progress(f"caught up at offset {self._position}")
                    elif self._progress and time.monotonic() - last_report > 2:
                        last_report = time.monotonic()
                        self._progress(f"catching up: at {self._position} of {target}")
        finally:
            reader.close()

    def _end_offset(self, reader: PartitionReader) -> int:
        while not self._stop.is_set():
            try:
                return reader.end_offset()
            except KafkaClientError as error:
                self._last_error = str(error)
                self._stop.wait(0.5)
        return 0

    def _apply(self, records: list[Record], position: int) -> None:
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
        applied = len(result.applied)
        if applied:
            self._image = result.image
            self.records_applied += applied
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
            self._changed.notify_all()
