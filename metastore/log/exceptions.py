"""Errors of the command log: its topic's shape, writes that did not happen, and repairs."""

from __future__ import annotations

from metastore.exceptions import MetastoreError


class CommandTopicError(MetastoreError):
    """The command topic is missing and cannot be created, or has the wrong shape."""

    code = "command_topic"

    def __init__(self, topic: str, message: str) -> None:
        super().__init__(message)
        self.topic = topic


class NotWrittenError(MetastoreError):
    """The request's statements were NOT written to the log (and will not be)."""

    code = "not_written"


class OutcomeUnknownError(MetastoreError):
    """The request's deadline passed while its transaction was committing: it may have been
    written. A retry with the same request id answers which."""

    code = "outcome_unknown"


class NotReadyError(MetastoreError):
    """The node is still catching up with the log, or is degraded; it does not accept writes."""

    code = "not_ready"


class CatchUpTimeoutError(MetastoreError):
    """The node did not apply the log up to the requested offset in time."""

    code = "catch_up_timeout"

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class RepairError(MetastoreError):
    """The repair or restore was refused, or could not be completed."""

    code = "repair_refused"


class RewriteError(RepairError):
    """Writing the re-created topic failed: it is incomplete until a restore from the backup."""

    code = "rewrite_failed"
