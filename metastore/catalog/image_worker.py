"""One background worker that keeps the image's consumers up to date.

The replica publishes every image it applies (:meth:`ImageWorker.offer`); the worker's single
thread hands each :class:`ImageConsumer` (the Spark catalog projection, the persistent-query
runner) the newest image once the replica is caught up, with what changed since the image that
consumer last took (:class:`ImageChange`), so no consumer compares images itself. A consumer that
fails to open or to take an image is retried after ``retry_seconds`` while the others go on; a
failure never reaches the log. Between images each consumer's :meth:`~ImageConsumer.tick` runs
every ``interval`` seconds (a query's health, its lag).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from metastore.catalog.image import Image

log = logging.getLogger(__name__)

V = TypeVar("V")


@dataclass(frozen=True)
class ImageChange:
    """The names whose definition differs between ``previous`` (None: nothing seen yet) and
    ``image``: added, replaced or removed."""

    image: Image
    previous: Image | None
    sources: frozenset[str]
    queries: frozenset[str]
    types: frozenset[str]

    @property
    def empty(self) -> bool:
        return self.previous is not None and not (self.sources or self.queries or self.types)


def change_between(previous: Image | None, image: Image) -> ImageChange:
    """What changed from ``previous`` to ``image`` (images share the objects they did not change,
    so a name whose object is the same object is unchanged)."""
    if previous is None:
        return ImageChange(image, None, frozenset(image.sources), frozenset(image.queries),
                           frozenset(image.types))
    return ImageChange(image, previous, _changed(previous.sources, image.sources),
                       _changed(previous.queries, image.queries),
                       _changed(previous.types, image.types))


def _changed(before: Mapping[str, V], after: Mapping[str, V]) -> frozenset[str]:
    if before is after:
        return frozenset()
    removed = before.keys() - after.keys()
    return frozenset(removed) | frozenset(
        name for name in after if name not in before or before[name] is not after[name])


class ImageConsumer(Protocol):
    """Something kept up to date with the image, on the worker's thread."""

    name: str

    def open(self) -> None:
        """Get ready (start Spark, ...); an exception is logged and retried."""

    def consume(self, change: ImageChange) -> None:
        """Take ``change.image``; an exception is logged and the image offered again later."""

    def tick(self) -> None:
        """Periodic work between images."""


@dataclass
class _Slot:
    consumer: ImageConsumer
    opened: bool = False
    seen: Image | None = None
    retry_at: float = 0.0


class ImageWorker:
    def __init__(self, consumers: Sequence[ImageConsumer], retry_seconds: float = 5.0,
                 interval: float = 1.0) -> None:
        self._slots = [_Slot(consumer) for consumer in consumers]
        self._retry = retry_seconds
        self._interval = interval
        self._latest: Image | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="image-worker", daemon=True)

    def offer(self, image: Image, ready: bool) -> None:
        """Replica listener: remember the newest image once the replica is caught up."""
        if ready:
            self._latest = image
            self._wake.set()

    def wake(self) -> None:
        """Run a pass now (a consumer has work that is not a new image)."""
        self._wake.set()

    def start(self) -> None:
        if self._slots:
            self._thread.start()

    def stop(self, timeout: float = 120.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _run(self) -> None:
        while not self._stop.is_set():
            for slot in self._slots:
                if self._stop.is_set():
                    return
                self._serve(slot)
            self._wake.wait(self._interval)
            self._wake.clear()

    def _serve(self, slot: _Slot) -> None:
        consumer = slot.consumer
        if time.monotonic() < slot.retry_at:
            return
        try:
            if not slot.opened:
                consumer.open()
                slot.opened = True
            latest = self._latest
            if latest is not None and slot.seen is not latest:
                consumer.consume(change_between(slot.seen, latest))
                slot.seen = latest
            consumer.tick()
        except Exception:  # a consumer's failure is retried; it never reaches the log
            log.exception("%s failed; retrying in %.0fs", consumer.name, self._retry)
            slot.retry_at = time.monotonic() + self._retry
