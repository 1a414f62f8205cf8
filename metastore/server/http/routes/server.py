"""ksqlDB's endpoints about the server itself: the orchestrator's probes (``GET /chc/live``,
``/chc/ready``), its metadata (``GET /v1/metadata``, ``/v1/metadata/id``), whether a request may
set a property (``GET /is_valid_property/{property}``), and the root (``GET /``, sent on to
``/info``).

ksqlDB answers ``/chc/ready`` 200 as soon as it listens; here it is 503 (ksqlDB's 50302 error)
until the node is READY, caught up with the command log, so that an orchestrator sends no
statement to a node that would refuse it. The probes and the metadata need no credentials, as in
ksqlDB (:data:`~metastore.server.http.request_gate.UNAUTHENTICATED_PATHS`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from metastore import __version__
from metastore.engine import overrides
from metastore.log.reader import NodeState
from metastore.server.http import error_codes as codes
from metastore.server.http.answers import KsqlResponse, error_response, generic_error
from metastore.server.http.concurrency import Lane
from metastore.server.http.context import ServerContext

NOT_READY = "KSQL is not yet ready to serve requests."
"""ksqlDB's message of a server that is not READY (error 50302)."""


def router(context: ServerContext) -> APIRouter:
    api = APIRouter()
    node = context.node
    threads = context.threads

    @api.get("/chc/live")
    async def live() -> Response:
        return KsqlResponse({})

    @api.get("/chc/ready")
    async def ready() -> Response:
        if node.state is NodeState.READY:
            return KsqlResponse({})
        return generic_error(503, codes.SERVER_NOT_READY, NOT_READY)

    @api.get("/v1/metadata")
    @threads.endpoint(Lane.HEALTH)
    def metadata() -> Response:
        return KsqlResponse({"version": __version__, "clusterId": _cluster_id(context)})

    @api.get("/v1/metadata/id")
    @threads.endpoint(Lane.HEALTH)
    def metadata_id() -> Response:
        return KsqlResponse(_cluster_id(context))

    @api.get("/is_valid_property/{name:path}")
    async def is_valid_property(name: str) -> Response:
        try:
            overrides.resolve({name: None}, strict=True)
        except overrides.ConfigError as error:
            return error_response(codes.BAD_REQUEST, str(error))
        return KsqlResponse(True)

    @api.get("/")
    async def root() -> Response:
        return RedirectResponse("/info", status_code=307)

    return api


def _cluster_id(context: ServerContext) -> dict[str, Any]:
    """ksqlDB's ``ServerClusterId``: the Kafka cluster and the service (ksqlDB's ksql cluster)."""
    return {"scope": {"path": [], "clusters": {
        "kafka-cluster": context.node.kafka_cluster_id or "",
        "ksql-cluster": context.node.config.service_id}}, "id": ""}
