"""The inserts stream's body: an early answer first receives what is left of the body (to its
end, or a bound), so no HTTP/2 data arrives for a stream the server has closed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from metastore.server.http.inserts_stream import BodyLines, ClientGoneError


def _receiver(messages: list[dict[str, Any]], then_wait: bool = False) -> Any:
    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        if then_wait:  # a client that keeps the body open
            await asyncio.sleep(3600)
        raise AssertionError("received past the end of the body")
    return receive


def test_drain_receives_the_body_to_its_end() -> None:
    messages = [{"type": "http.request", "body": b'not json\n{"a"', "more_body": True},
                {"type": "http.request", "body": b": 1}\n", "more_body": True},
                {"type": "http.request", "body": b"", "more_body": False}]
    lines = BodyLines(_receiver(messages), 1000)

    async def run() -> None:
        assert await lines.next() == b"not json"
        assert not lines.ended
        await lines.drain(1.0, 10_000)
        assert lines.ended and messages == []
        assert await lines.next() is None  # what was left is dropped

    asyncio.run(run())


def test_drain_gives_up_after_its_time_or_its_bytes() -> None:
    open_body = BodyLines(_receiver([{"type": "http.request", "body": b"x\n",
                                      "more_body": True}], then_wait=True), 1000)
    asyncio.run(open_body.drain(0.05, 10_000))
    assert not open_body.ended
    endless = [{"type": "http.request", "body": b"y" * 100, "more_body": True}
               for _ in range(50)]
    bounded = BodyLines(_receiver(endless), 1000)
    asyncio.run(bounded.drain(5.0, 250))
    assert not bounded.ended and len(endless) == 50 - 3


def test_drain_reports_a_client_gone() -> None:
    gone = BodyLines(_receiver([{"type": "http.disconnect"}]), 1000)
    with pytest.raises(ClientGoneError):
        asyncio.run(gone.drain(1.0, 1000))
