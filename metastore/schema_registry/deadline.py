"""A whole HTTP call's deadline, which httpx does not keep: its timeouts bound each read, so a
server that sends its status line and headers a byte at a time holds a call for as long as it
likes. :class:`CallDeadline` shuts the call's own connection down when the deadline passes,
which ends the blocked read at once."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Any

import httpx

CONNECTED = ("connection.connect_tcp.complete", "connection.start_tls.complete")
"""httpcore's trace events that carry the call's new network stream."""


class CallDeadline:
    """Use as a context around one call made with ``extensions={"trace": deadline.trace}`` on
    a client that keeps no idle connections (:func:`one_connection_per_call`), so every call
    opens the connection it may shut down."""

    def __init__(self, seconds: float) -> None:
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._ended = False
        self.expired = False
        """Whether the deadline passed before the call ended."""

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event not in CONNECTED:
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        with self._lock:
            self._socket = sock if isinstance(sock, socket.socket) else None
            if self.expired:
                self._shut_down()

    def _expire(self) -> None:
        with self._lock:
            if self._ended:  # the call ended in time: a complete answer is not late
                return
            self.expired = True
            self._shut_down()

    def _shut_down(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):  # already closed
                self._socket.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> CallDeadline:
        self._timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        with self._lock:
            self._ended = True
        self._timer.cancel()


def one_connection_per_call() -> httpx.Limits:
    """A client's limits under which each call opens its own connection."""
    return httpx.Limits(max_keepalive_connections=0)
