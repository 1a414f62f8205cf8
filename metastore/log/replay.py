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
from metastore.log.record import CommandRecord, RecordError, UnappliableRecordError, decode


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
    """Apply ``(offset, value)`` pairs in order; stop at the first record that cannot be decoded
    or applied, with the image of the records before it."""
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
            try:
                delta.replay(record, offset)
            except Exception as failure:  # validation never writes such a record; old logs may
                error = UnappliableRecordError(
                    f"the command record cannot be applied: {type(failure).__name__}: "
                    f"{str(failure)[:200]}", offset)
                delta = _rebuilt(base, applied)
                break
            applied.append((offset, record))
    return ReplayResult(delta.apply() if applied else base, applied, error)


def _rebuilt(base: Image, applied: list[tuple[int, CommandRecord]]) -> Delta:
    """The records before a failed one, applied again: a failed apply may have changed a part."""
    delta = Delta(base)
    for offset, record in applied:
        delta.replay(record, offset)
    return delta
