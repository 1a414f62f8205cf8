"""The ksqlDB-compatible REST server of one node (FastAPI, served by hypercorn): the app, its
request gate and its routes (:mod:`metastore.server.http.routes`).

Endpoints: ``POST /ksql``, ``POST /query``, ``POST /query-stream``, ``POST /close-query``
(the streamed answers: :mod:`metastore.server.http.streaming`), ``POST /inserts-stream``
(:mod:`metastore.server.http.inserts_stream`), ``GET /info``, ``GET /healthcheck``,
``GET /clusterStatus``, ``GET /status[/{type}/{entity}/{action}]``, ``GET /v1/metastore``,
``GET /v1/metastore/log``, ``GET /metrics``, and the web console, ``GET /console/``. Errors use
ksqlDB's entities (``statement_error`` / ``generic_error``) and codes; no input a client can
send produces an unhandled 5xx, and an unexpected failure answers a generic message with an
incident id, never the exception's text (the log has it). What one client may cost (body size
and time, JSON nesting, failed logins) is bounded by
:class:`~metastore.server.http.http_limits.HttpLimits`.
"""

from __future__ import annotations

from fastapi import FastAPI

from metastore import __version__
from metastore.cluster.membership import Membership
from metastore.runtime.materialized import TableStores
from metastore.runtime.push import PushQueries
from metastore.server.http.auth import BasicAuth
from metastore.server.http.concurrency import Lane, LaneThreads
from metastore.server.http.context import PullRunner, ServerContext
from metastore.server.http.forwarding import WriteForwarder
from metastore.server.http.http_limits import HttpLimits
from metastore.server.http.metrics import NodeMetrics
from metastore.server.http.request_gate import Guard, RequestGate
from metastore.server.http.routes import (
    console,
    inserts,
    metrics,
    queries,
    server,
    statements,
    status,
    websocket,
)
from metastore.server.node import Node
from metastore.server.peer_certificates import CertificateUsers

ROUTES = (statements, queries, inserts, status, metrics, server, websocket, console)


def create_app(node: Node, auth: BasicAuth | None = None, url: str = "",
               membership: Membership | None = None,
               query_runner: PullRunner | None = None,
               limits: HttpLimits | None = None,
               push_queries: PushQueries | None = None,
               table_stores: TableStores | None = None,
               forwarder: WriteForwarder | None = None,
               headless: str | None = None,
               certificates: CertificateUsers | None = None) -> FastAPI:
    """``headless``: the queries file of a node in headless mode, which serves no statements
    or queries (:mod:`metastore.server.headless`)."""
    app = FastAPI(title="metastore", version=__version__,
                  description="A ksqlDB-compatible REST API over a replicated command log.")
    limits = limits or HttpLimits()
    gate = RequestGate(limits, auth, headless, certificates)
    context = ServerContext(
        node=node, gate=gate, limits=limits, metrics=NodeMetrics(),
        threads=LaneThreads({Lane.HEALTH: limits.health_threads,
                             Lane.STATEMENTS: limits.statement_threads,
                             Lane.INSERTS: limits.insert_threads,
                             Lane.QUERIES: limits.query_threads}),
        in_flight=dict.fromkeys(Lane, 0), url=url, membership=membership,
        query_runner=query_runner, push_queries=push_queries, table_stores=table_stores,
        forwarder=forwarder)
    app.state.node = node
    app.state.metrics = context.metrics
    app.state.requests_in_flight = context.in_flight  # ConcurrencyLimit's
    app.add_middleware(Guard, refuse=gate.refuse)
    for routes in ROUTES:
        app.include_router(routes.router(context))
    return app
