"""Why a checkpoint or snapshot cannot be used; the node then replays the log from the start."""

from __future__ import annotations

from metastore.core.exceptions import MetastoreError


class CheckpointError(MetastoreError):
    """A checkpoint is unusable. ``reason`` is machine-readable: torn, corrupt, newer-format,
    foreign (another service, topic or topic incarnation) or diverged (the log no longer holds
    the record the checkpoint was taken at)."""

    code = "checkpoint_unusable"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
