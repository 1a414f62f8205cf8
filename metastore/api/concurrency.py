"""The bound on requests a node serves at once (:attr:`HttpLimits.max_concurrency`).

:class:`ConcurrencyLimit` is plain ASGI middleware: a request over the bound is answered 503 with
ksqlDB's error body before the app sees it, so a flood of clients costs a counter, not threads.
Streaming responses (push queries) hold their slot until they end.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from metastore.api.error_codes import SERVICE_UNAVAILABLE

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class ConcurrencyLimit:
    """Pass at most ``max_requests`` HTTP requests to ``app`` at a time; answer the rest 503."""

    def __init__(self, app: App, max_requests: int) -> None:
        self._app = app
        self._max = max_requests
        self._in_flight = 0

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if self._in_flight >= self._max:
            await _refuse(send, self._max)
            return
        self._in_flight += 1
        try:
            await self._app(scope, receive, send)
        finally:
            self._in_flight -= 1


async def _refuse(send: Send, limit: int) -> None:
    body = json.dumps({"@type": "generic_error", "error_code": SERVICE_UNAVAILABLE,
                       "message": f"The server is serving {limit} requests at once; retry later"
                       }).encode()
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"retry-after", b"1")]})
    await send({"type": "http.response.body", "body": body})


__all__ = ["ConcurrencyLimit"]
