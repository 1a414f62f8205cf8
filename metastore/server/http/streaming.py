"""Query answers: push queries over ``POST /query`` and ``POST /query-stream``, pull
queries over both, and ``POST /close-query``, in ksqlDB's wire shapes.

- ``/query`` (ksqlDB's ``QueryStreamWriter``): a JSON array written as it grows, ``[`` then a
  ``header`` object, one ``row`` object per row (``"tombstone": true`` for a table's deleted
  row), each followed by ``,\\n``; a bare ``\\n`` every second without rows, so a client (and
  the node) notice a dead connection; ``{"finalMessage":"Limit Reached"}`` and ``]`` at the
  LIMIT.
- ``/query-stream`` (ksqlDB's ``DelimitedQueryStreamResponseWriter``, or the JSON writer when
  the client accepts ``application/json``): a metadata object (``queryId``, ``columnNames``,
  ``columnTypes``), then each row as a JSON array; tombstones are dropped, as ksqlDB drops them.

A client that accepts ``application/vnd.ksql.v1+protobuf`` gets ``/query``'s shape from either
endpoint, its header with ``protoSchema`` and its rows as ``protobufBytes``
(:mod:`metastore.server.http.protobuf_rows`); one that accepts the delimited type gets
``/query-stream``'s delimited shape from ``/query`` too (:class:`Shape`).

``/query`` also answers PRINT: the topic's records as ksqlDB's text lines (see
:mod:`metastore.kafka.topic_printer`), a blank line after each second without any.

A push query stops when its LIMIT is reached, its client disconnects or ``/close-query`` names
it; in each case its Spark query is stopped and its checkpoint deleted before the response ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from enum import Enum
from typing import Any

import anyio
from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.types import Receive, Scope, Send

from metastore.core.exceptions import MetastoreError
from metastore.kafka.topic_printer import TopicPrinter
from metastore.planner.exceptions import PushQueryLimitError
from metastore.runtime.push import PushQuery, PushRow
from metastore.server.http import error_codes as codes
from metastore.server.http.concurrency import Lane, LaneThreads
from metastore.server.http.http_limits import HttpLimits, decode_json
from metastore.server.http.protobuf_rows import MEDIA_TYPE as PROTOBUF
from metastore.server.http.protobuf_rows import ProtobufRows, wants_protobuf
from metastore.spark.query import QueryResult
from metastore.sql.parser import parse_type

WRITE_TIMEOUT_SECONDS = 60.0
"""How long a streamed answer waits for its client to take a chunk before it ends."""
HEARTBEAT_SECONDS = 1.0
"""How long ``/query`` waits for rows before it writes a bare newline (ksqlDB's
``disconnectCheckInterval``)."""
DELIMITED = "application/vnd.ksqlapi.delimited.v1"
KSQL_V1_JSON = "application/vnd.ksql.v1+json"
JSON_LINES_BREAK = b",\n"

_log = logging.getLogger(__name__)


class QueryStreamRequest(BaseModel):
    """The body of ``POST /query-stream`` (ksqlDB's ``QueryStreamArgs``)."""

    model_config = ConfigDict(extra="ignore")

    sql: str = Field(min_length=1)
    properties: dict[str, Any] = Field(default_factory=dict)
    sessionVariables: dict[str, Any] = Field(default_factory=dict)  # noqa: N815 - ksqlDB's name


class CloseQueryRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    queryId: str = Field(min_length=1, max_length=200)  # noqa: N815 - ksqlDB's name


class ChunkedResponse(Response):
    """A response written as ``chunks`` yields; ``on_end`` runs once it ended in any way (the
    last chunk sent, the client gone or not reading for ``write_timeout`` seconds, the server
    stopping), off the event loop."""

    def __init__(self, chunks: AsyncIterator[bytes], media_type: str,
                 on_end: Callable[[], None], threads: LaneThreads,
                 write_timeout: float = WRITE_TIMEOUT_SECONDS) -> None:
        super().__init__(media_type=media_type)
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self._chunks = chunks
        self._on_end = on_end
        self._threads = threads
        self._write_timeout = write_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._watch_disconnect, receive, group.cancel_scope)
                await send({"type": "http.response.start", "status": self.status_code,
                            "headers": self.raw_headers})
                try:
                    async for chunk in self._chunks:
                        async with asyncio.timeout(self._write_timeout):
                            await send({"type": "http.response.body", "body": chunk,
                                        "more_body": True})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                except OSError:  # the client is gone
                    pass
                except TimeoutError:  # the client stopped reading: its connection is dropped
                    _log.info("a streamed answer's client took no data for %g s; ending it",
                              self._write_timeout)
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._threads.run(Lane.QUERIES, self._on_end)

    @staticmethod
    async def _watch_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                scope.cancel()
                return


