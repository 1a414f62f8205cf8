"""POST /inserts-stream of a real node process, over HTTP/2 (cleartext, as ksqlDB's clients
speak it) and HTTP/1.1: each row acknowledged once Kafka has it, the first bad row ending the
stream with ksqlDB's error, and rows read as they arrive (a client may wait for each ack). Which
rows are bad (blank lines, numbers JSON or BIGINT cannot hold) is tested on the exchange alone,
with a stand-in node."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import struct
from collections.abc import Callable
from decimal import Decimal
from urllib.parse import urlsplit

import httpx
from confluent_kafka import Consumer, Message

from metastore.catalog.model import DataSource
from metastore.server.http.answers import failure
from metastore.server.http.concurrency import Lane, LaneThreads
from metastore.server.http.http_limits import HttpLimits
from metastore.server.http.inserts_stream import InsertsStreamResponse
from metastore.testing.check import run_script
from tests.server.test_rest_api import ksql
from tests.support.kafka import unique
from tests.support.servers import ServerProcess


def _records(consumer: Consumer, expected: int) -> list[Message]:
    found: list[Message] = []
    for _ in range(100):
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            found.append(message)
        if len(found) >= expected:
            for _ in range(5):  # nothing more than expected arrives
                extra = consumer.poll(0.1)
                if extra is not None and extra.error() is None:
                    found.append(extra)
            break
    return found


def _lines(body: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in body.decode().splitlines() if line.strip()]


def test_rows_streamed_over_http2_are_acknowledged_and_written(
        server: ServerProcess, consumer_factory: Callable[..., Consumer]) -> None:
    topic = unique("inserts")
    created = ksql(server, f"CREATE STREAM INS (ID INT KEY, V STRING, D DECIMAL(4,2), "
                           f"S STRUCT<A INT>, B BYTES) WITH (KAFKA_TOPIC='{topic}', "
                           "VALUE_FORMAT='JSON', PARTITIONS=1);")
    assert created.status_code == 200, created.text
    rows = [{"id": 1, "v": "a", "d": 1.5, "s": {"a": 7}, "b": base64.b64encode(b"hi").decode()},
            {"ID": 2, "`v`": "ignored: quoted, it names column v, not V", "V": "b"},
            {"ID": "three"},
            {"ID": 4, "V": "never read"}]
    body = "\n".join(json.dumps(row) for row in [{"target": "ins"}, *rows]).encode()
    with httpx.Client(http2=True, http1=False, timeout=60) as client:
        response = client.post(f"{server.url}/inserts-stream", content=body)
    assert response.http_version == "HTTP/2"
    assert response.status_code == 200, response.text
    assert _lines(response.content) == [
        {"status": "ok", "seq": 0}, {"status": "ok", "seq": 1},
        {"status": "error", "seq": 2, "error_code": 40000,
         "message": "Can't coerce a field of type class java.lang.String into type INTEGER"}]
    written = _records(consumer_factory(topic), 2)
    assert [(m.key(), json.loads(m.value(), parse_float=Decimal)) for m in written] == [
        (struct.pack(">i", 1), {"V": "a", "D": Decimal("1.50"), "S": {"A": 7}, "B": "aGk="}),
        (struct.pack(">i", 2), {"V": "b", "D": None, "S": None, "B": None})]


def test_a_bad_target_is_refused_before_the_stream_starts(plain_node: ServerProcess) -> None:
    ksql(plain_node, "CREATE STREAM KNOWN (ID INT KEY, V STRING) WITH (KAFKA_TOPIC="
                 f"'{unique('known')}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    with httpx.Client(http2=True, http1=False, timeout=60) as client:
        unknown = client.post(f"{plain_node.url}/inserts-stream",
                              content=b'{"target": "known2"}\n{"ID": 1}')
        garbled = client.post(f"{plain_node.url}/inserts-stream", content=b"not json\n")
        no_key = client.post(f"{plain_node.url}/inserts-stream",
                             content=b'{"target": "known"}\n{"V": "x"}\n')
        twice = client.post(f"{plain_node.url}/inserts-stream",
                            content=b'{"target": "known"}\n{"ID": 1, "V": "x", "v": "y"}\n')
    assert unknown.status_code == 400, unknown.text
    assert unknown.json()["error_code"] == 40001
    assert unknown.json()["message"].startswith(
        "Cannot insert values into an unknown stream/table: `KNOWN2`")
    assert garbled.status_code == 400 and garbled.json()["error_code"] == 40000
    assert _lines(no_key.content) == [{"status": "error", "seq": 0, "error_code": 40000,
                                       "message": "Key field must be specified: ID"}]
    assert _lines(twice.content) == [{"status": "error", "seq": 0, "error_code": 40000,
                                      "message": "Found duplicate column / struct field name: V"}]


def test_http1_json_answer_is_one_array(plain_node: ServerProcess,
                                        consumer_factory: Callable[..., Consumer]) -> None:
    topic = unique("inserts-json")
    ksql(plain_node, f"CREATE TABLE INT1 (K STRING PRIMARY KEY, N BIGINT) WITH (KAFKA_TOPIC="
                 f"'{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    body = b'{"target":"INT1"}\n{"K":"x","N":5}\n{"K":"y","N":6}\n'
    response = httpx.post(f"{plain_node.url}/inserts-stream", content=body,
                          headers={"Accept": "application/json"}, timeout=60)
    assert response.http_version == "HTTP/1.1"
    assert response.json() == [{"status": "ok", "seq": 0}, {"status": "ok", "seq": 1}]
    written = _records(consumer_factory(topic), 2)
    assert [(m.key(), json.loads(m.value())) for m in written] == [
        (b"x", {"N": 5}), (b"y", {"N": 6})]


def test_rows_are_acknowledged_while_the_body_is_still_open(plain_node: ServerProcess) -> None:
    """A client waiting for each ack before it sends the next row (ksqlDB's Java client does)."""
    ksql(plain_node, "CREATE STREAM LIVE (ID INT KEY, V STRING) WITH (KAFKA_TOPIC="
                 f"'{unique('live')}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    address = urlsplit(plain_node.url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(b"POST /inserts-stream HTTP/1.1\r\nHost: test\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")

        def chunk(data: bytes) -> None:
            sock.sendall(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        chunk(b'{"target":"LIVE"}\n{"ID":1,"V":"a"}\n')
        received = b""
        while b'"seq":0' not in received:
            received += sock.recv(65536)
        assert received.startswith(b"HTTP/1.1 200"), received
        chunk(b'{"ID":2,"V":"b"}\n')
        while b'"seq":1' not in received:
            received += sock.recv(65536)
        sock.sendall(b"0\r\n\r\n")
        while not received.endswith(b"0\r\n\r\n"):
            more = sock.recv(65536)
            assert more, "the connection closed before the response ended"
            received += more
    assert b'{"status":"error"' not in received


class StandInNode:
    """The node's side of an inserts stream: one target, and the rows it would write."""

    def __init__(self) -> None:
        _, image = run_script("CREATE STREAM T (ID INT KEY, B BIGINT, F DOUBLE) WITH "
                              "(KAFKA_TOPIC='t', VALUE_FORMAT='JSON', PARTITIONS=1);")
        self.source = image.sources["T"]
        self.written: list[dict[str, object]] = []

    def insert_target(self, name: str, user: str | None = None) -> DataSource:
        assert name == "T" and user is None, "no authentication here"
        return self.source

    def insert_row(self, source: DataSource, row: dict[str, object], timestamp_ms: int) -> int:
        self.written.append(row)
        return len(self.written) - 1


def _exchange(node: StandInNode, body: bytes, limits: HttpLimits | None = None,
              then_silent: bool = False) -> list[dict[str, object]]:
    """The answer lines to ``body``, sent in one piece (``then_silent``: as the body's first
    part, the client then sending nothing more and staying connected)."""
    received = [{"type": "http.request", "body": body, "more_body": then_silent}]
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        if not received and then_silent:
            await asyncio.Event().wait()
        return received.pop(0) if received else {"type": "http.disconnect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    answer = InsertsStreamResponse(node, limits or HttpLimits(), True, failure, lambda: 1,
                                   LaneThreads(dict.fromkeys(Lane, 2)))
    asyncio.run(answer({"type": "http"}, receive, send))
    assert sent[0]["status"] == 200
    return _lines(b"".join(m.get("body", b"") for m in sent[1:]))


def test_numbers_json_or_bigint_cannot_hold_are_refused_row_by_row() -> None:
    """ksqlDB reads rows as JSON, which has no NaN or Infinity, and a BIGINT is a Java long:
    such a row is answered with its error and nothing of it is written."""
    for row, message in [
        (b'{"ID": 2, "F": NaN}', "Invalid JSON in inserts stream"),
        (b'{"ID": 2, "F": Infinity}', "Invalid JSON in inserts stream"),
        (b'{"ID": 2, "F": -Infinity}', "Invalid JSON in inserts stream"),
        (b'{"ID": 2, "B": 9223372036854775808}',
         "Can't coerce a field of type class java.math.BigInteger into type BIGINT"),
        (b'{"ID": 2, "B": -9223372036854775809}',
         "Can't coerce a field of type class java.math.BigInteger into type BIGINT"),
        (b'{"ID": 2, "F": 1e999}', "Can't coerce a field of type class java.lang.Double "
                                   "into type DOUBLE")]:
        node = StandInNode()
        body = b'{"target": "T"}\n{"ID": 1, "B": 9223372036854775807}\n' + row + b'\n{"ID": 3}\n'
        assert _exchange(node, body) == [
            {"status": "ok", "seq": 0},
            {"status": "error", "seq": 1, "error_code": 40000, "message": message}], row
        assert node.written == [{"ID": 1, "B": 2**63 - 1, "F": None}], row


def test_a_stream_without_a_row_for_its_idle_timeout_is_ended_with_an_error_row() -> None:
    node = StandInNode()
    limits = HttpLimits(inserts_idle_timeout_seconds=0.2)
    assert _exchange(node, b'{"target": "T"}\n{"ID": 1}\n', limits, then_silent=True) == [
        {"status": "ok", "seq": 0},
        {"status": "error", "seq": 1, "error_code": 40800,
         "message": "No row arrived within 0.2 s; the inserts stream is closed (open a new one "
                    "to go on)"}]
    assert node.written == [{"ID": 1, "B": None, "F": None}]


def test_a_blank_line_is_an_invalid_row_but_the_final_newline_is_not() -> None:
    """ksqlDB splits the body at each newline and reads every part but the one after the last
    newline as a row: a blank line is invalid JSON."""
    node = StandInNode()
    assert _exchange(node, b'{"target": "T"}\n{"ID": 1}\n') == [{"status": "ok", "seq": 0}]
    for blank in (b"", b"  ", b"\r"):
        node = StandInNode()
        body = b'{"target": "T"}\n{"ID": 1}\n' + blank + b'\n{"ID": 2}\n'
        assert _exchange(node, body) == [
            {"status": "ok", "seq": 0},
            {"status": "error", "seq": 1, "error_code": 40000,
             "message": "Invalid JSON in inserts stream"}], blank
        assert len(node.written) == 1


def test_early_answers_keep_the_http2_connection(plain_node: ServerProcess) -> None:
    """A refusal sent while the client still sends its body used to let Hypercorn meet data for
    a closed stream and drop the connection, with every stream on it (about two connections in
    three of these broke before the body was drained first)."""
    for _ in range(4):  # connections
        with httpx.Client(http2=True, http1=False, timeout=60) as client:
            for _ in range(40):
                garbled = client.post(f"{plain_node.url}/inserts-stream",
                                      content=b"not json\n" + b'{"x": 1}\n' * 50)
                unknown = client.post(f"{plain_node.url}/inserts-stream",
                                      content=b'{"target": "nope"}\n{"ID": 1}')
                assert (garbled.status_code, unknown.status_code) == (400, 400)
