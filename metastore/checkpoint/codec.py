"""The checkpoint payload: a replica's state at one offset, encoded and decoded losslessly.

The state is the image (sources, types, queries, the request window in its eviction order, the
offset) plus what the replica observes beside it (the last offset of every command id and of
every origin node). The encoding is plain JSON, compressed: a checkpoint may come from another
node through Kafka, so nothing in it can make the decoder run code.

Layout (inside zlib): a 4-byte length, a JSON document with everything but the sources, then the
sources as one JSON row each, back to back (the document lists their names and where each row
ends). Column lists are stored once per distinct schema. Decoding reads the document and leaves
each source encoded until it is first used (:class:`metastore.catalog.lazy.LazyDict`), so the
time to restore grows with the number of names, not with everything the catalog holds.

The payload's format version (:func:`format_version`, written in the checkpoint's header) is 1
unless a query is paused: then 2, which a node that does not know PAUSE refuses rather than
restoring the query as running; or unless a query keeps its plan: then 3, which a node that does
not know plans refuses rather than run the query without it. Without either the payload is
exactly format 1's.
"""

from __future__ import annotations

import json
import struct
import zlib
from types import MappingProxyType
from typing import Any

from metastore.catalog import commands as cmd
from metastore.catalog.image import Image
from metastore.catalog.lazy import LazyDict
from metastore.catalog.model import Column, DataSource, PersistentQuery, RequestOutcome, WindowInfo
from metastore.checkpoint.exceptions import CheckpointError
from metastore.core import json_records
from metastore.log.state import ReplicaState
from metastore.sql.parser import parse_type
from metastore.sql.statements import SourceKind

__all__ = ["FORMAT_VERSIONS", "ReplicaState", "decode", "encode", "format_version"]
"""``ReplicaState`` belongs to :mod:`metastore.log.state`; re-exported for the importers that
still name it from here."""

_LENGTH = struct.Struct(">I")
FORMAT_VERSIONS = frozenset({1, 2, 3})
"""The payload formats this node reads: 1, 2 (1 with queries' paused flags) and 3 (2 with
queries' plans)."""


def format_version(state: ReplicaState) -> int:
    """The oldest format that holds ``state``: 3 when a query keeps its plan, 2 when one is
    paused, else 1."""
    queries = state.image.queries.values()
    if any(q.plan for q in queries):
        return 3
    return 2 if any(q.paused for q in queries) else 1


def encode(state: ReplicaState) -> bytes:
    image = state.image
    schemas: dict[str, int] = {}
    rows: list[bytes] = []
    ends: list[int] = []
    end = 0
    for source in image.sources.values():
        columns = json.dumps([cmd.column_json(c) for c in source.columns], separators=(",", ":"))
        schema = schemas.setdefault(columns, len(schemas))
        window = None if source.window is None else [source.window.kind, source.window.size_ms]
        row = json.dumps([source.kind.value, schema, source.topic, source.key_format,
                          source.value_format, source.partitions, source.statement,
                          source.is_source, window, source.timestamp_column,
                          [list(p) for p in source.properties], source.query_id],
                         separators=(",", ":")).encode()
        rows.append(row)
        end += len(row)
        ends.append(end)
    document = {
        "offset": image.offset,
        "schemas": list(schemas),
        "sourceNames": list(image.sources),
        "sourceEnds": ends,
        "types": [[name, sql_type.sql()] for name, sql_type in image.types.items()],
        "queries": [[q.query_id, q.kind, q.sink, list(q.sources), q.sql, q.offset]
                    + ([dict(q.config)] if q.config or q.paused or q.plan else [])
                    + ([q.paused] if q.paused or q.plan else [])
                    + ([q.plan] if q.plan else [])
                    for q in image.queries.values()],
        "requests": [[request_id, list(o.offsets), list(o.command_ids), o.digest]
                     for request_id, o in image.requests.items()],
        "commandOffsets": dict(state.command_offsets),
        "originNodes": dict(state.origin_nodes),
    }
    head = json.dumps(document, separators=(",", ":")).encode()
    return zlib.compress(_LENGTH.pack(len(head)) + head + b"".join(rows), 1)


def decode(payload: bytes, lazy: bool = True) -> ReplicaState:
    """The state in ``payload``. ``lazy``: leave sources encoded until first used (for a
    checkpoint this node's own checksum vouches for); otherwise decode every one now."""
    try:
        data = zlib.decompress(payload)
        (length,) = _LENGTH.unpack_from(data)
        document = json_records.loads(data[_LENGTH.size:_LENGTH.size + length])
        base = _LENGTH.size + length
        schemas = [_columns(json.loads(text)) for text in document["schemas"]]
        names: list[str] = document["sourceNames"]
        ends: list[int] = document["sourceEnds"]
        if len(names) != len(ends) or (ends and base + ends[-1] != len(data)):
            raise ValueError("the source rows do not match their index")

        def source(index: int) -> DataSource:
            start = ends[index - 1] if index else 0
            (kind, schema, topic, key_format, value_format, partitions, statement, is_source,
             window, timestamp_column, properties, query_id) = json_records.loads(
                data[base + start:base + ends[index]])
            return DataSource(
                names[index], SourceKind(kind), schemas[schema], topic, key_format, value_format,
                partitions, statement, is_source,
                None if window is None else WindowInfo(window[0], window[1]),
                timestamp_column, tuple((str(k), str(v)) for k, v in properties), query_id)

        sources = LazyDict(dict(zip(names, range(len(names)), strict=True)), source)
        types = {name: parse_type(text) for name, text in document["types"]}
        queries = {q[0]: PersistentQuery(q[0], q[1], q[2], tuple(q[3]), q[4], q[5],
                                         cmd.config_from_json(q[6] if len(q) > 6 else None),
                                         bool(q[7]) if len(q) > 7 else False,
                                         str(q[8]) if len(q) > 8 else "")
                   for q in document["queries"]}
        requests = {r[0]: RequestOutcome(tuple(r[1]), tuple(r[2]), str(r[3]) if len(r) > 3 else "")
                    for r in document["requests"]}
        image = Image(sources=sources, types=MappingProxyType(types),
                      queries=MappingProxyType(queries), requests=MappingProxyType(requests),
                      offset=int(document["offset"]))
        if not lazy:
            sources.decode_all()
        return ReplicaState(image, _offsets(document["commandOffsets"]),
                            _offsets(document["originNodes"]))
    except Exception as error:  # bad zlib, JSON or shape; or a stored type that does not parse
        raise CheckpointError("corrupt", f"the checkpoint payload does not decode: {error}") from error


def _columns(items: list[dict[str, Any]]) -> tuple[Column, ...]:
    return tuple(cmd.column_from_json(item) for item in items)


def _offsets(data: dict[str, Any]) -> dict[str, int]:
    return {str(key): int(value) for key, value in data.items()}
