"""Errors of the command log: its topic's shape, writes that did not happen, and repairs."""

from __future__ import annotations

from collections.abc import Sequence

from metastore.core.exceptions import MetastoreError


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
    """The request may have been written: its transaction was sent to commit, or the writer it
    went to did not answer, and the log could not be read to settle it in time. ``request_id``:
    a retry with it answers which; ``command_ids``: the commands it writes when it was written
    (each one's ``GET /status/<command id>`` shows it once applied), empty when not known."""

    code = "outcome_unknown"

    def __init__(self, reason: str, request_id: str | None,
                 command_ids: Sequence[str] = ()) -> None:
        self.reason = reason
        self.request_id = request_id
        self.command_ids = tuple(command_ids)
        how = (f"retry with the same request id ({request_id})" if request_id
               else "send it again with a request id")
        if self.command_ids:
            how += f", or check GET /status/{self.command_ids[0]}"
        super().__init__(f"{reason} The request may have been written: to learn its outcome, "
                         f"{how}.")

    def with_commands(self, command_ids: Sequence[str]) -> OutcomeUnknownError:
        """The same error, naming the request's commands (when it did not)."""
        if self.command_ids or not command_ids:
            return self
        return OutcomeUnknownError(self.reason, self.request_id, command_ids)


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
