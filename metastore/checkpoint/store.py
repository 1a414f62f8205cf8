"""Checkpoint files in a node's data directory: the file format, atomic writes, the newest valid one.

A checkpoint file is ``MAGIC``, a 4-byte header length, the JSON header, the payload
(:mod:`metastore.checkpoint.codec`) and a SHA-256 over everything before it. The header names
what the checkpoint belongs to (service, command topic, the topic's id: its incarnation), the
offset of the last record applied, a digest of that record, the writing node and the format
version. A file is written to a temporary name, fsynced, renamed into place, and the directory
fsynced: a crash leaves either the previous checkpoint or the new one, never half of one.
Loading walks the files newest first and returns the first that is whole, of a format this node
reads, and of the expected topic incarnation; every file passed over is reported with its reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import struct
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from metastore.checkpoint.codec import FORMAT_VERSIONS, decode
from metastore.checkpoint.exceptions import CheckpointError
from metastore.core.faults import NO_FAULTS, Faults
from metastore.log.state import Incarnation, ReplicaState, record_digest

__all__ = ["FORMAT_VERSION", "MAGIC", "Checkpoint", "CheckpointHeader", "CheckpointStore",
           "Incarnation", "parse", "record_digest"]
"""``Incarnation`` and ``record_digest`` belong to :mod:`metastore.log.state`; they are
re-exported for the importers that still name them from here."""

log = logging.getLogger(__name__)

MAGIC = b"MSCKPT\r\n"
FORMAT_VERSION = max(FORMAT_VERSIONS)
"""The newest format this node reads; it writes each checkpoint in the oldest format that holds
it (:func:`metastore.checkpoint.codec.format_version`)."""
_LENGTH = struct.Struct(">I")
_DIGEST_BYTES = 32
_NAME = re.compile(r"^checkpoint-(\d{20})\.ckpt$")


@dataclass(frozen=True)
class CheckpointHeader:
    format: int
    service_id: str
    topic: str
    topic_id: str
    offset: int
    """The offset of the last record applied; the log must still hold that record."""
    record_digest: str
    node_id: str
    """The node that wrote it (provenance, for a snapshot shared through Kafka)."""

    @property
    def incarnation(self) -> Incarnation:
        return Incarnation(self.service_id, self.topic, self.topic_id)


@dataclass(frozen=True)
class Checkpoint:
    header: CheckpointHeader
    payload: bytes

    def state(self, lazy: bool = True) -> ReplicaState:
        return decode(self.payload, lazy)

    def to_bytes(self) -> bytes:
        header = json.dumps(asdict(self.header), sort_keys=True).encode()
        body = MAGIC + _LENGTH.pack(len(header)) + header + self.payload
        return body + hashlib.sha256(body).digest()


def parse(data: bytes, expected: Incarnation | None = None) -> Checkpoint:
    """The checkpoint in ``data``, checked whole and, with ``expected``, of that incarnation."""
    if not data.startswith(MAGIC):
        raise CheckpointError("corrupt", "not a metastore checkpoint (bad magic)")
    if len(data) < len(MAGIC) + _LENGTH.size + _DIGEST_BYTES:
        raise CheckpointError("torn", f"the checkpoint is truncated ({len(data)} bytes)")
    body, digest = data[:-_DIGEST_BYTES], data[-_DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise CheckpointError("torn", "the checkpoint's checksum does not match: it is torn or "
                                      "corrupt")
    (length,) = _LENGTH.unpack_from(body, len(MAGIC))
    start = len(MAGIC) + _LENGTH.size
    try:
        fields = json.loads(body[start:start + length])
        version = int(fields["format"])
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointError("corrupt", f"the checkpoint header does not decode: {error}") from error
    if version > FORMAT_VERSION:
        raise CheckpointError("newer-format", f"checkpoint format {version} is newer than this "
                                              f"node reads ({FORMAT_VERSION})")
    if version not in FORMAT_VERSIONS:
        raise CheckpointError("corrupt", f"checkpoint format {version} is not one this node "
                                         f"reads ({', '.join(map(str, sorted(FORMAT_VERSIONS)))})")
    try:
        header = CheckpointHeader(**fields)
    except TypeError as error:
        raise CheckpointError("corrupt", f"the checkpoint header is malformed: {error}") from error
    if expected is not None and header.incarnation != expected:
        raise CheckpointError("foreign", f"the checkpoint belongs to {header.incarnation}, "
                                         f"not to {expected}")
    return Checkpoint(header, body[start + length:])


class CheckpointStore:
    """The checkpoint files of one node; keeps the newest ``keep``."""

    def __init__(self, directory: Path, keep: int = 2, faults: Faults = NO_FAULTS) -> None:
        self.directory = directory
        self.keep = keep
        self._during_write = faults.during_checkpoint_write

    def paths(self) -> list[Path]:
        """Checkpoint files, newest (highest offset) first."""
        if not self.directory.is_dir():
            return []
        found = [p for p in self.directory.iterdir() if _NAME.match(p.name)]
        return sorted(found, key=lambda p: p.name, reverse=True)

    def write(self, checkpoint: Checkpoint) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / f"checkpoint-{checkpoint.header.offset:020d}.ckpt"
        partial = self.directory / f".{final.name}.{os.getpid()}.tmp"
        data = checkpoint.to_bytes()
        with partial.open("wb") as file:
            if self._during_write is not None:
                file.write(data[:len(data) // 2])
                file.flush()
                self._during_write(partial)
                file.write(data[len(data) // 2:])
            else:
                file.write(data)
            file.flush()
            os.fsync(file.fileno())
        partial.replace(final)
        _fsync_directory(self.directory)
        self._prune(checkpoint.header.offset)
        return final

    def load_newest(self, expected: Incarnation,
                    warn: Callable[[str], None] | None = None) -> Checkpoint | None:
        """The newest usable checkpoint of ``expected``; every one passed over is warned about."""
        for path in self.paths():
            try:
                return parse(path.read_bytes(), expected)
            except (OSError, CheckpointError) as error:
                reason = error.reason if isinstance(error, CheckpointError) else "unreadable"
                message = f"ignoring checkpoint {path.name} ({reason}): {error}"
                log.warning(message)
                if warn is not None:
                    warn(message)
        return None

    def _prune(self, written: int) -> None:
        """Keep the newest ``keep`` up to ``written``; any of a higher offset belongs to a log
        that is no more (a re-created or truncated topic): it would only be refused again."""
        paths = self.paths()
        stale = [p for p in paths if _offset(p) > written]
        for old in stale + [p for p in paths if _offset(p) <= written][self.keep:]:
            with contextlib.suppress(OSError):
                old.unlink()
        for leftover in self.directory.glob(".checkpoint-*.tmp"):
            if not leftover.name.endswith(f".{os.getpid()}.tmp"):
                with contextlib.suppress(OSError):
                    leftover.unlink()


def _offset(path: Path) -> int:
    match = _NAME.match(path.name)
    return int(match.group(1)) if match else -1


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
