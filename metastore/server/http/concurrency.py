"""Request lanes: health, statements, inserts and queries cannot starve one another, nor one
client the others.

Every HTTP request belongs to a :class:`Lane` by its path (:func:`lane_of`). Each lane has

- its own bound on requests in flight (:attr:`HttpLimits.max_concurrency`), kept by
  :class:`ConcurrencyLimit`, plain ASGI middleware: a request over its lane's bound is answered
  503 with ksqlDB's error body before the app sees it, so a flood costs a counter, not threads;
  streaming responses (push queries, inserts streams) hold their slot until they end;
- a bound per client (:attr:`HttpLimits.max_requests_per_client`) in every lane but health's:
  one client (a basic-auth user, or an address without authentication) holding that many
  requests of a lane is answered 429, while the others are served;
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

from metastore.server.http.auth import claimed_user
from metastore.server.http.error_codes import SERVICE_UNAVAILABLE, TOO_MANY_REQUESTS

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
    """``/ksql``: writes, and waits for the log."""
    INSERTS = "inserts"
    """``/inserts-stream``: rows written as they arrive, for as long as a client streams."""
    QUERIES = "queries"
    """Pull and push queries, and closing them."""


_LANES = {"/ksql": Lane.STATEMENTS, "/inserts-stream": Lane.INSERTS,
          "/query": Lane.QUERIES, "/query-stream": Lane.QUERIES, "/close-query": Lane.QUERIES,
          "/v1/metastore/log": Lane.QUERIES}


def lane_of(path: str) -> Lane:
    """The lane of a request path; every path not a statement or a query is the health lane's."""
    return _LANES.get(path.rstrip("/") or "/", Lane.HEALTH)


class ConcurrencyLimit:
    """Pass at most ``max_requests`` HTTP requests per lane to ``app`` at a time, and at most
    ``max_per_client`` of one client in a lane other than health's; answer the rest 503 (the
    node is busy) or 429 (the client is)."""

    def __init__(self, app: App, max_requests: int,
                 in_flight: dict[Lane, int] | None = None,
                 max_per_client: int | None = None, by_user: bool = False) -> None:
        """``in_flight``: the counts to keep, by lane (shared with the app's /metrics);
        ``by_user``: clients are the users basic auth checks (else their addresses)."""
        self._app = app
        self._max = max_requests
        self._max_per_client = max_per_client or max_requests
        self._by_user = by_user
        self._in_flight = in_flight if in_flight is not None else dict.fromkeys(Lane, 0)
        self._by_client: dict[tuple[Lane, str], int] = {}

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
            await _refuse(send, 503, SERVICE_UNAVAILABLE, f"The server is serving {self._max} "
                          f"{lane.value} requests at once; retry later")
            return
        client = (lane, client_of(scope, self._by_user)) if lane is not Lane.HEALTH and \
            scope.get("path", "").rstrip("/") not in UNBOUNDED_PER_CLIENT else None
        if client is not None and self._by_client.get(client, 0) >= self._max_per_client:
            await _refuse(send, 429, TOO_MANY_REQUESTS, f"This client has "
                          f"{self._max_per_client} {lane.value} requests in flight already; "
                          "retry once one has ended")
            return
        self._in_flight[lane] += 1
        if client is not None:
            self._by_client[client] = self._by_client.get(client, 0) + 1
        try:
            await self._app(scope, receive, send)
        finally:
            self._in_flight[lane] -= 1
            if client is not None:
                self._release(client)

    def _release(self, client: tuple[Lane, str]) -> None:
        left = self._by_client[client] - 1
        if left:
            self._by_client[client] = left
        else:
            del self._by_client[client]


UNBOUNDED_PER_CLIENT = frozenset({"/close-query"})
"""Requests that free what a client holds: never refused for what it holds."""


def client_of(scope: Scope, by_user: bool = True) -> str:
    """Who a request counts against: with ``by_user`` (basic auth on), the user its credentials
    name (checked later, by the app: a request with wrong ones ends at once); else, or without
    credentials, its address."""
    for name, value in scope.get("headers", ()) if by_user else ():
        if name == b"authorization":
            user = claimed_user(value.decode("latin-1"))
            if user is not None:
                return f"user:{user}"
    client = scope.get("client")
    return f"address:{client[0] if client else ''}"


async def _refuse(send: Send, status: int, code: int, message: str) -> None:
    body = json.dumps({"@type": "generic_error", "error_code": code,
                       "message": message}).encode()
    await send({"type": "http.response.start", "status": status,
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


__all__ = ["ConcurrencyLimit", "Lane", "LaneThreads", "client_of", "lane_of"]
