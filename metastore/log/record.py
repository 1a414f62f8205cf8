"""The command record: key ``<kind>/<NAME>/<action>``, value versioned JSON.

The value carries the statement text, the resolved command, the request id, the origin node and
the submitter. A value with a newer ``version`` is :class:`IncompatibleRecordError`; one that
cannot be decoded is :class:`CorruptRecordError`. Neither is ever skipped silently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from metastore.catalog import commands as cmd
from metastore.core import json_records
from metastore.core.exceptions import MetastoreError

RECORD_VERSION = 2
"""The newest record version this node reads: 2, a query's command with its plan."""


def oldest_version(command: cmd.Command) -> int:
    """The oldest record version that holds ``command``: 2 for a query's command with its plan
    (a node of a release before plans refuses it, rather than run the query without), else 1."""
    if isinstance(command, cmd.CreateAsSelectCommand | cmd.InsertQueryCommand) and command.plan:
        return 2
    return 1


class RecordError(MetastoreError):
    code = "record_error"

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset


class IncompatibleRecordError(RecordError):
    code = "incompatible_record"


class CorruptRecordError(RecordError):
    code = "corrupt_record"


class UnappliableRecordError(CorruptRecordError):
    """A record that decodes but cannot be applied (never one that validation accepted)."""

    code = "unappliable_record"


@dataclass(frozen=True)
class CommandRecord:
    command: cmd.Command
    statement: str
    request_id: str
    origin_node: str = ""
    submitter: str = ""
    request_digest: str = ""
    """SHA-256 of the request's statements: a request id names one request, never another."""
    version: int = 1
    """The version it was read as; it is written as the oldest that holds it, or this one."""

    @property
    def command_id(self) -> str:
        return self.command.command_id

    def to_json(self) -> dict[str, Any]:
        return {"version": max(self.version, oldest_version(self.command)),
                "commandId": self.command_id,
                "statement": self.statement, "command": cmd.to_json(self.command),
                "requestId": self.request_id, "originNode": self.origin_node,
                "submitter": self.submitter,
                **({"requestDigest": self.request_digest} if self.request_digest else {})}

    def encode(self) -> tuple[bytes, bytes]:
        value = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return self.command_id.encode(), value.encode()


def decode(value: bytes | None, offset: int | None = None) -> CommandRecord:
    if value is None:
        raise CorruptRecordError("a command record has no value", offset)
    try:
        data = json_records.loads(value)
    except RecursionError as error:
        raise CorruptRecordError("undecodable command record: nested too deeply", offset) from error
    except (UnicodeDecodeError, ValueError) as error:
        raise CorruptRecordError(f"undecodable command record: {error}", offset) from error
    if not isinstance(data, dict):
        raise CorruptRecordError("a command record is not a JSON object", offset)
    version = data.get("version")
    if not isinstance(version, int):
        raise CorruptRecordError("a command record has no integer version", offset)
    if version > RECORD_VERSION:
        raise IncompatibleRecordError(
            f"command record version {version} is newer than this node understands "
            f"({RECORD_VERSION}); upgrade the node", offset)
    try:
        command = cmd.from_json(data["command"])
        return CommandRecord(command=command, statement=str(data.get("statement", "")),
                             request_id=str(data.get("requestId", "")),
                             origin_node=str(data.get("originNode", "")),
                             request_digest=str(data.get("requestDigest", "")),
                             submitter=str(data.get("submitter", "")), version=version)
    except (KeyError, TypeError, ValueError, MetastoreError, cmd.CommandDecodeError) as error:
        raise CorruptRecordError(f"undecodable command record: {error}", offset) from error
    except RecursionError as error:
        raise CorruptRecordError("undecodable command record: nested too deeply",
                                 offset) from error
