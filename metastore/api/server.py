"""The ksqlDB-compatible REST server of one node (FastAPI, served by uvicorn).

Endpoints: ``POST /ksql``, ``POST /query``, ``GET /info``, ``GET /healthcheck``,
``GET /clusterStatus``, ``GET /status[/{type}/{entity}/{action}]``, ``GET /v1/metastore``,
``GET /metrics``. Errors use ksqlDB's entities (``statement_error`` / ``generic_error``) and
codes; no input a client can send produces an unhandled 5xx.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from metastore import __version__
from metastore.api import error_codes as codes
from metastore.api.auth import BasicAuth
from metastore.api.metrics import NodeMetrics
from metastore.catalog.exceptions import StatementError
from metastore.exceptions import MetastoreError
from metastore.kafka.exceptions import KafkaClientError
from metastore.log.exceptions import CatchUpTimeoutError, NotReadyError, NotWrittenError
from metastore.log.reader import NodeState
from metastore.membership import Membership
from metastore.node import Node
from metastore.spark.exceptions import SparkQueryError, SparkUnavailableError, UnsupportedQueryError
from metastore.sql.exceptions import ParseError
from metastore.sql.parser import parse
from metastore.sql.statements import SelectStatement

KSQL_MEDIA_TYPE = "application/vnd.ksql.v1+json"
MAX_BODY_BYTES = 1 << 20
UNAUTHENTICATED_PATHS = frozenset({"/healthcheck"})
"""Load balancers and orchestrators probe health without credentials."""
QUERY_ENDPOINT_MESSAGE = ("The following statement types should be issued to the websocket "
                          "endpoint '/query':\n\t* PRINT\n\t* SELECT")


class KsqlRequest(BaseModel):
    """The body of ``POST /ksql`` (unknown fields are ignored, as ksqlDB does)."""

    model_config = ConfigDict(extra="ignore")

    ksql: str = Field(min_length=1)
    streamsProperties: dict[str, Any] = Field(default_factory=dict)  # noqa: N815 - ksqlDB's name
    sessionVariables: dict[str, Any] = Field(default_factory=dict)  # noqa: N815
    commandSequenceNumber: int | None = None  # noqa: N815
    requestId: str | None = Field(default=None, max_length=200)  # noqa: N815 - metastore extra


class KsqlResponse(JSONResponse):
    media_type = KSQL_MEDIA_TYPE


def _status_for(code: int) -> int:
    if code == codes.NOT_FOUND:
        return 404
    if code in (codes.COMMAND_QUEUE_CATCHUP_TIMEOUT, codes.SERVER_NOT_READY):
        return 503
    if code >= 50000:
        return 500
    return 400


def error_response(code: int, message: str, statement: str | None = None,
                   entities: list[Any] | None = None) -> KsqlResponse:
    body: dict[str, Any] = {"@type": "statement_error" if statement is not None else
                            "generic_error", "error_code": code, "message": message}
    if statement is not None:
        body["statementText"] = statement
        body["entities"] = entities or []
    return KsqlResponse(body, status_code=_status_for(code))


def create_app(node: Node, auth: BasicAuth | None = None, url: str = "",
               membership: Membership | None = None, max_body_bytes: int = MAX_BODY_BYTES,
               query_runner: Callable[[str], Any] | None = None) -> FastAPI:
    app = FastAPI(title="metastore", version=__version__,
                  description="A ksqlDB-compatible REST API over a replicated command log.")
    metrics = NodeMetrics()
    app.state.node = node
    app.state.metrics = metrics

    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if (auth is not None and request.url.path not in UNAUTHENTICATED_PATHS
                and auth.user_for(request.headers.get("authorization")) is None):
            return KsqlResponse({"@type": "generic_error", "error_code": 40100,
                                 "message": "Unauthorized"}, status_code=401,
                                headers={"WWW-Authenticate": 'Basic realm="metastore"'})
        declared = request.headers.get("content-length")
        if declared is not None and not declared.isdigit():
            return error_response(codes.BAD_REQUEST, "Invalid Content-Length header")
        if declared is not None and int(declared) > max_body_bytes:
            return too_large()
        try:
            return await call_next(request)
        except Exception as error:  # the server never dies of a request
            return error_response(codes.SERVER_ERROR, f"Internal error: {error}")

    def too_large() -> KsqlResponse:
        return KsqlResponse({"@type": "generic_error", "error_code": 41300,
                             "message": f"Request body larger than {max_body_bytes} bytes"},
                            status_code=413)

    async def read_request(request: Request) -> KsqlRequest | KsqlResponse:
        body = await request.body()
        if len(body) > max_body_bytes:
            return too_large()
        try:
            data = json.loads(body)
        except (UnicodeDecodeError, ValueError) as error:
            return error_response(codes.BAD_REQUEST, f"Malformed JSON in request: {error}")
        try:
            return KsqlRequest.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            return error_response(codes.BAD_REQUEST,
                                  f"Invalid request: {where or 'body'}: {first.get('msg')}")

    @app.post("/ksql", response_class=KsqlResponse,
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": KsqlRequest.model_json_schema()},
                  KSQL_MEDIA_TYPE: {"schema": KsqlRequest.model_json_schema()}}}})
    async def ksql(request: Request) -> Response:
        parsed = await read_request(request)
        if isinstance(parsed, KsqlResponse):
            metrics.count_request("bad_request")
            return parsed
        return await _run_in_thread(lambda: _execute(parsed))

    def _execute(body: KsqlRequest) -> Response:
        started = time.perf_counter()
        text = body.ksql
        try:
            statements = parse(text)
            if not statements:
                return error_response(codes.BAD_REQUEST, "No statement in request", text)
            selects = [s for s in statements if isinstance(s, SelectStatement)]
            if selects:
                return error_response(codes.QUERY_ENDPOINT, QUERY_ENDPOINT_MESSAGE, selects[0].text)
            writes = any(s.writes_log for s in statements)
            if writes and node.state in (NodeState.STARTING, NodeState.CATCHING_UP):
                return error_response(codes.SERVER_NOT_READY, "The node is catching up with the "
                                      "command log; retry shortly.")
            entities = node.execute(text, request_id=body.requestId,
                                    command_sequence_number=body.commandSequenceNumber)
        except ParseError as error:
            metrics.count_request("statement_error")
            return error_response(codes.BAD_STATEMENT, error.message, error.statement or text)
        except StatementError as error:
            metrics.count_request("statement_error")
            return error_response(codes.BAD_STATEMENT, error.message, text)
        except CatchUpTimeoutError as error:
            metrics.count_request("timeout")
            return error_response(codes.COMMAND_QUEUE_CATCHUP_TIMEOUT, error.message)
        except NotReadyError as error:
            metrics.count_request("not_ready")
            code = codes.SERVER_ERROR if node.state is NodeState.DEGRADED else codes.SERVER_NOT_READY
            return error_response(code, error.message)
        except NotWrittenError as error:
            metrics.count_request("not_written")
            return error_response(codes.SERVER_ERROR, error.message)
        except (KafkaClientError, MetastoreError) as error:
            metrics.count_request("error")
            return error_response(codes.SERVER_ERROR, f"The statement was NOT written: "
                                  f"{error.message}")
        if any(e.get("@type") == "currentStatus" and "commandSequenceNumber" in e
               for e in entities):
            metrics.statement_latency.observe(time.perf_counter() - started)
        metrics.count_request("ok")
        return KsqlResponse(entities)

    @app.post("/query", response_class=KsqlResponse)
    async def query(request: Request) -> Response:
        parsed = await read_request(request)
        if isinstance(parsed, KsqlResponse):
            return parsed
        if query_runner is None:
            return error_response(codes.SERVER_NOT_READY, "This node runs without Spark "
                                  "(--spark-master none); send queries to a node with Spark.")
        runner = query_runner
        return await _run_in_thread(lambda: _query(runner, parsed))

    def _query(runner: Callable[[str], Any], body: KsqlRequest) -> Response:
        try:
            if body.commandSequenceNumber is not None:
                node.wait_for(body.commandSequenceNumber, node.config.read_timeout)
            return KsqlResponse(runner(body.ksql))
        except ParseError as error:
            return error_response(codes.BAD_STATEMENT, error.message, error.statement or body.ksql)
        except (StatementError, SparkQueryError, UnsupportedQueryError) as error:
            return error_response(codes.BAD_STATEMENT, error.message, body.ksql)
        except CatchUpTimeoutError as error:
            return error_response(codes.COMMAND_QUEUE_CATCHUP_TIMEOUT, error.message)
        except SparkUnavailableError as error:
            return error_response(codes.SERVER_NOT_READY, error.message)
        except MetastoreError as error:
            return error_response(codes.SERVER_ERROR, error.message)

    @app.get("/info")
    def info() -> Response:
        return KsqlResponse({"KsqlServerInfo": {
            "version": __version__, "kafkaClusterId": node.kafka_cluster_id,
            "ksqlServiceId": node.config.service_id,
            "serverStatus": "RUNNING" if node.state is NodeState.READY else node.state.value}})

    @app.get("/healthcheck")
    def healthcheck() -> Response:
        ready = node.state is NodeState.READY
        kafka_ok = node.replica.last_error is None or ready
        body = {"isHealthy": ready and kafka_ok, "details": {
            "metastore": {"isHealthy": True}, "kafka": {"isHealthy": kafka_ok},
            "commandRunner": {"isHealthy": ready, "state": node.state.value}}}
        return KsqlResponse(body, status_code=200 if body["isHealthy"] else 503)

    @app.get("/clusterStatus")
    def cluster_status() -> Response:
        hosts: dict[str, Any] = {}
        seen = set()
        for beat, alive in membership.nodes() if membership is not None else []:
            seen.add(beat.node_id)
            hosts[beat.url or beat.node_id] = {
                "hostAlive": alive, "lastStatusUpdateMs": beat.timestamp_ms,
                "nodeId": beat.node_id, "state": beat.state,
                "appliedOffset": beat.applied_offset, "activeStandbyPerQuery": {},
                "hostStoreLags": {}}
        for node_id in sorted(node.replica.origin_nodes):
            if node_id not in seen:
                hosts[node_id] = {"hostAlive": False, "lastStatusUpdateMs": 0, "nodeId": node_id,
                                  "state": "UNKNOWN", "appliedOffset": None,
                                  "activeStandbyPerQuery": {}, "hostStoreLags": {}}
        if node.config.node_id not in seen:
            hosts[url or node.config.node_id] = {
                "hostAlive": True, "lastStatusUpdateMs": int(time.time() * 1000),
                "nodeId": node.config.node_id, "state": node.state.value,
                "appliedOffset": node.replica.position - 1, "activeStandbyPerQuery": {},
                "hostStoreLags": {}}
        return KsqlResponse({"clusterStatus": hosts})

    @app.get("/status")
    def statuses() -> Response:
        return KsqlResponse({"commandStatuses": {
            command_id: "SUCCESS" for command_id in sorted(node.replica.command_offsets)}})

    @app.get("/status/{kind}/{entity}/{action}")
    def status(kind: str, entity: str, action: str) -> Response:
        command_id = f"{kind}/{entity}/{action}"
        offset = node.replica.command_offsets.get(command_id)
        if offset is None:
            return error_response(codes.NOT_FOUND, f"Command not found: {command_id}")
        return KsqlResponse({"status": "SUCCESS", "message": f"Applied at offset {offset}",
                             "commandSequenceNumber": offset})

    @app.get("/v1/metastore")
    def metastore_status() -> Response:
        body = node.status()
        body["endOffset"] = node.end_offset()
        return KsqlResponse(body)

    @app.get("/metrics", response_class=PlainTextResponse)
    def prometheus() -> Response:
        writer = node.writer
        end = node.end_offset()
        applied = node.replica.position
        gauges = {
            "metastore_applied_offset": ("Offset of the last record applied (or marker passed).",
                                         float(applied - 1)),
            "metastore_log_end_offset": ("Last stable offset of the command log.",
                                         float(end if end is not None else -1)),
            "metastore_lag": ("Offsets not applied yet.",
                              float(max((end or 0) - applied, 0))),
            "metastore_fenced_retries_total": ("Write attempts retried after fencing or abort.",
                                               float(writer.stats.fenced_retries if writer else 0)),
            "metastore_transactions_total": ("Transactions committed by this node.",
                                             float(writer.stats.transactions if writer else 0)),
            "metastore_producers_created_total": ("Transactional producers created (each one "
                                                  "init_transactions).",
                                                  float(writer.stats.producers_created
                                                        if writer else 0)),
            "metastore_records_applied_total": ("Command records applied to the image.",
                                                float(node.replica.records_applied)),
        }
        spark = node.projection.status if node.projection is not None else None
        if spark is not None:
            gauges.update({
                "metastore_spark_in_sync": ("1 when the Spark catalog equals the image.",
                                            float(spark.in_sync)),
                "metastore_spark_catalog_calls_total": ("Spark catalog calls made by the "
                                                        "projection.",
                                                        float(spark.total_catalog_calls)),
                "metastore_spark_reconcile_passes_total": ("Reconciliations that touched Spark.",
                                                           float(spark.passes)),
                "metastore_spark_last_reconcile_seconds": ("Duration of the last reconciliation.",
                                                           spark.last.seconds),
            })
        text = metrics.render(gauges, node.state.value, [s.value for s in NodeState])
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    return app


async def _run_in_thread(work: Callable[[], Response]) -> Response:
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(work)
