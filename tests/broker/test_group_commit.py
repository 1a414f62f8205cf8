"""Group commit on the real broker: requests that queue while a node writes are validated in
order on one snapshot and written in one transaction, each atomic and answered on its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer

from metastore.catalog.exceptions import (
    SourceExistsError,
    SourceNotFoundError,
    TopicDeletedError,
    TopicError,
)
from metastore.core.faults import Faults, Flushable
from metastore.kafka.admin import Admin
from metastore.log.writer import WriterOptions
from metastore.server.node import Node
from tests.broker.test_command_log import committed_values, create_stream, usurp
from tests.support.kafka import unique
from tests.support.waiting import eventually

NodeFactory = Callable[..., Node]


class HeldFirstCommit:
    """A ``before_commit`` fault that holds the node's first transaction until released (so
    that requests queue behind it), then runs ``then`` before each later commit."""

    def __init__(self, then: Callable[[Flushable], None] | None = None) -> None:
        self.release = threading.Event()
        self.holding = threading.Event()
        self.commits = 0
        self._then = then

    def __call__(self, producer: Flushable) -> None:
        self.commits += 1
        if self.commits == 1:
            self.holding.set()
            assert self.release.wait(30)
        elif self._then is not None:
            self._then(producer)


def queue_behind_a_held_write(node: Node, held: HeldFirstCommit, requests: list[tuple[str, str]],
                              holder: str | None = None,
                              ids: dict[str, str] | None = None) -> dict[str, Any]:
    """Write request ``holder`` (text) and hold its commit, queue ``requests`` (label, text) in
    order behind it, release, and return each request's entities or error by label (the
    holder's: "holder"). A request's id is its label, or the one ``ids`` gives it."""
    assert node.writer is not None
    outcomes: dict[str, Any] = {}

    def send(label: str, text: str) -> None:
        try:
            outcomes[label] = node.execute(text, request_id=(ids or {}).get(label, label))
        except Exception as error:
            outcomes[label] = error

    holder = holder or create_stream("HOLDER", unique("holder"))
    threads = [threading.Thread(target=send, args=("holder", holder))]
    threads[0].start()
    assert held.holding.wait(30)
    for index, (request_id, text) in enumerate(requests):
        threads.append(threading.Thread(target=send, args=(request_id, text)))
        threads[-1].start()
        eventually(lambda count=index + 1: node.writer.queued >= count, 10,
                   "the request to queue", interval=0.005)
    held.release.set()
    for thread in threads:
        thread.join(30)
    return outcomes


def ok(entities: Any) -> list[str]:
    assert isinstance(entities, list), entities
    return [entity["commandStatus"]["status"] for entity in entities]


def test_queued_requests_are_written_in_one_transaction_each_atomic_and_answered_alone(
        node_factory: NodeFactory, consumer_factory: Callable[..., Consumer]) -> None:
    held = HeldFirstCommit()
    node = node_factory(faults=Faults(before_commit=held))
    assert node.writer is not None
    orders, shipped = unique("orders"), unique("shipped")
    outcomes = queue_behind_a_held_write(node, held, [
        ("orders", create_stream("ORDERS", orders)),
        ("again", create_stream("ORDERS", unique("again"))),  # exists once "orders" is written
        ("derived", "CREATE STREAM BIG AS SELECT * FROM ORDERS WHERE ID > 10;"),
        ("half", create_stream("HALF", unique("half")) + " DROP STREAM NOT_THERE;"),
        ("shipped", create_stream("SHIPPED", shipped)),
    ])
    assert ok(outcomes["holder"]) == ["SUCCESS"]
    assert ok(outcomes["orders"]) == ["SUCCESS"]
    assert isinstance(outcomes["again"], SourceExistsError)
    assert ok(outcomes["derived"]) == ["SUCCESS"]
    assert isinstance(outcomes["half"], SourceNotFoundError)
    assert ok(outcomes["shipped"]) == ["SUCCESS"]
    assert node.writer.stats.transactions == 2, "the five queued requests shared one transaction"
    assert node.writer.queue_stats.largest_batch == 5
    sequence = [outcomes[r][0]["commandSequenceNumber"] for r in ("orders", "derived", "shipped")]
    assert sequence == [sequence[0], sequence[0] + 1, sequence[0] + 2]
    records = committed_values(consumer_factory, node.config.topic)
    assert [(r["requestId"], r["commandId"]) for r in records] == [
        ("holder", "stream/HOLDER/create"), ("orders", "stream/ORDERS/create"),
        ("derived", "stream/BIG/create"), ("shipped", "stream/SHIPPED/create")]
    image = node.replica.image
    assert image.source("HALF") is None, "a request with an invalid statement writes nothing"
    assert {r: image.requests[r].offsets for r in ("orders", "derived", "shipped")} == {
        "orders": (sequence[0],), "derived": (sequence[1],), "shipped": (sequence[2],)}
    assert node.admin.describe(orders) is not None and node.admin.describe(shipped) is not None


def test_a_batch_fenced_at_commit_is_written_once_on_retry(
        node_factory: NodeFactory, consumer_factory: Callable[..., Consumer]) -> None:
    fenced: list[bool] = []

    def fence_once(_producer: Flushable) -> None:
        if not fenced:
            fenced.append(True)
            usurp(node)

    held = HeldFirstCommit(then=fence_once)
    node = node_factory(faults=Faults(before_commit=held),
                        writer=WriterOptions(request_timeout=20.0))
    assert node.writer is not None
    outcomes = queue_behind_a_held_write(node, held, [
        (f"r{index}", create_stream(f"S{index}", unique("s"))) for index in range(3)])
    assert all(ok(outcomes[r]) == ["SUCCESS"] for r in ("holder", "r0", "r1", "r2"))
    assert node.writer.stats.fenced_retries >= 1
    records = committed_values(consumer_factory, node.config.topic)
    assert sorted(r["requestId"] for r in records) == ["holder", "r0", "r1", "r2"]


def test_a_retry_queued_behind_its_first_attempt_gets_the_first_outcome(
        node_factory: NodeFactory, consumer_factory: Callable[..., Consumer]) -> None:
    held = HeldFirstCommit()
    node = node_factory(faults=Faults(before_commit=held))
    statement = create_stream("HOLDER", unique("holder"))
    outcomes = queue_behind_a_held_write(node, held, [("retry", statement)], holder=statement,
                                         ids={"retry": "holder"})
    assert ok(outcomes["holder"]) == ["SUCCESS"]
    assert outcomes["retry"][0]["commandSequenceNumber"] == \
        outcomes["holder"][0]["commandSequenceNumber"]
    records = committed_values(consumer_factory, node.config.topic)
    assert [r["requestId"] for r in records] == ["holder"]


def test_per_statement_mode_writes_each_request_in_a_transaction_of_its_own(
        node_factory: NodeFactory) -> None:
    held = HeldFirstCommit()
    node = node_factory(faults=Faults(before_commit=held),
                        writer=WriterOptions(reuse_producer=False))
    assert node.writer is not None
    outcomes = queue_behind_a_held_write(node, held, [
        (f"r{index}", create_stream(f"S{index}", unique("s"))) for index in range(3)])
    assert all(ok(outcomes[r]) == ["SUCCESS"] for r in ("r0", "r1", "r2"))
    assert node.writer.stats.transactions == 4


def test_a_topic_kafka_refuses_fails_its_request_alone(
        node_factory: NodeFactory, kafka_admin: Admin,
        consumer_factory: Callable[..., Consumer]) -> None:
    held = HeldFirstCommit()
    node = node_factory(faults=Faults(before_commit=held))
    assert node.writer is not None
    existing = unique("collide").replace("-", "_")
    kafka_admin.create(existing, 1)
    colliding = existing.replace("_", ".")  # Kafka refuses names that collide in its metrics
    outcomes = queue_behind_a_held_write(node, held, [
        ("before", create_stream("BEFORE", unique("before"))),
        ("refused", create_stream("REFUSED", colliding)),
        ("after", "CREATE STREAM AFTER AS SELECT * FROM BEFORE;"),
    ])
    assert isinstance(outcomes["refused"], TopicError)
    assert ok(outcomes["before"]) == ["SUCCESS"] and ok(outcomes["after"]) == ["SUCCESS"]
    assert node.writer.stats.transactions == 2
    records = committed_values(consumer_factory, node.config.topic)
    assert [r["requestId"] for r in records] == ["holder", "before", "after"]


def test_a_request_over_a_topic_an_earlier_request_of_the_batch_deletes_waits_for_the_next(
        node_factory: NodeFactory, consumer_factory: Callable[..., Consumer]) -> None:
    """Kafka deletes a DROP's topic after its commit: a CREATE over that topic in the same
    transaction would find it still there, create nothing, and stand over no topic after."""
    held = HeldFirstCommit()
    node = node_factory(faults=Faults(before_commit=held))
    assert node.writer is not None
    topic = unique("reused")
    outcomes = queue_behind_a_held_write(node, held, [
        ("drop", "DROP STREAM HOLDER DELETE TOPIC;"),
        ("again", create_stream("AGAIN", topic)),
    ], holder=create_stream("HOLDER", topic))
    assert ok(outcomes["drop"]) == ["SUCCESS"] and ok(outcomes["again"]) == ["SUCCESS"]
    assert node.writer.stats.transactions == 3, "the CREATE went in a transaction after the DROP"
    assert node.admin.describe(topic) is not None, "the new stream's topic exists"
    records = committed_values(consumer_factory, node.config.topic)
    assert [r["requestId"] for r in records] == ["holder", "drop", "again"]


def test_a_request_whose_own_drop_deletes_a_topic_it_then_uses_is_refused_at_once(
        node_factory: NodeFactory, consumer_factory: Callable[..., Consumer]) -> None:
    """Only another request's DROP defers a request; its own (here seen through EXPLAIN, which
    validates with the request's topic changes) refuses it, and nothing is written."""
    node = node_factory()
    topic = unique("own")
    node.execute(create_stream("OWN", topic) + create_stream("OTHER", unique("other")))
    started = time.monotonic()
    with pytest.raises(TopicDeletedError):
        node.execute(f"DROP STREAM OWN DELETE TOPIC; EXPLAIN CREATE STREAM T WITH "
                     f"(KAFKA_TOPIC='{topic}', PARTITIONS=1) AS SELECT * FROM OTHER EMIT CHANGES;")
    assert time.monotonic() - started < 5, "answered at once, not at the request's deadline"
    assert node.replica.image.source("OWN") is not None
    assert node.admin.describe(topic) is not None
    records = committed_values(consumer_factory, node.config.topic)
    assert len(records) == 2, "the two CREATEs; nothing of the refused request"
