"""Concurrent writers on two nodes of one service while the only broker restarts: every answer
agrees with the log. "NOT written" means absent from it, success means in it; a request whose
fate the node cannot know is answered "outcome unknown", naming its command and request id."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from metastore.core.exceptions import MetastoreError
from metastore.dev.kafka_cluster import LocalKafkaCluster
from metastore.log.exceptions import NotWrittenError, OutcomeUnknownError
from metastore.server.node import Node, NodeConfig
from tests.broker.test_command_log import create_stream
from tests.support.kafka import unique

WRITERS = 4


@dataclass
class Answers:
    written: set[str] = field(default_factory=set)
    not_written: set[str] = field(default_factory=set)
    unknown: list[OutcomeUnknownError] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[tuple[LocalKafkaCluster, str]]:
    broker = LocalKafkaCluster(tmp_path / "restarting", brokers=1)
    yield broker, broker.start(progress=None).bootstrap_servers
    broker.stop()


def write_until(stop: threading.Event, node: Node, writer: int, answers: Answers) -> None:
    count = 0
    while not stop.is_set():
        count += 1
        request_id = f"w{writer}-{count}"
        statement = create_stream(f"W{writer}_{count}", unique("restart"))
        try:
            node.execute(statement, request_id=request_id, timeout=4.0)
            outcome = "written"
        except OutcomeUnknownError as error:
            with answers.lock:
                answers.unknown.append(error)
            continue
        except NotWrittenError:
            outcome = "not_written"
        except MetastoreError as error:  # not ready while catching up, and the like
            with answers.lock:
                answers.other.append(f"{request_id}: {type(error).__name__}: {error}")
            time.sleep(0.2)
            continue
        with answers.lock:
            getattr(answers, outcome).add(request_id)


def test_answers_during_a_broker_restart_agree_with_the_log(
        own_broker: tuple[LocalKafkaCluster, str]) -> None:
    broker, bootstrap = own_broker
    service = unique("restart")
    nodes = [Node(NodeConfig(service_id=service, node_id=f"n{i}", bootstrap_servers=bootstrap))
             for i in range(2)]
    answers, stop = Answers(), threading.Event()
    threads = [threading.Thread(target=write_until, args=(stop, nodes[i % 2], i, answers))
               for i in range(WRITERS)]
    try:
        for node in nodes:
            node.start()
            assert node.replica.wait_ready(60)
        for thread in threads:
            thread.start()
        time.sleep(3)
        broker.stop()
        time.sleep(2)
        broker.start(progress=None)
        time.sleep(8)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        for node in nodes:
            node.stop(checkpoint=False)
    observer = Node(NodeConfig(service_id=service, node_id="observer",
                               bootstrap_servers=bootstrap))
    observer.start()
    try:
        assert observer.replica.wait_ready(60)
        in_log = set(observer.replica.image.requests)
    finally:
        observer.stop(checkpoint=False)
    print(f"written {len(answers.written)}, NOT written {len(answers.not_written)}, unknown "
          f"{len(answers.unknown)}, other {len(answers.other)}: {answers.other[:3]}")
    assert answers.written, f"no write succeeded: {answers.other[:5]}"
    assert answers.written <= in_log, "answered written, missing from the log"
    assert not answers.not_written & in_log, "answered NOT written, yet in the log"
    for error in answers.unknown:  # named; its commands too once it was validated
        assert error.request_id and f"({error.request_id})" in error.message, error.message
        assert not error.command_ids or f"/status/{error.command_ids[0]}" in error.message
