"""Write requests forwarded to the service's current writer, so that nodes do not fence each other.

Every write makes its node the writer: a node whose producer is not the newest epoch calls
``init_transactions()``, which fences the node that wrote before, and that node pays the same
when it writes next (and up to 500 ms more when it meets the other's transaction still
completing). With clients on every node, writes alternate and each one pays. So a node that did
not write the newest command record sends a write request to the node that did (its origin
node, alive and READY in the membership heartbeats) over that node's REST API, where it joins
that writer's queue and group commit; the writer keeps its producer.

The request goes with its request id (one is drawn when the client sent none): a forward that
fails without an answer (refused, timed out, connection lost, a payload that cannot be sent as
JSON), or is answered with anything but a verdict on the statements (:data:`VERDICTS`), is
written here instead, and the request id keeps it from being written twice if the writer did
write it. A writer whose advertised URL is this node's own, or a wildcard address
(``0.0.0.0``), is not forwarded to. A forwarded request carries the
:data:`FORWARDED_BY` header and is never forwarded again. The writer's answer is given once
this node has applied its records, so a client reads its own writes on the node it asked.

The writer takes a forwarded request for less time than the forwarding node waits for it
(:data:`FORWARD_BUDGET`), so once the forward has failed the writer no longer writes it: the
forwarding node's own attempt fences a transaction still committing. A request that a failed
forward may have delivered and that this node then does not write is answered "outcome
unknown", never "not written": a retry with its request id learns the outcome.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from metastore.cluster.membership import Heartbeat

log = logging.getLogger(__name__)

FORWARDED_BY = "x-metastore-forwarded-by"
"""The header that marks a forwarded request (its value: the forwarding node's id)."""
FORWARD_BUDGET = "x-metastore-forward-budget-ms"
"""The header with the milliseconds the writer may take for a forwarded request: less than the
forwarding node waits, so that a request the forwarding node gives up on (and writes itself) is
never written later by the writer."""
BUDGET_MARGIN = 1.0
"""Seconds of the forward timeout kept from the writer (its answer must reach the forwarder)."""
VERDICTS = frozenset({200, 400, 404, 417})
"""The writer's answers that are the request's outcome (417: a failed ASSERT; and a 403 that
refuses the user, :data:`REFUSED_FOR_THE_USER`); any other is written here instead."""
REFUSED_FOR_THE_USER = "Authorization denied to "
"""How a 403 that refuses the request's user (a topic: 40301; a connector: 40300) begins: its
outcome, which no other node may overturn (a headless writer's 403 is not one)."""
_WILDCARDS = frozenset({"0.0.0.0", "::"})


def _is_verdict(response: httpx.Response) -> bool:
    if response.status_code in VERDICTS:
        return True
    if response.status_code != 403:
        return False
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and str(body.get("message", "")).startswith(
        REFUSED_FOR_THE_USER)


@dataclass(frozen=True)
class ForwardingSettings:
    enabled: bool = True
    timeout: float = 5.0
    """Seconds a forward may take before the request is written here instead."""


@dataclass(frozen=True)
class Forwarded:
    """The writer's answer to a forwarded request."""

    status: int
    content: Any
    """The answer's JSON."""

    @property
    def newest_sequence_number(self) -> int | None:
        """The newest ``commandSequenceNumber`` the answer gives, if any."""
        entities = self.content if isinstance(self.content, list) else []
        numbers = [entity.get("commandSequenceNumber") for entity in entities
                   if isinstance(entity, dict)]
        found = [n for n in numbers if isinstance(n, int)]
        return max(found) if found else None


class ForwardingStats:
    """Counters, updated from the request threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.forwarded = 0
        self.written_here = 0
        """Forwards that failed, and were written on this node instead."""

    def count(self, forwarded: bool) -> None:
        with self._lock:
            if forwarded:
                self.forwarded += 1
            else:
                self.written_here += 1


Nodes = Callable[[], list[tuple[Heartbeat, bool]]]


class WriteForwarder:
    """Sends a write request to the service's current writer when that is another node."""

    def __init__(self, node_id: str, own_url: str, last_writer: Callable[[], str | None],
                 nodes: Nodes, settings: ForwardingSettings | None = None,
                 verify: ssl.SSLContext | bool = True) -> None:
        """``verify``: how HTTPS writers are trusted, and the certificate this node shows
        them (:func:`metastore.server.tls.client_verify`)."""
        self._node_id = node_id
        self._own_url = own_url.rstrip("/")
        self._last_writer = last_writer
        self._nodes = nodes
        self.settings = settings or ForwardingSettings()
        self._client = self._http(verify)
        self.stats = ForwardingStats()

    def _http(self, verify: ssl.SSLContext | bool) -> httpx.Client:
        return httpx.Client(
            timeout=httpx.Timeout(self.settings.timeout, connect=min(self.settings.timeout, 1.0)),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            trust_env=False, verify=verify)  # no proxy from the environment sees credentials

    def renew(self, verify: ssl.SSLContext | bool) -> None:
        """Trust and show by ``verify`` from now on (the node's certificate was renewed): new
        requests take a new client; the old one is closed once requests under way are done."""
        old, self._client = self._client, self._http(verify)
        closing = threading.Timer(self.settings.timeout + 5, old.close)
        closing.daemon = True
        closing.start()

    def close(self) -> None:
        self._client.close()

    def writer_url(self) -> str | None:
        """The URL of the node that wrote the newest command record, when it is another node,
        alive and READY; None: this node writes."""
        if not self.settings.enabled:
            return None
        writer = self._last_writer()
        if writer is None or writer == self._node_id:
            return None
        for beat, alive in self._nodes():
            if beat.node_id == writer and alive and beat.state == "READY" and _reachable(
                    beat.url) and beat.url.rstrip("/") != self._own_url:
                return beat.url
        return None

    def forward(self, url: str, payload: Mapping[str, Any],
                headers: Mapping[str, str]) -> Forwarded | None:
        """POST ``payload`` to ``url``'s /ksql with ``headers`` (the client's credentials);
        the writer's verdict, or None when the request is to be written here."""
        budget = max(self.settings.timeout - BUDGET_MARGIN, self.settings.timeout / 2)
        sent = {**headers, FORWARDED_BY: self._node_id, "content-type": "application/json",
                FORWARD_BUDGET: str(int(budget * 1000))}
        try:
            body = json.dumps(dict(payload), ensure_ascii=True, allow_nan=False)
            response = self._client.post(f"{url.rstrip('/')}/ksql", content=body, headers=sent)
            content = response.json() if _is_verdict(response) else None
        except Exception as error:  # any failure at all: the request is written here
            log.info("forwarding a write to %s failed (%s: %s); writing it here", url,
                     type(error).__name__, error)
            self.stats.count(forwarded=False)
            return None
        if content is None:
            log.info("the writer %s answered a forwarded write %d; writing it here", url,
                     response.status_code)
            self.stats.count(forwarded=False)
            return None
        self.stats.count(forwarded=True)
        return Forwarded(response.status_code, content)


def forwarded_budget(headers: Mapping[str, str]) -> float | None:
    """The seconds a forwarded request may take here (:data:`FORWARD_BUDGET`), if it says."""
    text = headers.get(FORWARD_BUDGET, "")
    if not text.isascii() or not text.isdigit() or len(text) > 9 or int(text) == 0:
        return None
    return int(text) / 1000


def _reachable(url: str) -> bool:
    """Whether ``url`` names a host another node can reach (not a wildcard address)."""
    try:
        parts = urlsplit(url)
        return parts.scheme in ("http", "https") and bool(parts.hostname) \
            and parts.hostname not in _WILDCARDS and parts.port is not None
    except ValueError:
        return False
