"""What the REST server's routes share: the node, the request gate, the limits, the metrics, the
lanes' threads, and the node's optional parts (membership, Spark's queries, table stores, the
write forwarder). Built once by :func:`metastore.server.http.app.create_app`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from metastore.cluster.membership import Membership
from metastore.engine.overrides import ConfigOverrides
from metastore.runtime.materialized import TableStores
from metastore.runtime.push import PushQueries
from metastore.server.http.concurrency import Lane, LaneThreads
from metastore.server.http.forwarding import WriteForwarder
from metastore.server.http.http_limits import HttpLimits
from metastore.server.http.metrics import NodeMetrics
from metastore.server.http.request_gate import RequestGate
from metastore.server.http.streaming import MAX_PRINTS, PrintSlots
from metastore.server.node import Node

PullRunner = Callable[[str, ConfigOverrides], Any]
"""Answers a pull query with Spark: its text and the request's overrides."""


@dataclass(frozen=True)
class ServerContext:
    node: Node
    gate: RequestGate
    limits: HttpLimits
    metrics: NodeMetrics
    threads: LaneThreads
    in_flight: dict[Lane, int]
    """Requests in flight per lane (:class:`~metastore.server.http.concurrency.ConcurrencyLimit`'s)."""
    url: str = ""
    """This node's advertised URL."""
    membership: Membership | None = None
    query_runner: PullRunner | None = None
    push_queries: PushQueries | None = None
    table_stores: TableStores | None = None
    forwarder: WriteForwarder | None = None
    prints: PrintSlots = field(default_factory=lambda: PrintSlots(MAX_PRINTS))
    """The node's PRINTs under way, over ``/query`` and ``/ws/query`` alike."""
