"""Apply a run of encoded command records to an image: the one loop every replay uses.

The node's replica, ``metastore log verify`` and the benchmarks all replay through
:func:`replay_encoded`, so they cannot disagree. Python's cyclic garbage collector is paused while
a run is applied (records make no cycles, and the collector would otherwise rescan the growing
image again and again); it resumes when the run is done.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from metastore.catalog.image import Delta, Image
from metastore.log.record import CommandRecord, RecordError, decode


@dataclass(frozen=True)
class ReplayResult:
    image: Image
    applied: list[tuple[int, CommandRecord]]
    error: RecordError | None


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def replay_encoded(base: Image, records: Iterable[tuple[int, bytes | None]]) -> ReplayResult:
    """Apply ``(offset, value)`` pairs in order; stop at the first record that cannot be decoded."""
    delta = Delta(base)
    applied: list[tuple[int, CommandRecord]] = []
    error: RecordError | None = None
    with collector_paused():
        for offset, value in records:
            try:
                record = decode(value, offset)
            except RecordError as bad:
                error = bad
                break
            delta.replay(record, offset)
            applied.append((offset, record))
    return ReplayResult(delta.apply() if applied else base, applied, error)
