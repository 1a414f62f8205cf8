"""``GET /ws/query``: ksqlDB's websocket query endpoint, which its web UIs use.

The upgrade request carries the query as ksqlDB's does: a ``request`` parameter holding a
``/ksql`` request's JSON (``ksql``, ``streamsProperties``, ``sessionVariables``,
``commandSequenceNumber``), with one SELECT (push or pull) or PRINT. Each message the node sends
is a text frame of JSON, as ksqlDB's ``WSQueryEndpoint`` sends it:

- first the result's schema, an array of ksqlDB's field entities (``{"name", "schema"}``; a pull
  query's key columns ``"type": "KEY"``);
- then one ``{"row": {"columns": [...]}}`` per row (``"tombstone": true`` for a table's deleted
  row); a PRINT sends each record's text line as a JSON string instead;
- at the query's end (its LIMIT, a pull query's last row), ``{"error": "done"}`` and a close
  with 1000 ``done``.

An error is a last ``{"error": "<message>"}`` frame and a close: 1003 for a request the node
refuses (no ``request``, a statement that is no query, a property it may not set), 1011 for a
query that fails while it runs. A client that closes the socket stops its query. Credentials are
those of the upgrade request; without valid ones the handshake is refused (HTTP 403)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from starlette.websockets import WebSocketState

from metastore.core.exceptions import MetastoreError
from metastore.engine.responses import schema_json
from metastore.runtime.push import PushQuery
from metastore.server.http import streaming
from metastore.server.http.answers import KsqlResponse
from metastore.server.http.concurrency import Lane, client_of
from metastore.server.http.context import ServerContext
from metastore.server.http.routes.queries import Printing, Queries, Started
from metastore.spark.query import QueryResult
from metastore.sql.parser import parse_type

INVALID_MESSAGE = 1003
"""Close code of a request the node refuses (WebSocket's "unsupported data", as ksqlDB's)."""
INTERNAL_ERROR = 1011
_REASON_BYTES = 123
"""A close frame's reason holds at most 123 bytes."""


def router(context: ServerContext) -> APIRouter:
    api = APIRouter()
    queries = Queries(context)
    gate = context.gate
    with_auth = gate.auth is not None

    @api.websocket("/ws/query")
    async def ws_query(socket: WebSocket) -> None:
        if gate.refuse_cross_site(socket) is not None or gate.authenticate(socket) is not None \
                or gate.refuse_interactive(socket) is not None:
            await socket.close(code=1008)  # before the handshake: HTTP 403
            return
        await socket.accept()
        text = socket.query_params.get("request")
        if text is None:
            await _close(socket, INVALID_MESSAGE, "Error parsing request: missing request "
                                                  "parameter")
            return
        parsed = gate.parse_request(text.encode())
        if isinstance(parsed, KsqlResponse):
            error = json.loads(bytes(parsed.body))
            await _close(socket, INVALID_MESSAGE, f"Error parsing request: {error['message']}")
            return
        try:
            started = await context.threads.run(
                Lane.QUERIES, queries.start_any, parsed, gate.user_of(socket),
                client_of(socket.scope, with_auth))
        except MetastoreError as error:
            await _close(socket, INVALID_MESSAGE, error.message)
            return
        await _answer(socket, started, context)

    return api


async def _answer(socket: WebSocket, started: Started, context: ServerContext) -> None:
    """Send what ``started`` answers, then close; a push query or PRINT stops when the client
    closes the socket, even while it has no row to send."""
    if isinstance(started, QueryResult):
        with contextlib.suppress(WebSocketDisconnect, OSError):  # else the client is gone
            await _send_all(socket, _pull_frames(started))
            await _close(socket, 1000, "done")
        return
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_watch_close, socket, group.cancel_scope)
            with contextlib.suppress(WebSocketDisconnect, OSError):
                await _stream(socket, started, context)
            group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await context.threads.run(Lane.QUERIES, started.close)


async def _stream(socket: WebSocket, started: PushQuery | Printing,
                  context: ServerContext) -> None:
    """A push query's or a PRINT's frames, then the close: ``done``, or its failure."""
    if isinstance(started, PushQuery):
        await _send_all(socket, _push_frames(started, context))
        failure = await context.threads.run(Lane.QUERIES, started.failure)
    else:
        failure = await _send_print(socket, started, context)
    if failure is not None:
        await _close(socket, INTERNAL_ERROR, failure)
    else:
        await _close(socket, 1000, "done")


async def _watch_close(socket: WebSocket, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` when the client closes the socket (what it sends is ignored)."""
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):  # closed already
        while (await socket.receive())["type"] != "websocket.disconnect":
            pass
    scope.cancel()


async def _send_all(socket: WebSocket, frames: AsyncIterator[str]) -> None:
    async for frame in frames:
        await socket.send_text(frame)


def _field(name: str, sql_type: str, key: bool = False) -> dict[str, Any]:
    field: dict[str, Any] = {"name": name, "schema": schema_json(parse_type(sql_type))}
    if key:
        field["type"] = "KEY"
    return field


async def _pull_frames(result: QueryResult) -> AsyncIterator[str]:
    yield json.dumps([_field(n, t, n in result.keys)
                      for n, t in zip(result.names, result.types, strict=True)])
    for row in result.rows:
        yield json.dumps({"row": {"columns": row}})


async def _push_frames(query: PushQuery, context: ServerContext) -> AsyncIterator[str]:
    """The push query's schema and rows, to its LIMIT or its end (closed, or failed)."""
    yield json.dumps([_field(c.name, c.type.sql()) for c in query.columns])
    left = query.limit
    async for rows in streaming.batches(query, streaming.HEARTBEAT_SECONDS, context.threads):
        for row in rows[:left] if left is not None else rows:
            yield streaming.row_json(row).decode()
        if left is not None:
            left -= min(left, len(rows))
            if left == 0:
                return


async def _send_print(socket: WebSocket, printing: Printing,
                      context: ServerContext) -> str | None:
    """A PRINT's records, each its text line as a JSON string, to its LIMIT; its failure's
    message, if it fails."""
    await socket.send_text(json.dumps([]))
    while not printing.printer.done:
        try:
            lines = await context.threads.run(Lane.QUERIES, printing.printer.poll,
                                              streaming.HEARTBEAT_SECONDS)
        except MetastoreError as error:
            return error.message
        for line in lines:
            await socket.send_text(json.dumps(line))
    return None


async def _close(socket: WebSocket, code: int, message: str) -> None:
    """ksqlDB's ``SessionUtil.closeSilently``: the message as a last frame, then the close."""
    if socket.client_state is not WebSocketState.CONNECTED:
        return
    try:
        await socket.send_text(json.dumps({"error": message}))
        reason = message.encode()[:_REASON_BYTES]
        if len(reason) < len(message.encode()):
            reason = reason[:_REASON_BYTES - 3] + b"..."
        await socket.close(code=code, reason=reason.decode(errors="ignore"))
    except (WebSocketDisconnect, RuntimeError):
        pass  # the client is gone


__all__ = ["router"]
