"""Faults injected into a node, as a value passed to the parts it concerns.

A node built with :data:`NO_FAULTS` (the default) behaves as in production; tests and the hidden
``--fault-injection`` option of ``metastore server`` build one with a hook set, and the writer,
the checkpoint store and the replica call the hook at the one point it names. Nothing else in
those parts knows about testing.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class Flushable(Protocol):
    """What a fault may do with the open transaction's producer: deliver what it produced."""

    def flush(self) -> None: ...


BeforeCommit = Callable[[Flushable], None]
"""Runs after a transaction's records were produced, before it commits."""

DuringCheckpointWrite = Callable[[Path], None]
"""Runs with a checkpoint's temporary file half written."""


@dataclass(frozen=True)
class ReplayPace:
    """Replay at most ``batch`` records per ``pause`` seconds (a node that catches up slowly)."""

    batch: int
    pause: float


BeforeProjection = Callable[[], None]
"""Runs before the Spark catalog projection takes an image."""

BeforeDeletingUnusedTopics = Callable[[Collection[str]], None]
"""Runs with the topics a failed request created, found unused, before the writer deletes them."""


@dataclass(frozen=True)
class Faults:
    before_commit: BeforeCommit | None = None
    during_checkpoint_write: DuringCheckpointWrite | None = None
    replay_pace: ReplayPace | None = None
    before_projection: BeforeProjection | None = None
    before_deleting_unused_topics: BeforeDeletingUnusedTopics | None = None

    @staticmethod
    def named(spec: str | None) -> Faults:
        """The faults ``metastore server --fault-injection SPEC`` names: ``die-before-commit``,
        ``stall-before-commit:<marker file>``, ``die-during-checkpoint``, ``slow-replay`` or
        ``slow-projection:<seconds>``."""
        if not spec:
            return NO_FAULTS
        if spec == "die-before-commit":
            return Faults(before_commit=die_between_produce_and_commit)
        if spec.startswith("stall-before-commit:"):
            return Faults(before_commit=stall_before_commit(Path(spec.split(":", 1)[1])))
        if spec == "die-during-checkpoint":
            return Faults(during_checkpoint_write=die_during_checkpoint)
        if spec == "slow-replay":
            return Faults(replay_pace=ReplayPace(batch=10, pause=0.1))
        if spec.startswith("slow-projection:"):
            seconds = float(spec.split(":", 1)[1])
            return Faults(before_projection=lambda: time.sleep(seconds))
        raise ValueError(f"unknown fault {spec!r}")


NO_FAULTS = Faults()


def die_between_produce_and_commit(producer: Flushable) -> None:
    """The records reach the log, the commit never happens."""
    producer.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def stall_before_commit(marker: Path, seconds: float = 4.0) -> BeforeCommit:
    """Once, with the transaction open and its records delivered, touch ``marker`` and stall."""
    fired: list[bool] = []

    def stall(producer: Flushable) -> None:
        if fired:
            return
        fired.append(True)
        producer.flush()
        marker.touch()
        time.sleep(seconds)

    return stall


def die_during_checkpoint(partial: Path) -> None:
    """SIGKILL this process with a checkpoint half written."""
    logging.getLogger("metastore").error("fault injection: dying while writing %s", partial)
    os.kill(os.getpid(), signal.SIGKILL)