async def batches(query: PushQuery, heartbeat: float,
                  threads: LaneThreads) -> AsyncIterator[list[PushRow]]:
    """The query's rows as they arrive; an empty batch after ``heartbeat`` seconds without
    any; ends when the query stopped (closed, or failed: see ``query.failure()``)."""
    loop = asyncio.get_running_loop()
    arrived = asyncio.Event()

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # a closed event loop: nobody waits any more
            loop.call_soon_threadsafe(arrived.set)

    query.listen(wake)
    while True:
        arrived.clear()
        rows = query.take()
        if rows is None:
            return
        if rows:
            yield rows
            continue
        try:
            async with asyncio.timeout(heartbeat):
                await arrived.wait()
        except TimeoutError:
            if await threads.run(Lane.QUERIES, query.failure) is not None:
                return
            yield []


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _error(message: str, code: int = codes.SERVER_ERROR) -> dict[str, Any]:
    return {"@type": "generic_error", "error_code": code, "message": message}


def schema_text(query: PushQuery) -> str:
    return ", ".join(f"`{c.name}` {c.type.sql()}" for c in query.columns)


async def v1_chunks(query: PushQuery, threads: LaneThreads,
                    protobuf: ProtobufRows | None = None) -> AsyncIterator[bytes]:
    """A push query's answer in ``/query``'s shape (ksqlDB's QueryStreamWriter); with
    ``protobuf``, its rows as Protobuf messages (:mod:`~metastore.server.http.protobuf_rows`)."""
    header = {"header": {"queryId": query.query_id, "schema": schema_text(query)}} \
        if protobuf is None else protobuf.header(query.query_id, schema_text(query))
    yield b"[" + _json(header) + JSON_LINES_BREAK
    written = row_json if protobuf is None else _protobuf_row(protobuf)
    left = query.limit
    async for rows in batches(query, HEARTBEAT_SECONDS, threads):
        if not rows:
            yield b"\n"
            continue
        yield b"".join(written(row) + JSON_LINES_BREAK
                       for row in (rows[:left] if left is not None else rows))
        if left is not None:
            left -= min(left, len(rows))
            if left == 0:
                yield _json({"finalMessage": "Limit Reached"}) + b"]\n"
                return
    failure = await threads.run(Lane.QUERIES, query.failure)
    if failure is not None:
        yield b"\n" + _json({"errorMessage": _error(failure)}) + JSON_LINES_BREAK
    yield b"]\n"


def row_json(row: PushRow) -> bytes:
    """A push query's row as ksqlDB's ``StreamedRow`` (``/query``, ``/ws/query``)."""
    return (b'{"row":{"columns":' + row.columns
            + (b',"tombstone":true}}' if row.tombstone else b"}}"))


def _protobuf_row(protobuf: ProtobufRows) -> Callable[[PushRow], bytes]:
    """A push query's row as a Protobuf ``StreamedRow`` (a table's deleted row keeps its JSON
    columns and ``tombstone``, as no message of the schema says it)."""
    def written(row: PushRow) -> bytes:
        if row.tombstone:
            return row_json(row)
        return _json(protobuf.row(json.loads(row.columns)))

    return written


def pull_v1_body(result: QueryResult, protobuf: ProtobufRows | None) -> list[dict[str, Any]]:
    """A pull query's answer in ``/query``'s shape (``protobuf``: its rows as messages)."""
    if protobuf is None:
        return [{"header": {"queryId": result.query_id, "schema": result.schema}},
                *({"row": {"columns": row}} for row in result.rows)]
    return [protobuf.header(result.query_id, result.schema),
            *(protobuf.row(row) for row in result.rows)]


def metadata(query_id: str, names: list[str], types: list[str]) -> dict[str, Any]:
    return {"queryId": query_id, "columnNames": names, "columnTypes": types}


async def stream_chunks(query: PushQuery, delimited: bool,
                        threads: LaneThreads) -> AsyncIterator[bytes]:
    """A push query's answer in ``/query-stream``'s shape: delimited rows, or a JSON array."""
    head = _json(metadata(query.query_id, [c.name for c in query.columns],
                          [c.type.sql() for c in query.columns]))
    separator, ending = (b"\n", b"") if delimited else (b",", b"]")
    yield (head if delimited else b"[" + head) + (b"\n" if delimited else b"")
    left = query.limit
    async for rows in batches(query, HEARTBEAT_SECONDS, threads):
        live = [row for row in rows if not row.tombstone]
        if left is not None:
            live = live[:left]
            left -= len(live)
        if live:
            if delimited:
                yield b"".join(row.columns + separator for row in live)
            else:
                yield b"".join(separator + row.columns for row in live)
        if left == 0:
            break
    else:
        failure = await threads.run(Lane.QUERIES, query.failure)
        if failure is not None:
            error = _json(_error(failure))
            yield error + b"\n" if delimited else separator + error
    yield ending


