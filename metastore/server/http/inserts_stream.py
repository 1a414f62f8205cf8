"""``POST /inserts-stream``: rows streamed into a stream or table, each acknowledged.

ksqlDB's ``InsertsStreamHandler`` protocol, over HTTP/2 or HTTP/1.1: the request body is
newline-delimited JSON, its first object ``{"target": "S", "properties": {...}}``, each next one a
row (field names as in INSERT VALUES, keys required; see
:func:`metastore.engine.insert_record.json_row`). The target is checked before the answer
starts (a bad one is an ordinary error response); then, as each row is written to Kafka and
acknowledged, the answer carries ``{"status":"ok","seq":N}`` (``seq`` counts rows from 0). The
first row that cannot be written ends the answer with ``{"status":"error","seq":N,
"error_code":..,"message":..}``; rows after it are not read. As in ksqlDB, every line is a row
(a blank one is invalid JSON), except the empty one after the body's final newline; a row's
numbers are JSON's (no ``NaN`` or ``Infinity``) and must fit their columns (no integer beyond
BIGINT). The answer is delimited lines, or
one JSON array for a client that accepts ``application/json`` only.

The body is read as it arrives, so a client may keep a stream open and write rows as they
happen; one row is bounded by ``HttpLimits.max_body_bytes``, the arguments must arrive within
the body timeouts, and a stream without a row for ``HttpLimits.inserts_idle_timeout_seconds``
is ended with an error row (408): an idle stream never holds a slot for ever.
A client that goes away stops the stream; the rows acknowledged stay written.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.types import Message, Receive, Scope, Send

from metastore.catalog.exceptions import QueryError
from metastore.catalog.model import DataSource
from metastore.core.exceptions import MetastoreError
from metastore.engine import insert_record
from metastore.server.http import error_codes as codes
from metastore.server.http.concurrency import Lane, LaneThreads
from metastore.server.http.http_limits import HttpLimits, decode_json

if TYPE_CHECKING:
    from metastore.server.node import Node

DELIMITED = "application/vnd.ksqlapi.delimited.v1"
DRAIN_SECONDS = 1.0
"""The longest an early answer waits for the rest of the body (:meth:`BodyLines.drain`)."""


class InsertsStreamArgs(BaseModel):
    """The first JSON object of the body (ksqlDB's ``InsertsStreamArgs``)."""

    model_config = ConfigDict(extra="ignore")

    target: str = Field(min_length=1, max_length=1000)
    properties: dict[str, Any] = Field(default_factory=dict)


class ClientGoneError(Exception):
    """The client disconnected before its body ended."""


class BodyLines:
    """The request body, one line at a time, read from the ASGI channel as it arrives."""

    def __init__(self, receive: Receive, max_line_bytes: int) -> None:
        self._receive = receive
        self._max = max_line_bytes
        self._buffer = bytearray()
        self._ended = False

    async def next(self, timeout: float | None = None) -> bytes | None:
        """The next line (without its newline), or None at the end of the body. Raises
        ``TimeoutError`` when no line arrived in ``timeout`` seconds, ``ValueError`` for a
        line longer than allowed and :class:`ClientGoneError` on a disconnect."""
        async with asyncio.timeout(timeout):
            while True:
                end = self._buffer.find(b"\n")
                if end >= 0:
                    line = bytes(self._buffer[:end])
                    del self._buffer[:end + 1]
                    return line
                if len(self._buffer) > self._max:
                    raise ValueError(f"a line of the body is longer than {self._max} bytes")
                if self._ended:
                    if not self._buffer:
                        return None
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    return line
                message: Message = await self._receive()
                if message["type"] == "http.disconnect":
                    raise ClientGoneError
                self._buffer += message.get("body", b"")
                self._ended = not message.get("more_body", False)


    @property
    def ended(self) -> bool:
        """Whether the whole body was received."""
        return self._ended

    async def drain(self, timeout: float, max_bytes: int) -> None:
        """Receive what is left of the body, up to its end, ``timeout`` seconds or
        ``max_bytes``, and drop it. A response that ends while an HTTP/2 client is still sending
        its body lets Hypercorn meet data for a stream it has closed, and it then drops the
        connection with every stream on it (pgjones/hypercorn#329): an early answer waits for
        the body's end first."""
        received = 0
        try:
            async with asyncio.timeout(timeout):
                while not self._ended and received <= max_bytes:
                    message: Message = await self._receive()
                    if message["type"] == "http.disconnect":
                        raise ClientGoneError
                    received += len(message.get("body", b""))
                    self._ended = not message.get("more_body", False)
        except TimeoutError:
            pass  # a client that keeps sending gets its answer anyway
        self._buffer.clear()


def decode_object(line: bytes, max_depth: int) -> dict[str, Any] | None:
    """A line as a JSON object (numbers with a fraction as Decimal), or None if it is not one."""
    try:
        value = decode_json(line, max_depth, parse_float=Decimal)
    except ValueError:  # JsonTooDeepError and UnicodeDecodeError among them
        return None
    return value if isinstance(value, dict) else None


class InsertsStreamResponse(Response):
    """The whole inserts-stream exchange: it reads the request body itself, as rows arrive."""

    def __init__(self, node: Node, limits: HttpLimits, delimited: bool,
                 refuse: Callable[[MetastoreError, str], Response],
                 now_ms: Callable[[], int], threads: LaneThreads,
                 user: str | None = None) -> None:
        """``user``: the authenticated user the target is checked for (the role file)."""
        super().__init__()
        self._threads = threads
        self._node = node
        self._user = user
        self._limits = limits
        self._delimited = delimited
        self._refuse = refuse
        self._now_ms = now_ms

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lines = BodyLines(receive, self._limits.max_body_bytes)
        try:
            source = await self._open(lines, scope, receive, send)
            if source is not None:
                await self._stream(lines, source, send)
        except (ClientGoneError, OSError):
            pass  # the client is gone; every acknowledged row stays written

    async def _open(self, lines: BodyLines, scope: Scope, receive: Receive,
                    send: Send) -> DataSource | None:
        """The target, checked; or None once the error response was sent."""
        refusal: Response
        try:
            line = await lines.next(self._limits.body_timeout_seconds)
        except TimeoutError:
            refusal = _generic(408, codes.REQUEST_TIMEOUT, "The inserts stream's arguments were "
                               f"not received within {self._limits.body_timeout_seconds:g} s")
        except ValueError as error:
            refusal = _generic(413, codes.PAYLOAD_TOO_LARGE, str(error))
        else:
            refusal, source = await self._target(line)
            if source is not None:
                return source
        await self._drain(lines)
        await refusal(scope, receive, send)
        return None

    async def _drain(self, lines: BodyLines) -> None:
        await lines.drain(min(DRAIN_SECONDS, self._limits.body_idle_timeout_seconds),
                          self._limits.max_body_bytes)

    async def _target(self, line: bytes | None) -> tuple[Response, DataSource | None]:
        data = decode_object(line, self._limits.max_json_depth) if line else None
        if data is None:
            return _generic(400, codes.BAD_REQUEST, "Invalid JSON in inserts stream "
                            "arguments: the body must start with {\"target\": \"<name>\"}"), None
        try:
            args = InsertsStreamArgs.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            return _generic(400, codes.BAD_REQUEST,
                            f"Invalid inserts stream arguments: {where}: {first.get('msg')}"), None
        try:
            name = insert_record.identifier_text(args.target)
            source = await self._threads.run(Lane.INSERTS, self._node.insert_target, name,
                                             self._user)
        except MetastoreError as error:
            return self._refuse(error, args.target), None
        return Response(), source

    async def _stream(self, lines: BodyLines, source: DataSource, send: Send) -> None:
        media_type = DELIMITED if self._delimited else "application/json"
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", media_type.encode())]})
        written = 0
        while True:
            reply, ended = await self._next_row(lines, source, written)
            if reply is not None:
                await self._write(send, reply, written)
                if reply["status"] == "ok":
                    written += 1
            if ended:
                break
        if not lines.ended:  # a row error ends the stream before the body does
            await self._drain(lines)
        tail = b"" if self._delimited else (b"]" if written or reply is not None else b"[]")
        await send({"type": "http.response.body", "body": tail, "more_body": False})

    async def _next_row(self, lines: BodyLines, source: DataSource,
                        seq: int) -> tuple[dict[str, Any] | None, bool]:
        """The reply to the next row and whether the stream ends after it."""
        idle = self._limits.inserts_idle_timeout_seconds
        try:
            line = await lines.next(idle)
        except ValueError as error:
            return _insert_error(seq, codes.PAYLOAD_TOO_LARGE, str(error)), True
        except TimeoutError:
            return _insert_error(seq, codes.REQUEST_TIMEOUT, f"No row arrived within {idle:g} s; "
                                 "the inserts stream is closed (open a new one to go on)"), True
        if line is None:
            return None, True
        fields = decode_object(line, self._limits.max_json_depth)
        if fields is None:
            return _insert_error(seq, codes.BAD_REQUEST, "Invalid JSON in inserts stream"), True
        try:
            row = insert_record.json_row(fields, source)
            await self._threads.run(Lane.INSERTS, self._node.insert_row, source, row,
                                    self._now_ms())
        except QueryError as error:
            return _insert_error(seq, codes.BAD_REQUEST, error.message), True
        except MetastoreError as error:
            return _insert_error(seq, codes.classify(error).code, error.message), True
        return {"status": "ok", "seq": seq}, False

    async def _write(self, send: Send, reply: dict[str, Any], written: int) -> None:
        body = json.dumps(reply, separators=(",", ":")).encode()
        chunk = body + b"\n" if self._delimited else (b"," if written else b"[") + body
        await send({"type": "http.response.body", "body": chunk, "more_body": True})


def _insert_error(seq: int, code: int, message: str) -> dict[str, Any]:
    return {"status": "error", "seq": seq, "error_code": code, "message": message}


def _generic(status: int, code: int, message: str) -> Response:
    body = json.dumps({"@type": "generic_error", "error_code": code, "message": message})
    return Response(body, status_code=status, media_type="application/json")


__all__ = ["InsertsStreamResponse"]
