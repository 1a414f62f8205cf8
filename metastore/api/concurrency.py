"""Request lanes: health, statements and queries cannot starve one another.

Every HTTP request belongs to a :class:`Lane` by its path (:func:`lane_of`). Each lane has

- its own bound on requests in flight (:attr:`HttpLimits.max_concurrency`), kept by
  :class:`ConcurrencyLimit`, plain ASGI middleware: a request over its lane's bound is answered
  503 with ksqlDB's error body before the app sees it, so a flood costs a counter, not threads;
  streaming responses (push queries) hold their slot until they end;
- its own worker threads (:class:`LaneThreads`), where its blocking work runs: statements that
  wait for a far ``commandSequenceNumber`` or a slow writer fill the statements lane's threads,
  never the ones ``/healthcheck`` or a pull query needs.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from enum import StrEnum
from typing import Any, ParamSpec, TypeVar

from anyio import CapacityLimiter, to_thread

from metastore.api.error_codes import SERVICE_UNAVAILABLE

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
P = ParamSpec("P")
T = TypeVar("T")


class Lane(StrEnum):
    HEALTH = "health"
    """Health, status, metrics and server information: cheap, and what operators probe."""
    STATEMENTS = "statements"
    """``/ksql`` and ``/inserts-stream``: writes, and waits for the log."""
    QUERIES = "queries"
    """Pull and push queries, and closing them."""


_LANES = {"/ksql": Lane.STATEMENTS, "/inserts-stream": Lane.STATEMENTS,
          "/query": Lane.QUERIES, "/query-stream": Lane.QUERIES, "/close-query": Lane.QUERIES}


def lane_of(path: str) -> Lane:
    """The lane of a request path; every path not a statement or a query is the health lane's."""
    return _LANES.get(path.rstrip("/") or "/", Lane.HEALTH)


class ConcurrencyLimit:
    """Pass at most ``max_requests`` HTTP requests per lane to ``app`` at a time; answer the
    rest 503."""

    def __init__(self, app: App, max_requests: int,
                 in_flight: dict[Lane, int] | None = None) -> None:
        """``in_flight``: the counts to keep, by lane (shared with the app's /metrics)."""
        self._app = app
        self._max = max_requests
        self._in_flight = in_flight if in_flight is not None else dict.fromkeys(Lane, 0)

    @property
    def in_flight(self) -> int:
        return sum(self._in_flight.values())

    def in_lane(self, lane: Lane) -> int:
        return self._in_flight[lane]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        lane = lane_of(scope.get("path", ""))
        if self._in_flight[lane] >= self._max:
            await _refuse(send, self._max, lane)
            return
        self._in_flight[lane] += 1
        try:
            await self._app(scope, receive, send)
        finally:
            self._in_flight[lane] -= 1


async def _refuse(send: Send, limit: int, lane: Lane) -> None:
    body = json.dumps({"@type": "generic_error", "error_code": SERVICE_UNAVAILABLE,
                       "message": f"The server is serving {limit} {lane.value} requests at once; "
                                  f"retry later"}).encode()
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"retry-after", b"1")]})
    await send({"type": "http.response.body", "body": body})


class LaneThreads:
    """The worker threads of each lane: ``threads[lane]`` of them at most."""

    def __init__(self, threads: Mapping[Lane, int]) -> None:
        self._limiters = {lane: CapacityLimiter(threads[lane]) for lane in Lane}

    async def run(self, lane: Lane, work: Callable[P, T], *args: P.args,
                  **kwargs: P.kwargs) -> T:
        """``work(*args, **kwargs)`` on one of ``lane``'s threads."""
        return await to_thread.run_sync(functools.partial(work, *args, **kwargs),
                                        limiter=self._limiters[lane])

    def endpoint(self, lane: Lane) -> Callable[[Callable[P, T]], Callable[P, Awaitable[T]]]:
        """A blocking endpoint, served on ``lane``'s threads (its signature kept for FastAPI)."""
        def wrap(work: Callable[P, T]) -> Callable[P, Awaitable[T]]:
            @functools.wraps(work)
            async def served(*args: P.args, **kwargs: P.kwargs) -> T:
                return await self.run(lane, work, *args, **kwargs)
            return served
        return wrap


__all__ = ["ConcurrencyLimit", "Lane", "LaneThreads", "lane_of"]
