"""What the REST server's routes share: the node, the request gate, the limits, the metrics, the
lanes' threads, and the node's optional parts (membership, Spark's queries, table stores, the
write forwarder). Built once by :func:`metastore.api.server.create_app`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metastore.api.concurrency import Lane, LaneThreads
from metastore.api.forwarding import WriteForwarder
from metastore.api.http_limits import HttpLimits
from metastore.api.metrics import NodeMetrics
from metastore.api.request_gate import RequestGate
from metastore.catalog.overrides import ConfigOverrides
from metastore.membership import Membership
from metastore.node import Node
from metastore.queries.materialized import TableStores
from metastore.queries.push import PushQueries

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
    """Requests in flight per lane (:class:`~metastore.api.concurrency.ConcurrencyLimit`'s)."""
    url: str = ""
    """This node's advertised URL."""
    membership: Membership | None = None
    query_runner: PullRunner | None = None
    push_queries: PushQueries | None = None
    table_stores: TableStores | None = None
    forwarder: WriteForwarder | None = None
