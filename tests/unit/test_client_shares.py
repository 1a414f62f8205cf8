"""No client holds what the others need: a node's push queries are shared out per client, and a
streamed answer whose client stops reading ends at its write deadline, closing its query."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from metastore.engine.overrides import NO_OVERRIDES
from metastore.planner.exceptions import PushQueryLimitError
from metastore.runtime import job, push
from metastore.server.http.concurrency import Lane, LaneThreads
from metastore.server.http.streaming import ChunkedResponse
from metastore.sql.parser import parse
from metastore.sql.statements import SelectStatement
from metastore.testing.check import run_script


class _Handle:
    stopped = False

    def stop(self) -> None:
        self.stopped = True


def test_one_client_gets_its_share_of_the_push_queries_and_the_others_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(push, "query_session", lambda spark: spark)
    monkeypatch.setattr(job, "start_transient", lambda *args, **kwargs: _Handle())
    monkeypatch.setattr(push, "compile_push",  # Spark's part
                        lambda *args, **kwargs: SimpleNamespace(earliest=False))
    _, image = run_script("CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', "
                          "PARTITIONS=1);")
    [select] = parse("SELECT * FROM S EMIT CHANGES;")
    assert isinstance(select, SelectStatement)
    spark: Any = object()
    queries = push.PushQueries(lambda: spark, {}, tmp_path,
                               push.PushSettings(max_queries=4, max_queries_per_client=2))
    mine = [queries.start(select, image, NO_OVERRIDES, client="user:alice") for _ in range(2)]
    with pytest.raises(PushQueryLimitError, match="of one client exceeded: 2 run for it"):
        queries.start(select, image, NO_OVERRIDES, client="user:alice")
    theirs = [queries.start(select, image, NO_OVERRIDES, client=f"user:{name}")
              for name in ("bob", "carol")]
    with pytest.raises(PushQueryLimitError, match=r"^Maximum number of push queries exceeded$"):
        queries.start(select, image, NO_OVERRIDES, client="user:dave")
    mine[0].close()
    mine.append(queries.start(select, image, NO_OVERRIDES, client="user:alice"))
    assert queries.running == 4
    for query in mine + theirs:
        query.close()
    assert queries.running == 0


def test_a_streamed_answer_whose_client_stops_reading_ends_at_its_write_deadline() -> None:
    ended: list[str] = []
    written: list[bytes] = []

    async def chunks() -> Any:
        while True:
            yield b"row\n"

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body":
            if len(written) == 3:
                await asyncio.Event().wait()  # the client's window is full: nobody reads
            written.append(message["body"])

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    answer = ChunkedResponse(chunks(), "application/json", lambda: ended.append("closed"),
                             LaneThreads(dict.fromkeys(Lane, 1)), write_timeout=0.2)

    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.wait_for(answer({"type": "http"}, receive, send), 5)
        return loop.time() - started

    took = asyncio.run(scenario())
    assert written == [b"row\n"] * 3 and ended == ["closed"]
    assert 0.2 <= took < 2
