"""A Schema Registry that drips, answers garbage or answers too much: each call ends within the
client's deadline as the registry's error (503, ksqlDB's shape), never as a node failure."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest

from metastore.api.error_codes import classify
from metastore.schema_registry.client import MAX_ANSWER_BYTES, SchemaRegistryClient
from metastore.schema_registry.exceptions import (
    SchemaRegistryAccessError,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
)


class Misbehaving(http.server.BaseHTTPRequestHandler):
    """``/drip/...`` sends a byte of its body every 0.5 s, ``/slowheaders/...`` a header
    every 0.5 s, ``/garbage/...`` a 200 that is not JSON,
    ``/huge/...`` more than the client takes, ``/<status>/...`` that status."""

    def do_GET(self) -> None:
        mode = self.path.split("/")[1]
        if mode.isdigit():
            self.send_response(int(mode))
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error_code": ' + mode.encode() + b'01, "message": "no"}')
            return
        if mode == "slowheaders":
            self._drip_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        try:
            if mode == "drip":
                for _ in range(60):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.5)
            elif mode == "garbage":
                self.wfile.write(b"<html>gateway says no</html>")
            else:
                block = b" " * 65536
                for _ in range(MAX_ANSWER_BYTES // len(block) + 8):
                    self.wfile.write(block)
        except OSError:  # the client gave up, as it should
            pass

    def _drip_headers(self) -> None:
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            for index in range(60):
                self.wfile.write(f"X-Drip-{index}: a\r\n".encode())
                self.wfile.flush()
                time.sleep(0.5)
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def registry_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Misbehaving)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("mode", "says"), [
    ("drip", "did not answer within 2s"),
    ("slowheaders", "did not answer within 2s"),
    ("garbage", "not JSON"),
    ("huge", f"more than {MAX_ANSWER_BYTES} bytes"),
])
def test_a_misbehaving_registry_is_the_registrys_error_within_the_deadline(
        registry_url: str, mode: str, says: str) -> None:
    client = SchemaRegistryClient(f"{registry_url}/{mode}", timeout=2.0)
    started = time.monotonic()
    with pytest.raises(SchemaRegistryUnavailableError, match=says) as raised:
        client.latest("orders-value")
    assert time.monotonic() - started < 4.5
    answer = classify(raised.value)
    assert (answer.http_status, answer.code) == (503, 50300)
    client.close()


@pytest.mark.parametrize(("status", "error", "answer"), [
    (429, SchemaRegistryUnavailableError, (503, 50300)),
    (408, SchemaRegistryUnavailableError, (503, 50300)),
    (401, SchemaRegistryAccessError, (500, 50000)),
    (422, SchemaRegistryError, (400, 40001)),
])
def test_a_refusal_is_the_statements_unless_it_is_the_nodes_or_passes(
        registry_url: str, status: int, error: type[SchemaRegistryError],
        answer: tuple[int, int]) -> None:
    client = SchemaRegistryClient(f"{registry_url}/{status}", timeout=2.0)
    with pytest.raises(error) as raised:
        client.latest("orders-value")
    assert type(raised.value) is error
    classified = classify(raised.value)
    assert (classified.http_status, classified.code) == answer
    client.close()
