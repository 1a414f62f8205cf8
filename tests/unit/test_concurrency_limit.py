"""The node's bound on HTTP requests served at once: requests over it are answered 503 at once,
and a finished request frees its slot."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from metastore.api.concurrency import ConcurrencyLimit


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
