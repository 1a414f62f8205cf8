"""The node's bounds on HTTP requests served at once: requests over a lane's bound are answered
503 at once, one client's over its own bound 429, and a finished request frees its slot."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from metastore.server.http.concurrency import ConcurrencyLimit, client_of


def test_requests_over_the_limit_are_refused_and_slots_are_freed() -> None:
    release = asyncio.Event()
    served: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        served.append(1)
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def request(limit: ConcurrencyLimit) -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def send(message: Any) -> None:
            sent.append(message)

        async def receive() -> Any:
            return {"type": "http.request", "body": b"", "more_body": False}

        await limit({"type": "http"}, receive, send)
        return sent

    async def scenario() -> None:
        limit = ConcurrencyLimit(app, max_requests=2)
        first = [asyncio.create_task(request(limit)) for _ in range(2)]
        await asyncio.sleep(0.01)
        assert limit.in_flight == 2
        refused = await request(limit)
        assert refused[0]["status"] == 503
        assert json.loads(refused[1]["body"])["error_code"] == 50300
        release.set()
        assert [(await task)[0]["status"] for task in first] == [200, 200]
        assert limit.in_flight == 0
        assert (await request(limit))[0]["status"] == 200

    asyncio.run(scenario())
    assert len(served) == 3


def test_one_client_at_its_bound_is_refused_while_the_others_are_served() -> None:
    release = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})

    def scope(path: str, user: str | None = None, address: str = "10.0.0.1") -> dict[str, Any]:
        headers = [(b"authorization", b"Basic " + base64.b64encode(f"{user}:pw".encode()))
                   ] if user else []
        return {"type": "http", "path": path, "headers": headers, "client": (address, 1234)}

    async def request(limit: ConcurrencyLimit, where: dict[str, Any]) -> int:
        sent: list[dict[str, Any]] = []

        async def send(message: Any) -> None:
            sent.append(message)

        async def receive() -> Any:
            return {"type": "http.request", "body": b"", "more_body": False}

        await limit(where, receive, send)
        return int(sent[0]["status"])

    async def scenario() -> None:
        limit = ConcurrencyLimit(app, max_requests=100, max_per_client=2, by_user=True)
        held = [asyncio.create_task(request(limit, scope("/inserts-stream", "alice")))
                for _ in range(2)]
        held += [asyncio.create_task(request(limit, scope("/query-stream")))
                 for _ in range(2)]
        await asyncio.sleep(0.01)
        assert limit.in_flight == 4
        assert await request(limit, scope("/inserts-stream", "alice", "10.0.0.2")) == 429
        assert await request(limit, scope("/query-stream", address="10.0.0.1")) == 429
        others = [asyncio.create_task(request(limit, where)) for where in (
            scope("/inserts-stream", "bob"), scope("/ksql", "alice"),
            scope("/query-stream", address="10.0.0.2"), scope("/healthcheck"),
            scope("/healthcheck"), scope("/healthcheck"), scope("/close-query"))]
        await asyncio.sleep(0.01)
        assert limit.in_flight == 11, \
            "other users, other lanes, other addresses, health, what frees a slot"
        release.set()
        assert [await task for task in held + others] == [200] * 11
        assert limit.in_flight == 0
        assert await request(limit, scope("/inserts-stream", "alice")) == 200

    asyncio.run(scenario())


def test_without_authentication_clients_are_addresses_whatever_user_they_name() -> None:
    def scope(user: str) -> dict[str, Any]:
        token = base64.b64encode(f"{user}:pw".encode())
        return {"type": "http", "path": "/query", "client": ("10.0.0.1", 1),
                "headers": [(b"authorization", b"Basic " + token)]}

    assert client_of(scope("alice"), by_user=False) == client_of(scope("bob"), by_user=False) \
        == "address:10.0.0.1"
    assert client_of(scope("alice")) == "user:alice"