MAX_PRINTS = 20
"""PRINTs a node runs at once (each holds a Kafka consumer); more are refused with 40003."""


class PrintSlots:
    """At most ``limit`` PRINTs at once on a node (ksqlDB counts them as push queries)."""

    def __init__(self, limit: int) -> None:
        self._slots = threading.BoundedSemaphore(limit)

    def acquire(self) -> None:
        if not self._slots.acquire(blocking=False):
            raise PushQueryLimitError("Maximum number of push queries exceeded")

    def release(self) -> None:
        self._slots.release()


async def print_chunks(printer: TopicPrinter, threads: LaneThreads) -> AsyncIterator[bytes]:
    """A PRINT's answer (ksqlDB's TopicStreamWriter): its lines as records arrive, a blank
    line after each second without any; a failure's message ends it (an unexpected one's is
    an incident id, its details in the log), as the answer has started."""
    while not printer.done:
        try:
            lines = await threads.run(Lane.QUERIES, printer.poll, HEARTBEAT_SECONDS)
        except MetastoreError as error:
            yield (error.message + "\n").encode()
            return
        except Exception:
            incident = uuid.uuid4().hex[:16]
            _log.exception("incident %s: PRINT of %s failed", incident, printer.topic)
            yield (f"Internal error (incident {incident}); the node's log has the "
                   "details\n").encode()
            return
        yield ("\n".join(lines) + "\n").encode() if lines else b"\n"


def pull_stream_body(result: QueryResult, delimited: bool) -> bytes:
    """A pull query's answer in ``/query-stream``'s shape."""
    head = _json(metadata(result.query_id, list(result.names), list(result.types)))
    if delimited:
        return b"".join([head + b"\n", *(_json(row) + b"\n" for row in result.rows)])
    return b"[" + b",".join([head, *(_json(row) for row in result.rows)]) + b"]"


class Shape(Enum):
    """The wire shape of a query's answer, by the media type its client accepts."""

    V1 = KSQL_V1_JSON
    """``/query``'s ``StreamedRow`` array, rows as JSON columns."""
    PROTOBUF = PROTOBUF
    """The ``StreamedRow`` array, rows as Protobuf messages (``/query`` and ``/query-stream``)."""
    DELIMITED = DELIMITED
    """``/query-stream``'s metadata line, then a JSON array per line."""
    JSON = "application/json"
    """``/query-stream``'s metadata and rows as one JSON array."""

    @property
    def media_type(self) -> str:
        return str(self.value)


def shape_of(request: Request, query_endpoint: bool) -> Shape:
    """The shape a request's ``Accept`` header asks of ``/query`` (``query_endpoint``) or
    ``/query-stream``, as ksqlDB's routes pick their writer."""
    accept = request.headers.get("accept", "")
    if wants_protobuf(accept):
        return Shape.PROTOBUF
    if query_endpoint:
        return Shape.DELIMITED if DELIMITED in accept else Shape.V1
    return Shape.DELIMITED if wants_delimited(request) else Shape.JSON


def protobuf_rows(started: QueryResult | PushQuery) -> ProtobufRows:
    """The Protobuf schema of a query's columns; ValueError when one cannot be a field."""
    if isinstance(started, PushQuery):
        return ProtobufRows.of([(column.name, column.type) for column in started.columns])
    return ProtobufRows.of([(name, parse_type(text))
                            for name, text in zip(started.names, started.types, strict=True)])


def wants_delimited(request: Request) -> bool:
    """ksqlDB answers JSON only to a client that accepts ``application/json`` and not the
    delimited format."""
    accept = request.headers.get("accept", "")
    return DELIMITED in accept or "application/json" not in accept


def parse_body(model: type[BaseModel], body: bytes, limits: HttpLimits) -> BaseModel | str:
    """The request body as ``model``, or why it is not one."""
    try:
        data = decode_json(body, limits.max_json_depth)
    except ValueError as error:
        return f"Malformed JSON in request: {error}"
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"Invalid request: {where or 'body'}: {first.get('msg')}"

