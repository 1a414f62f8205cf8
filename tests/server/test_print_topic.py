"""PRINT over POST /query of a real node process and broker: ksqlDB's lines (formats, then one
line per record), FROM BEGINNING, INTERVAL and LIMIT, records produced while it runs, and
ksqlDB's errors for a topic that does not exist, a reserved topic, and PRINT sent to /ksql; and
a PRINT that fails mid-stream ending its answer with an error line, and one whose consumer
cannot be assigned closing it (with stand-ins for the reader and the consumer)."""

from __future__ import annotations

import asyncio
import json
import logging
import struct
from collections.abc import Callable

import httpx
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from metastore.kafka import topic_printer
from metastore.kafka.exceptions import KafkaClientError
from metastore.kafka.settings import KafkaSettings
from metastore.server.http.concurrency import Lane, LaneThreads
from metastore.server.http.streaming import print_chunks
from tests.server.test_rest_api import ksql
from tests.support.servers import ServerProcess


def _print(server: ServerProcess, text: str) -> httpx.Response:
    return httpx.post(f"{server.url}/query", json={"ksql": text}, timeout=60)


def _produce(producer: Producer, topic: str, count: int, first: int = 0) -> None:
    for index in range(first, first + count):
        producer.produce(topic, key=struct.pack(">i", index),
                         value=json.dumps({"NUMBER": index}).encode(), timestamp=1_600_000_000_000)
    producer.flush(10)


def test_print_from_beginning_with_interval_and_limit(
        server: ServerProcess, topic_factory: Callable[..., str],
        producer_factory: Callable[..., Producer]) -> None:
    topic = topic_factory(partitions=1, prefix="print")
    _produce(producer_factory(), topic, 5)
    response = _print(server, f"PRINT '{topic}' FROM BEGINNING INTERVAL 2 LIMIT 2;")
    assert response.status_code == 200, response.text
    lines = [line for line in response.text.splitlines() if line]
    assert lines[0].startswith("Key format: KAFKA_INT")
    assert lines[1] == "Value format: JSON or KAFKA_STRING"
    assert lines[2:] == [
        'rowtime: 2020/09/13 12:26:40.000 Z, key: 0, value: {"NUMBER": 0}, partition: 0',
        'rowtime: 2020/09/13 12:26:40.000 Z, key: 2, value: {"NUMBER": 2}, partition: 0']


def test_print_from_the_end_sees_records_produced_while_it_runs(
        server: ServerProcess, topic_factory: Callable[..., str],
        producer_factory: Callable[..., Producer]) -> None:
    topic = topic_factory(partitions=2, prefix="print-live")
    producer = producer_factory()
    _produce(producer, topic, 3)
    with httpx.stream("POST", f"{server.url}/query", timeout=60,
                      json={"ksql": f"PRINT '{topic}' LIMIT 1;"}) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        assert next(lines) == "", "a heartbeat line before any record"
        _produce(producer, topic, 1, first=10)
        received = [line for line in lines if line]
    assert received[-1].startswith("rowtime: 2020/09/13 12:26:40.000 Z, key: 10, value: ")
    assert len([line for line in received if line.startswith("rowtime")]) == 1


def test_print_errors_are_ksqldbs(plain_node: ServerProcess) -> None:
    missing = _print(plain_node, "PRINT 'no-such-topic';")
    assert missing.status_code == 400 and missing.json()["error_code"] == 40000
    assert missing.json()["message"].startswith(
        "Could not find topic 'no-such-topic', or the KSQL user does not have permissions to "
        "list the topic. Topic names are case-sensitive.")
    reserved = _print(plain_node, "PRINT '__consumer_offsets';")
    assert reserved.status_code == 400 and reserved.json()["error_code"] == 40001
    sent_to_ksql = ksql(plain_node, "PRINT 'x';")
    assert sent_to_ksql.status_code == 400 and sent_to_ksql.json()["error_code"] == 40002


def test_the_cli_prints_a_topic(plain_node: ServerProcess, topic_factory: Callable[..., str],
                                producer_factory: Callable[..., Producer]) -> None:
    from tests.server.test_cli import cli

    topic = topic_factory(partitions=1, prefix="print-cli")
    _produce(producer_factory(), topic, 2)
    printed = cli("query", f"PRINT '{topic}' FROM BEGINNING LIMIT 2;", "--server", plain_node.url,
                  "--json")
    assert printed.returncode == 0, printed.stderr
    lines = [json.loads(line) for line in printed.stdout.splitlines()]
    assert [line.split(", value")[0] for line in lines if line.startswith("rowtime")] == [
        "rowtime: 2020/09/13 12:26:40.000 Z, key: 0", "rowtime: 2020/09/13 12:26:40.000 Z, key: 1"]
    session = cli("shell", "--server", plain_node.url,
                  stdin=f"PRINT '{topic}' FROM BEGINNING LIMIT 1;\nPRINT 'nope';\nexit\n")
    assert session.returncode == 0, session.stderr
    assert "Value format: JSON or KAFKA_STRING" in session.stdout
    assert "Error 40000: Could not find topic 'nope'" in session.stdout


class FailingPrinter:
    """A PRINT's reader that gives one line, then fails with ``error``."""

    topic = "t"
    done = False

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.polls = 0

    def poll(self, timeout: float) -> list[str]:
        self.polls += 1
        if self.polls > 1:
            raise self.error
        return ["Key format: KAFKA_INT"]


async def _chunks(printer: FailingPrinter) -> list[bytes]:
    return [chunk async for chunk in print_chunks(printer, LaneThreads(dict.fromkeys(Lane, 2)))]


def test_a_print_that_fails_mid_stream_ends_with_an_error_line(
        caplog: pytest.LogCaptureFixture) -> None:
    """The answer has started (200, lines sent): a failure ends it with a line, never a 500."""
    typed = asyncio.run(_chunks(FailingPrinter(KafkaClientError("reading t failed: gone"))))
    assert typed == [b"Key format: KAFKA_INT\n", b"reading t failed: gone\n"]
    with caplog.at_level(logging.ERROR, logger="metastore.server.http.streaming"):
        unexpected = asyncio.run(_chunks(FailingPrinter(OverflowError("secret detail"))))
    assert unexpected[0] == b"Key format: KAFKA_INT\n" and len(unexpected) == 2
    line = unexpected[1].decode()
    assert line.startswith("Internal error (incident ") and line.endswith(
        "); the node's log has the details\n")
    assert "secret" not in line and "secret detail" in caplog.text


class UnassignableConsumer:
    """A consumer whose ``assign`` fails with ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.closed = False

    def assign(self, partitions: object) -> None:
        raise self.error

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("error", [KafkaException(KafkaError(KafkaError._STATE, "Erroneous state")),
                                   RuntimeError("unexpected")])
def test_a_printer_whose_consumer_cannot_be_assigned_closes_it(
        monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    consumer = UnassignableConsumer(error)
    monkeypatch.setattr(topic_printer, "create_client", lambda kind, config: consumer)
    expected = KafkaClientError if isinstance(error, KafkaException) else RuntimeError
    with pytest.raises(expected) as raised:
        topic_printer.TopicPrinter(KafkaSettings("127.0.0.1:1"), "t", 2)
    assert consumer.closed, "the consumer leaked"
    if expected is KafkaClientError:
        assert str(raised.value).startswith("reading t failed: its partitions could not be "
                                            "assigned: ")
