"""A Schema Registry that misbehaves, for the tests and the ``abuse`` benchmark: it drips its
body or its headers, answers garbage, answers more than the client takes, or answers a status.
Its first path segment says which (:class:`Misbehaving`)."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from metastore.schema_registry.client import MAX_ANSWER_BYTES

MODES = ("drip", "slowheaders", "garbage", "huge")


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


@contextmanager
def misbehaving_registry() -> Iterator[str]:
    """The base URL of a :class:`Misbehaving` registry, served until the block ends."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Misbehaving)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
