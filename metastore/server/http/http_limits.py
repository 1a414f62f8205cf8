"""The bounds the REST edge puts on what one client may cost a node, and JSON nesting checks.

:class:`HttpLimits` gathers every HTTP-level bound in one place: body size, how long a client may
take to send a body, JSON nesting, keep-alive and concurrent requests (passed to the HTTP server), and
failed logins. The defaults are what a production operator would pick for a node behind a load
balancer; an operator changes them with ``metastore server --http-limit NAME=VALUE``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}"]', re.DOTALL)
"""A whole string (skipped as one token), a bracket, or an unterminated string's quote."""


@dataclass(frozen=True)
class HttpLimits:
    """What one HTTP client may cost a node; every bound is checked before any work is done."""

    max_body_bytes: int = 1 << 20
    """Bytes of one request body (413 above it); a script of 1000 statements fits easily."""
    body_timeout_seconds: float = 30.0
    """Time a client has to send a whole request body, from the first byte read (408 after it)."""
    body_idle_timeout_seconds: float = 10.0
    """Longest pause between two chunks of a body (408 after it): stops slow-drip clients early."""
    max_json_depth: int = 64
    """Nesting of arrays and objects in a request body; a ksqlDB request needs fewer than 5."""
    keep_alive_seconds: int = 5
    """How long the HTTP server keeps an idle keep-alive connection open between requests."""
    max_concurrency: int = 1000
    """HTTP requests in flight (streams included) in each lane: health, statements, inserts,
    queries (:mod:`metastore.server.http.concurrency`); the node answers 503 above it."""
    max_requests_per_client: int = 100
    """HTTP requests one client (a basic-auth user, or an address without authentication) may
    have in flight in each lane but health's (429 above it): streams (push queries, inserts
    streams) hold theirs until they end; ``/close-query`` is never refused for them. Behind a
    proxy without authentication every client is the proxy's address: raise it there."""
    statement_threads: int = 32
    """Threads that serve /ksql requests (their waits for the log)."""
    insert_threads: int = 16
    """Threads that write the rows of /inserts-stream requests."""
    stream_write_timeout_seconds: float = 60.0
    """How long a streamed answer (a push query, PRINT) waits for its client to take the next
    chunk; a client that reads nothing for that long is disconnected and its query closed."""
    inserts_idle_timeout_seconds: float = 300.0
    """How long an inserts stream may go without a row before it is ended (with an error row)."""
    query_threads: int = 32
    """Threads that serve pull and push queries."""
    health_threads: int = 4
    """Threads that serve /healthcheck, /info, /status, /clusterStatus and /metrics."""
    max_failed_logins: int = 10
    """Failed basic-auth attempts for one user, within the window, before that user is locked
    out (other users behind the same address are not)."""
    max_failed_users_per_address: int = 20
    """Distinct users failing from one address, within the window, before the address is locked
    out (password spraying)."""
    failed_login_window_seconds: float = 60.0
    """The window in which failed logins are counted."""
    login_lockout_seconds: float = 60.0
    """How long a locked-out user or address is answered 429, even with good credentials."""
    max_tracked_clients: int = 10_000
    """Users, and as many addresses, whose failed logins are remembered (oldest forgotten
    first)."""

    def __post_init__(self) -> None:
        for spec in fields(self):
            if getattr(self, spec.name) <= 0:
                raise ValueError(f"{spec.name} must be positive")

    @staticmethod
    def from_settings(values: Mapping[str, object]) -> HttpLimits:
        """Limits from ``NAME: value`` pairs (strings or numbers), the rest at their defaults."""
        defaults = HttpLimits()
        known = {spec.name for spec in fields(HttpLimits)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown HTTP limit(s) {', '.join(unknown)}; known: "
                             f"{', '.join(sorted(known))}")
        converted: dict[str, Any] = {}  # int or float, per field
        for name, value in values.items():
            kind = int if isinstance(getattr(defaults, name), int) else float
            try:
                converted[name] = kind(str(value))
            except ValueError as error:
                raise ValueError(f"{name}: expected {'an integer' if kind is int else 'a number'}"
                                 f", got {value!r}") from error
        return replace(defaults, **converted)


class JsonTooDeepError(ValueError):
    """A JSON text nests arrays and objects deeper than allowed."""


def check_json_depth(text: str, max_depth: int) -> None:
    """Raise :class:`JsonTooDeepError` when ``text`` nests deeper than ``max_depth``.

    The scan is linear and iterative (strings are skipped whole), so it is safe on any input;
    text that is not valid JSON either passes or fails here and is then refused by the decoder.
    """
    depth = 0
    for token in _JSON_TOKENS.finditer(text):
        bracket = token.group()
        if bracket in ("[", "{"):
            depth += 1
            if depth > max_depth:
                raise JsonTooDeepError(f"arrays and objects nested deeper than {max_depth} levels")
        elif bracket in ("]", "}"):
            depth -= 1
        elif bracket == '"':
            return


def _not_json(constant: str) -> object:
    raise ValueError(f"{constant} is not a JSON number")


def decode_json(body: bytes, max_depth: int,
                parse_float: Callable[[str], object] | None = None) -> object:
    """Decode a JSON request body (UTF-8, -16 or -32, as :func:`json.loads`) of bounded depth.

    Raises :class:`ValueError` (including :class:`UnicodeDecodeError` and
    :class:`JsonTooDeepError`) for anything that is not acceptable JSON, ``NaN`` and
    ``Infinity`` among them (Python reads them; JSON, and ksqlDB, do not).
    """
    text = body.decode(json.detect_encoding(body))
    check_json_depth(text, max_depth)
    try:
        return json.loads(text, parse_float=parse_float, parse_constant=_not_json)
    except RecursionError as error:
        raise JsonTooDeepError("arrays and objects nested too deeply") from error


__all__ = ["HttpLimits", "JsonTooDeepError", "check_json_depth", "decode_json"]
