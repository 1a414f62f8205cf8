"""Forwarding a write to the service's writer, against a real HTTP server on localhost: which
node is the writer, which answers are its verdict, and which failures leave the request to be
written here."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from metastore.cluster.membership import Heartbeat
from metastore.server.http.forwarding import (
    FORWARD_BUDGET,
    FORWARDED_BY,
    ForwardingSettings,
    WriteForwarder,
    forwarded_budget,
)


class Writer(ThreadingHTTPServer):
    """Answers POST /ksql with ``status`` and ``body`` after ``delay`` seconds; keeps what it
    was sent."""

    status = 200
    body: bytes = b"[]"
    delay = 0.0

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: list[tuple[dict[str, str], Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that timed out closed the connection: nothing to report."""


class _Handler(BaseHTTPRequestHandler):
    server: Writer

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        payload = json.loads(self.rfile.read(length))
        self.server.received.append(({k.lower(): v for k, v in self.headers.items()}, payload))
        time.sleep(self.server.delay)
        self.send_response(self.server.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def writer() -> Iterator[Writer]:
    server = Writer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def beat(node_id: str, url: str, state: str = "READY") -> Heartbeat:
    return Heartbeat(node_id, url, state, 0, 0)


def forwarder(last_writer: str | None, nodes: list[tuple[Heartbeat, bool]],
              enabled: bool = True, timeout: float = 5.0) -> WriteForwarder:
    return WriteForwarder("node-2", "http://127.0.0.1:1", lambda: last_writer, lambda: nodes,
                          ForwardingSettings(enabled=enabled, timeout=timeout))


def test_the_writer_is_the_node_that_wrote_last_when_another_alive_ready_and_reachable() -> None:
    alive = [(beat("node-1", "http://127.0.0.1:8088"), True)]
    assert forwarder("node-1", alive).writer_url() == "http://127.0.0.1:8088"
    assert forwarder(None, alive).writer_url() is None, "nothing written yet: write here"
    assert forwarder("node-2", alive).writer_url() is None, "this node is the writer"
    assert forwarder("node-1", alive, enabled=False).writer_url() is None
    assert forwarder("node-1", [(beat("node-1", "http://127.0.0.1:8088"), False)]) \
        .writer_url() is None, "not alive"
    assert forwarder("node-1", [(beat("node-1", "http://127.0.0.1:8088", "CATCHING_UP"),
                                 True)]).writer_url() is None
    for url in ("http://0.0.0.0:8088", "http://[::]:8088", "http://127.0.0.1:1", "nonsense",
                "http://127.0.0.1:99999"):
        assert forwarder("node-1", [(beat("node-1", url), True)]).writer_url() is None, url


def test_a_verdict_is_relayed_with_the_clients_credentials_and_the_forwarded_mark(
        writer: Writer) -> None:
    writer.body = json.dumps([{"@type": "currentStatus", "commandSequenceNumber": 7},
                              {"@type": "currentStatus", "commandSequenceNumber": 9}]).encode()
    sender = forwarder("node-1", [])
    answer = sender.forward(writer.url, {"ksql": "CREATE ...;", "requestId": "r-1"},
                            {"authorization": "Basic YWxpY2U6czNjcmV0"})
    assert answer is not None and answer.status == 200 and answer.newest_sequence_number == 9
    [(headers, payload)] = writer.received
    assert headers[FORWARDED_BY] == "node-2" and headers["authorization"].startswith("Basic ")
    assert payload == {"ksql": "CREATE ...;", "requestId": "r-1"}
    assert forwarded_budget(headers) == 4.0, "the writer gives up before this node does"
    writer.status, writer.body = 400, b'{"@type": "statement_error", "message": "exists"}'
    refused = sender.forward(writer.url, {"ksql": "x"}, {})
    assert refused is not None and refused.status == 400 and refused.newest_sequence_number is None
    assert sender.stats.forwarded == 2 and sender.stats.written_here == 0


def test_a_refusal_of_the_user_is_a_verdict_a_headless_writers_403_is_not(
        writer: Writer) -> None:
    sender = forwarder("node-1", [])
    writer.status, writer.body = 403, json.dumps({
        "@type": "generic_error", "error_code": 40301,
        "message": "Authorization denied to Write on topic(s): [t]"}).encode()
    refused = sender.forward(writer.url, {"ksql": "x"}, {})
    assert refused is not None and refused.status == 403, "no other node may write it"
    writer.body = json.dumps({"@type": "generic_error", "error_code": 40300,
                              "message": "This node runs in headless mode"}).encode()
    assert sender.forward(writer.url, {"ksql": "x"}, {}) is None
    assert (sender.stats.forwarded, sender.stats.written_here) == (1, 1)


@pytest.mark.parametrize("status", [500, 503, 401, 429])
def test_any_other_answer_leaves_the_request_to_be_written_here(
        writer: Writer, status: int) -> None:
    writer.status = status
    sender = forwarder("node-1", [])
    assert sender.forward(writer.url, {"ksql": "x"}, {}) is None
    assert sender.stats.written_here == 1


@pytest.mark.serial  # measures the machine: alone, after the parallel phase
def test_failures_without_an_answer_leave_the_request_to_be_written_here(
        writer: Writer) -> None:
    sender = forwarder("node-1", [], timeout=0.3)
    writer.body = b"not json"
    assert sender.forward(writer.url, {"ksql": "x"}, {}) is None
    writer.body, writer.delay = b"[]", 1.0
    started = time.monotonic()
    assert sender.forward(writer.url, {"ksql": "x"}, {}) is None, "timed out"
    assert time.monotonic() - started < 0.9
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert sender.forward(f"http://127.0.0.1:{port}", {"ksql": "x"}, {}) is None, "refused"
    writer.delay = 0.0
    sent = len(writer.received)
    payload = {"ksql": "x", "sessionVariables": {"v": float("inf")}}
    assert sender.forward(writer.url, payload, {}) is None, "not JSON: not sent"
    assert len(writer.received) == sent
    assert sender.stats.written_here == 4 and sender.stats.forwarded == 0
    lone = sender.forward(writer.url, {"ksql": "-- \ud800"}, {})  # escaped, as JSON allows
    assert lone is not None and writer.received[-1][1] == {"ksql": "-- \ud800"}


def test_the_writers_budget_is_read_from_the_forwarded_request_only_when_well_formed() -> None:
    assert forwarder("node-1", [], timeout=1.0)._client.timeout.read == 1.0
    assert forwarded_budget({FORWARD_BUDGET: "2500"}) == 2.5
    for bad in ("", "0", "-5", "1e3", "٣", "9999999999", "2.5"):
        assert forwarded_budget({FORWARD_BUDGET: bad}) is None, bad
    assert forwarded_budget({}) is None
