"""Group commit: the requests that queue on a node while it writes are written together.

A request joins the node's :class:`WriteQueue`. When no request leads, it leads: it takes the
queued requests, oldest first, up to ``max_batch``, hands them to the writer as one batch
(validated in order on one snapshot and written in one transaction), and the writer answers each
on its own. The other requests wait for their answer or for the lead to be free, whichever comes
first. A request still queued at its deadline leaves the queue, not written; one inside a batch
at its deadline waits for the batch's answer (whose Kafka calls the batch's earliest deadline
bounds) at most :data:`ANSWER_GRACE` seconds longer, then is told its outcome is unknown. Two
requests with the same request id never share a batch (the second is a retry of the first: it
finds the first's outcome in the log).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from metastore.log.exceptions import NotWrittenError, OutcomeUnknownError
from metastore.sql.statements import Statement

Entity = dict[str, Any]

BUSY = ("The statement was NOT written to the command log: the node was busy with other writes "
        "until the request's deadline.")
MIN_BUDGET = 0.25
"""Seconds a request must have left to join a batch: the batch's earliest deadline bounds every
Kafka call of its attempt, so a nearly expired request would fail the attempt for all."""
ANSWER_GRACE = 15.0
"""How long past its deadline a request inside a batch waits for the batch's answer."""


@dataclass(eq=False)
class Queued:
    """One request waiting to be written, and its answer once it has one."""

    statements: Sequence[Statement]
    request_id: str
    deadline: float
    """``time.monotonic()`` by which the request is answered."""
    payload: object = None
    """What the writer keeps across the request's attempts."""
    _answer: list[Entity] | None = field(default=None, init=False)
    _error: BaseException | None = field(default=None, init=False)
    _done: threading.Event = field(default_factory=threading.Event, init=False)
    on_finished: Callable[[], None] | None = field(default=None, init=False)
    """Called once answered or failed (the queue wakes its waiting requests)."""

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    def answer(self, entities: list[Entity]) -> None:
        if not self.finished:
            self._answer = entities
            self._finish()

    def fail(self, error: BaseException) -> None:
        if not self.finished:
            self._error = error
            self._finish()

    def _finish(self) -> None:
        self._done.set()
        if self.on_finished is not None:
            self.on_finished()

    def outcome(self, timeout: float | None = None) -> list[Entity]:
        """The answer, or the request's error raised; waits at most ``timeout`` seconds."""
        if not self._done.wait(timeout):
            raise OutcomeUnknownError("The node's writer did not answer in time.",
                                      self.request_id or None)
        if self._error is not None:
            raise self._error
        assert self._answer is not None
        return self._answer


class _Turn(Enum):
    ANSWERED = "answered"
    LEAD = "lead"
    IN_A_BATCH = "in a batch"


WriteBatch = Callable[[list[Queued]], None]
"""Writes a batch and answers (or fails) every request in it."""


@dataclass
class QueueStats:
    batches: int = 0
    batched_requests: int = 0
    largest_batch: int = 0


class WriteQueue:
    """The node's queue of write requests and its write lock.

    ``max_batch``: the most requests written in one transaction (1: no group commit);
    ``linger``: seconds a leader that finds fewer than ``max_batch`` requests waits for more
    (0: none, so a request alone is written at once)."""

    def __init__(self, max_batch: int = 64, linger: float = 0.0) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be 1 or more")
        self.max_batch = max_batch
        self.linger = linger
        self.lock = threading.Lock()
        """Held while a batch is written (and by whoever must not overlap a write)."""
        self._changed = threading.Condition(threading.RLock())
        """Guards the queue and the lead; notified when a request is answered or a batch ends."""
        self._leading = False
        self._waiting: deque[Queued] = deque()
        self.stats = QueueStats()

    @property
    def waiting(self) -> int:
        """How many requests are queued, not yet taken into a batch."""
        return len(self._waiting)

    def run(self, item: Queued, write_batch: WriteBatch) -> list[Entity]:
        """Queue ``item``, lead batches while it is not answered, and return its answer."""
        item.on_finished = self._wake
        with self._changed:
            self._waiting.append(item)
        while True:
            turn = self._await_turn(item)
            if turn is _Turn.ANSWERED:
                return item.outcome()
            if turn is _Turn.IN_A_BATCH:
                return item.outcome(ANSWER_GRACE)
            try:
                with self.lock:
                    self._lead(write_batch)
            finally:
                with self._changed:
                    self._leading = False
                    self._changed.notify_all()

    def _wake(self) -> None:
        """A request was answered: its thread returns at once, not when the batch ends."""
        with self._changed:  # re-entrant: _take fails requests while it holds it
            self._changed.notify_all()

    def _await_turn(self, item: Queued) -> _Turn:
        """Wait until ``item`` is answered, or may lead, or is in a batch at its deadline; a
        request still queued at its deadline leaves the queue (NotWrittenError)."""
        with self._changed:
            while True:
                if item.finished:
                    return _Turn.ANSWERED
                if not self._leading:
                    self._leading = True
                    return _Turn.LEAD
                left = item.deadline - time.monotonic()
                if left <= 0:
                    if item in self._waiting:
                        self._waiting.remove(item)
                        raise NotWrittenError(BUSY)
                    return _Turn.IN_A_BATCH
                self._changed.wait(left)

    def _lead(self, write_batch: WriteBatch) -> None:
        if self.linger > 0 and len(self._waiting) < self.max_batch:
            time.sleep(self.linger)
        batch = self._take()
        if not batch:
            return
        self.stats.batches += 1
        self.stats.batched_requests += len(batch)
        self.stats.largest_batch = max(self.stats.largest_batch, len(batch))
        try:
            write_batch(batch)
        except Exception as error:  # the writer answers each request; this is a safety net
            for item in batch:
                item.fail(error)
        finally:
            for item in batch:
                item.fail(NotWrittenError("The statement was NOT written to the command log: "
                                          "the batch it was in ended without its answer."))

    def _take(self) -> list[Queued]:
        """The oldest queued requests, up to ``max_batch``: one per request id; a request with
        less than :data:`MIN_BUDGET` left is answered not written."""
        now = time.monotonic()
        batch: list[Queued] = []
        ids: set[str] = set()
        with self._changed:
            kept: deque[Queued] = deque()
            while self._waiting:
                item = self._waiting.popleft()
                if item.deadline - now < MIN_BUDGET:
                    item.fail(NotWrittenError(BUSY))
                elif len(batch) < self.max_batch and not (item.request_id and item.request_id in ids):
                    batch.append(item)
                    ids.add(item.request_id)
                else:
                    kept.append(item)
            self._waiting = kept
        return batch
