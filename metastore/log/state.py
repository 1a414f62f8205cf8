"""A replica's state at one offset of one log, and how a later start confirms it.

What the replica captures (:class:`ReplicaState`), the digest by which it recognises the record
a state was taken at (:func:`record_digest`), and which log that is (:class:`Incarnation`): a
topic deleted and created again under the same name is another log. Checkpoints
(:mod:`metastore.checkpoint`) store and restore these; the log does not depend on them.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from dataclasses import dataclass

from metastore.catalog.image import Image

_LENGTH = struct.Struct(">I")


@dataclass(frozen=True)
class ReplicaState:
    """Everything a replica needs to go on from ``image.offset + 1`` as if it had replayed."""

    image: Image
    command_offsets: Mapping[str, int]
    origin_nodes: Mapping[str, int]


def record_digest(key: bytes | None, value: bytes | None) -> str:
    """SHA-256 of one command record as the log holds it (key and value, length-prefixed)."""
    digest = hashlib.sha256()
    for part in (key, value):
        data = part or b""
        digest.update(_LENGTH.pack(len(data)) + data)
    return digest.hexdigest()


@dataclass(frozen=True)
class Incarnation:
    """Which log a state belongs to: a re-created topic of the same name is another one."""

    service_id: str
    topic: str
    topic_id: str

    def path(self) -> str:
        """``<service id>/<topic id>``, safe as a relative path (topic ids are base64)."""
        safe = self.topic_id.replace("/", "_").replace("+", "-")
        return f"{self.service_id.replace('/', '_')}/{safe}"
