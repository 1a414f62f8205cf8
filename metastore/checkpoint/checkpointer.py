"""When a node checkpoints: at transaction boundaries, every N records or T seconds.

The replica calls :meth:`Checkpointer.on_boundary` in its own thread whenever it has reached the
end of the committed log. When a checkpoint is due, the state is captured there (consistent: the
replica is between batches) and handed to the checkpointer's thread, which encodes it, writes it
atomically to the data directory and, if configured, publishes it to the snapshot topic. The
replica never waits for a disk or for Kafka; a checkpoint still being written makes the next
boundary wait for the one after.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from metastore.checkpoint.codec import ReplicaState, encode, format_version
from metastore.checkpoint.snapshots import SnapshotTopic
from metastore.checkpoint.store import Checkpoint, CheckpointHeader, CheckpointStore, Incarnation
from metastore.log.reader import LogReplica

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckpointPolicy:
    every_records: int = 1000
    """Checkpoint once this many offsets were applied since the last checkpoint..."""
    every_seconds: float = 60.0
    """...or once this much time passed with anything applied since."""


@dataclass
class CheckpointStatus:
    written: int = 0
    last_offset: int | None = None
    last_seconds: float | None = None
    last_bytes: int | None = None
    published: int = 0
    last_error: str | None = None


class Checkpointer:
    def __init__(self, store: CheckpointStore, incarnation: Incarnation, node_id: str,
                 policy: CheckpointPolicy, snapshots: SnapshotTopic | None = None) -> None:
        self.store = store
        self.status = CheckpointStatus()
        self._incarnation = incarnation
        self._node_id = node_id
        self._policy = policy
        self._snapshots = snapshots
        self._last_offset = -1
        """The offset of the newest checkpoint there is: written here, or confirmed by the
        replica as the one it resumed from."""
        self._last_time = time.monotonic()
        self._pending: tuple[ReplicaState, str] | None = None
        self._busy = False
        self._wake = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="checkpointer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, stopped_replica: LogReplica | None = None, timeout: float = 30.0) -> None:
        """Finish the checkpoint being written; with the (stopped) replica, also checkpoint
        what it applied since, so a clean restart replays nothing."""
        with self._wake:
            self._stop = True
            self._wake.notify_all()
        self._thread.join(timeout)
        if stopped_replica is not None:
            self._final(stopped_replica)
        if self._snapshots is not None:
            self._snapshots.close()

    def _final(self, replica: LogReplica) -> None:
        self._note_resume(replica)
        offset = replica.image.offset
        if offset <= self._last_offset:
            return
        captured = replica.capture()
        if captured is not None:
            self._last_offset = offset
            try:
                self._write(*captured)
            except Exception:  # the node stops anyway; the next start replays a longer tail
                log.exception("writing the final checkpoint failed")

    def _note_resume(self, replica: LogReplica) -> None:
        report = replica.start_report
        if self._last_offset < 0 and report is not None and report.resumed_offset is not None:
            self._last_offset = report.resumed_offset

    def on_boundary(self, replica: LogReplica) -> None:
        self._note_resume(replica)
        offset = replica.image.offset
        if offset <= self._last_offset or self._busy:
            return
        if (offset - self._last_offset < self._policy.every_records
                and time.monotonic() - self._last_time < self._policy.every_seconds):
            return
        captured = replica.capture()
        if captured is None:
            return
        with self._wake:
            self._pending = captured
            self._busy = True
            self._last_offset = offset
            self._last_time = time.monotonic()
            self._wake.notify_all()

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._pending is None and not self._stop:
                    self._wake.wait()
                if self._pending is None:
                    return
                state, digest = self._pending
                self._pending = None
            try:
                self._write(state, digest)
            except Exception as error:  # reported; the next boundary tries again
                log.exception("writing a checkpoint failed")
                self.status.last_error = str(error)
            finally:
                self._busy = False

    def _write(self, state: ReplicaState, digest: str) -> None:
        started = time.perf_counter()
        incarnation = self._incarnation
        header = CheckpointHeader(format_version(state), incarnation.service_id,
                                  incarnation.topic, incarnation.topic_id, state.image.offset,
                                  digest, self._node_id)
        checkpoint = Checkpoint(header, encode(state))
        path = self.store.write(checkpoint)
        self.status.written += 1
        self.status.last_offset = header.offset
        self.status.last_seconds = round(time.perf_counter() - started, 3)
        self.status.last_bytes = path.stat().st_size
        self.status.last_error = None
        log.info("checkpoint at offset %d written in %.3fs (%d bytes)", header.offset,
                 self.status.last_seconds, self.status.last_bytes)
        if self._snapshots is not None and self._snapshots.publish(checkpoint):
            self.status.published += 1
