"""The ksqlDB-compatible REST server of one node (FastAPI, served by hypercorn).

Endpoints: ``POST /ksql``, ``POST /query``, ``POST /query-stream``, ``POST /close-query``
(the streamed answers: :mod:`metastore.api.streaming`), ``POST /inserts-stream``
(:mod:`metastore.api.inserts_stream`), ``GET /info``, ``GET /healthcheck``,
``GET /clusterStatus``, ``GET /status[/{type}/{entity}/{action}]``, ``GET /v1/metastore``,
``GET /metrics``. Errors use ksqlDB's entities (``statement_error`` / ``generic_error``) and
codes; no input a client can send produces an unhandled 5xx, and an unexpected failure answers a
generic message with an incident id, never the exception's text (the log has it). What one
client may cost (body size and time, JSON nesting, failed logins) is bounded by
:class:`~metastore.api.http_limits.HttpLimits`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.datastructures import MutableHeaders
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from metastore import __version__
from metastore.api import error_codes as codes
from metastore.api import streaming
from metastore.api.auth import BasicAuth, LoginThrottle, claimed_user
from metastore.api.concurrency import Lane, LaneThreads, client_of
from metastore.api.forwarding import (
    FORWARDED_BY,
    Forwarded,
    WriteForwarder,
    forwarded_budget,
)
from metastore.api.http_limits import HttpLimits, decode_json
from metastore.api.inserts_stream import InsertsStreamResponse
from metastore.api.metrics import NodeMetrics
from metastore.api.streaming import PrintSlots
from metastore.catalog import overrides
from metastore.exceptions import MetastoreError
from metastore.health import PROBE_TIMEOUT_SECONDS, HealthProbe, KafkaHealth
from metastore.kafka.admin import Admin
from metastore.log.exceptions import (
    NotReadyError,
    NotWrittenError,
    OutcomeUnknownError,
)
from metastore.log.reader import NodeState
from metastore.membership import Membership
from metastore.node import Node
from metastore.queries.exceptions import UnknownPushQueryError
from metastore.queries.materialized import TableStores
from metastore.queries.push import PushQueries, PushQuery
from metastore.spark.exceptions import SparkUnavailableError, UnsupportedQueryError
from metastore.spark.query import QueryResult
from metastore.sql import variables
from metastore.sql.exceptions import ParseError
from metastore.sql.statements import InsertValues, PrintTopic, SelectStatement

KSQL_MEDIA_TYPE = "application/vnd.ksql.v1+json"
UNAUTHENTICATED_PATHS = frozenset({"/healthcheck"})
"""Load balancers and orchestrators probe health without credentials."""
INSERTS_STREAM_PATH = "/inserts-stream"
"""Its body is not bounded as a whole: it streams rows, each bounded on its own."""
MAX_PRINTS = 20
"""PRINTs a node runs at once (each holds a Kafka consumer); more are refused with 40003."""
QUERY_ENDPOINT_MESSAGE = ("The following statement types should be issued to the websocket "
                          "endpoint '/query':\n\t* PRINT\n\t* SELECT")


_log = logging.getLogger(__name__)


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


def failure(error: MetastoreError, text: str, message: str | None = None) -> KsqlResponse:
    """The answer to a typed error, from the one table of ksqlDB codes (api/error_codes.py)."""
    answer = codes.classify(error)
    statement = None
    if answer.code == codes.BAD_STATEMENT:
        statement = (error.statement or text) if isinstance(error, ParseError) else text
    body: dict[str, Any] = {"@type": "generic_error" if statement is None else "statement_error",
                            "error_code": answer.code, "message": message or error.message}
    if statement is not None:
        body |= {"statementText": statement, "entities": []}
    if isinstance(error, OutcomeUnknownError):  # what a client needs to learn the outcome
        body |= {"requestId": error.request_id, "commandIds": list(error.command_ids)}
    return KsqlResponse(body, status_code=answer.http_status)


_OUTCOMES: tuple[tuple[type[MetastoreError], str], ...] = (
    (NotWrittenError, "not_written"), (OutcomeUnknownError, "outcome_unknown"),
    (NotReadyError, "not_ready"))


def _outcome(error: MetastoreError) -> str:
    """The ``outcome`` label of a failed /ksql request in the metrics."""
    for kind, label in _OUTCOMES:
        if isinstance(error, kind):
            return label
    return {codes.BAD_STATEMENT: "statement_error",
            codes.COMMAND_QUEUE_CATCHUP_TIMEOUT: "timeout"}.get(codes.classify(error).code, "error")


def generic_error(status: int, code: int, message: str,
                  headers: Mapping[str, str] | None = None) -> KsqlResponse:
    """A ``generic_error`` with an HTTP status that ksqlDB's code mapping does not give."""
    return KsqlResponse({"@type": "generic_error", "error_code": code, "message": message},
                        status_code=status, headers=headers)


def internal_error(request: Request) -> KsqlResponse:
    """Answer an unexpected failure; call it from an ``except`` block, which it logs."""
    incident = uuid.uuid4().hex[:16]
    _log.exception("incident %s: %s %s failed", incident, request.method, request.url.path)
    return error_response(codes.SERVER_ERROR, f"Internal error (incident {incident}); the "
                          "node's log has the details")


def create_app(node: Node, auth: BasicAuth | None = None, url: str = "",
               membership: Membership | None = None,
               query_runner: Callable[[str, overrides.ConfigOverrides], Any] | None = None,
               limits: HttpLimits | None = None,
               push_queries: PushQueries | None = None,
               table_stores: TableStores | None = None,
               forwarder: WriteForwarder | None = None) -> FastAPI:
    app = FastAPI(title="metastore", version=__version__,
                  description="A ksqlDB-compatible REST API over a replicated command log.")
    limits = limits or HttpLimits()
    metrics = NodeMetrics()
    logins = LoginThrottle(limits.max_failed_logins, limits.failed_login_window_seconds,
                           limits.login_lockout_seconds, limits.max_tracked_clients,
                           limits.max_failed_users_per_address)
    health = HealthProbe(Admin(node.settings, timeout=PROBE_TIMEOUT_SECONDS), node.config.topic)
    app.state.node = node
    app.state.metrics = metrics
    app.state.requests_in_flight = in_flight = dict.fromkeys(Lane, 0)  # ConcurrencyLimit's
    threads = LaneThreads({Lane.HEALTH: limits.health_threads,
                           Lane.STATEMENTS: limits.statement_threads,
                           Lane.INSERTS: limits.insert_threads,
                           Lane.QUERIES: limits.query_threads})

    app.add_middleware(Guard, refuse=lambda request: authenticate(request) or check_length(request))

    def authenticate(request: Request) -> KsqlResponse | None:
        """Refuse a request without valid credentials; count and limit failed logins.

        Only a request that presents credentials is a login attempt: clients that send none
        first (browsers, curl) are answered 401 without counting against them."""
        if auth is None or request.url.path in UNAUTHENTICATED_PATHS:
            return None
        address = request.client.host if request.client is not None else ""
        header = request.headers.get("authorization")
        user = claimed_user(header)
        wait = logins.retry_after(user, address)
        if wait > 0:
            return generic_error(429, codes.TOO_MANY_REQUESTS, "Too many failed logins; retry "
                                 "later.", {"Retry-After": str(math.ceil(wait))})
        if auth.user_for(header) is not None:
            return None
        if header is not None:
            logins.failed(user, address)
        return generic_error(401, codes.UNAUTHORIZED, "Unauthorized",
                             {"WWW-Authenticate": 'Basic realm="metastore"'})

    def check_length(request: Request) -> KsqlResponse | None:
        declared = request.headers.get("content-length")
        if declared is None or request.url.path == INSERTS_STREAM_PATH:  # bounded per row
            return None
        if not (declared.isascii() and declared.isdigit()):
            return error_response(codes.BAD_REQUEST, "Invalid Content-Length header")
        if len(declared) > 18 or int(declared) > limits.max_body_bytes:
            return too_large()
        return None

    def too_large() -> KsqlResponse:
        return generic_error(413, codes.PAYLOAD_TOO_LARGE, f"Request body larger than "
                             f"{limits.max_body_bytes} bytes", {"Connection": "close"})

    def too_slow() -> KsqlResponse:
        return generic_error(408, codes.REQUEST_TIMEOUT, f"The request body was not received in time "
                             f"(at most {limits.body_timeout_seconds:g} s for the whole body and "
                             f"{limits.body_idle_timeout_seconds:g} s between two parts of it)",
                             {"Connection": "close"})

    async def read_body(request: Request) -> bytes | KsqlResponse:
        """The whole body, read within the time and size limits, or the answer refusing it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.body_timeout_seconds
        body = bytearray()
        chunks = request.stream()
        try:
            while True:
                wait = min(deadline - loop.time(), limits.body_idle_timeout_seconds)
                async with asyncio.timeout(max(wait, 0.0)):
                    chunk = await anext(chunks, None)
                if chunk is None:
                    request.state.body_read = True
                    return bytes(body)
                body += chunk
                if len(body) > limits.max_body_bytes:
                    return too_large()
        except TimeoutError:
            return too_slow()
        except ClientDisconnect:
            return error_response(codes.BAD_REQUEST, "The client closed the connection before "
                                  "sending the whole body")
        finally:
            await chunks.aclose()

    def parse_request(body: bytes) -> KsqlRequest | KsqlResponse:
        try:
            data = decode_json(body, limits.max_json_depth)
        except ValueError as error:
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
        body = await read_body(request)
        if isinstance(body, KsqlResponse):
            metrics.count_request("bad_request")
            return body
        credentials = {name: request.headers[name] for name in ("authorization",)
                       if name in request.headers}
        may_forward = FORWARDED_BY not in request.headers
        budget = None if may_forward else forwarded_budget(request.headers)
        return await threads.run(Lane.STATEMENTS, _execute_body, body, credentials,
                                 may_forward, budget)

    def _execute_body(body: bytes, credentials: Mapping[str, str],
                      may_forward: bool, budget: float | None) -> Response:
        parsed = parse_request(body)
        if isinstance(parsed, KsqlResponse):
            metrics.count_request("bad_request")
            return parsed
        return _execute(parsed, credentials, may_forward, budget)

    def _execute(body: KsqlRequest, credentials: Mapping[str, str],
                 may_forward: bool, budget: float | None = None) -> Response:
        """Answer a /ksql request; ``may_forward``: a write may go to the service's current
        writer (:mod:`metastore.api.forwarding`) with the client's ``credentials``;
        ``budget``: the seconds a forwarded request may take here."""
        started = time.perf_counter()
        timeout: float | None = None if budget is None else min(
            budget, node.config.writer.request_timeout)
        forward_failed = False
        text = body.ksql
        try:  # ksqlDB checks the overrides before the statements: a bad request, 40000
            config = overrides.resolve(body.streamsProperties, strict=True)
        except overrides.ConfigError as error:
            metrics.count_request("bad_request")
            return error_response(codes.BAD_REQUEST, error.message)
        try:  # sessionVariables, DEFINE and UNDEFINE substitute at parsing (sql.variables)
            statements = variables.parse_request(
                text, body.sessionVariables,
                variables.substitution_enabled(body.streamsProperties))
            if not statements:
                return error_response(codes.BAD_REQUEST, "No statement in request", text)
            selects = [s for s in statements if isinstance(s, SelectStatement | PrintTopic)]
            if selects:
                return error_response(codes.QUERY_ENDPOINT, QUERY_ENDPOINT_MESSAGE, selects[0].text)
            writes = any(s.writes_log for s in statements)
            if writes and node.state in (NodeState.STARTING, NodeState.CATCHING_UP):
                return error_response(codes.SERVER_NOT_READY, "The node is catching up with the "
                                      "command log; retry shortly.")
            url = forwarder.writer_url() if forwarder is not None and writes and may_forward \
                and node.state is NodeState.READY \
                and not any(isinstance(s, InsertValues) for s in statements) else None
            if url is not None:
                assert forwarder is not None
                if body.commandSequenceNumber is not None:  # as this node would, before writing
                    node.wait_for(body.commandSequenceNumber, node.config.read_timeout)
                body = body.model_copy(update={"requestId": body.requestId or str(uuid.uuid4())})
                answer = forwarder.forward(url, body.model_dump(exclude_none=True), credentials)
                if answer is not None:
                    return forwarded(answer, started)
                forward_failed = True
                timeout = max(node.config.writer.request_timeout
                              - (time.perf_counter() - started), 1.0)
            try:
                entities = node.execute(statements, request_id=body.requestId,
                                        command_sequence_number=body.commandSequenceNumber,
                                        config=config, timeout=timeout)
            except NotWrittenError as error:
                if not forward_failed:
                    raise
                raise OutcomeUnknownError(  # the writer may have had it before it gave up
                    f"The request was sent to the service's writer, which did not answer in "
                    f"time, and this node did not write it ({error.message}).",
                    body.requestId) from error
        except MetastoreError as error:
            metrics.count_request(_outcome(error))
            return write_failed(error, text)
        if any(e.get("@type") == "currentStatus" and "commandSequenceNumber" in e
               for e in entities):
            metrics.statement_latency.observe(time.perf_counter() - started)
        metrics.count_request("ok")
        return KsqlResponse(entities)

    def forwarded(answer: Forwarded, started: float) -> Response:
        """The writer's answer to a forwarded write, once this node has applied it."""
        if answer.status != 200:
            metrics.count_request("statement_error")
            return KsqlResponse(answer.content, status_code=answer.status)
        newest = answer.newest_sequence_number
        if newest is not None:
            node.replica.wait_for_position(newest + 1, node.config.writer.apply_timeout)
            metrics.statement_latency.observe(time.perf_counter() - started)
        metrics.count_request("ok")
        return KsqlResponse(answer.content)

    @app.post("/query", response_class=KsqlResponse)
    async def query(request: Request) -> Response:
        body = await read_body(request)
        if isinstance(body, KsqlResponse):
            return body
        return await threads.run(Lane.QUERIES, _query_body, body, user_of(request),
                                 client_of(request.scope, auth is not None))

    def _query_body(body: bytes, user: str | None, client: str) -> Response:
        parsed = parse_request(body)
        if isinstance(parsed, KsqlResponse):
            return parsed
        try:
            if parsed.commandSequenceNumber is not None:
                node.wait_for(parsed.commandSequenceNumber, node.config.read_timeout)
            statement, config = prepare_query(parsed.ksql, parsed.streamsProperties,
                                              parsed.sessionVariables, printable=True)
            if isinstance(statement, PrintTopic):
                return start_print(statement)
            if statement.query.emit_changes:
                push = start_push(statement, config, user, client)
                return streaming.ChunkedResponse(streaming.v1_chunks(push, threads),
                                                 KSQL_MEDIA_TYPE, push.close, threads,
                                                 limits.stream_write_timeout_seconds)
            result = run_pull(statement, config)
        except MetastoreError as error:
            return failure(error, parsed.ksql)
        header = {"header": {"queryId": result.query_id, "schema": result.schema}}
        return KsqlResponse([header, *({"row": {"columns": row}} for row in result.rows)])

    def prepare_query(text: str, properties: Mapping[str, Any],
                      session_variables: Mapping[str, Any], printable: bool = False
                      ) -> tuple[SelectStatement | PrintTopic, overrides.ConfigOverrides]:
        """The one query of a /query (``printable``: or PRINT) or /query-stream request, its
        variables substituted (ksqlDB's QueryStreamHandler prepares it with them), and the
        request's overrides."""
        config = overrides.resolve(properties, strict=True)
        statements = variables.parse_request(text, session_variables,
                                             variables.substitution_enabled(properties))
        kinds = (SelectStatement, PrintTopic) if printable else (SelectStatement,)
        if len(statements) != 1 or not isinstance(statements[0], kinds):
            raise UnsupportedQueryError(
                "/query takes exactly one SELECT or PRINT statement" if printable else
                "/query-stream takes exactly one SELECT statement")
        return statements[0], config

    def run_pull(statement: SelectStatement,
                 config: overrides.ConfigOverrides) -> QueryResult:
        if query_runner is None:
            raise SparkUnavailableError("This node runs without Spark (--spark-master none); "
                                        "send queries to a node with Spark.")
        result: QueryResult = query_runner(statement.text, config)
        return result

    def start_push(statement: SelectStatement, config: overrides.ConfigOverrides,
                   user: str | None, client: str) -> PushQuery:
        if push_queries is None:
            raise SparkUnavailableError("This node runs without Spark (--spark-master none); "
                                        "send queries to a node with Spark.")
        return push_queries.start(statement, node.replica.image, config, owner=user,
                                  client=client)

    def user_of(request: Request) -> str | None:
        """The authenticated user of a request (None without authentication)."""
        return auth.user_for(request.headers.get("authorization")) if auth is not None else None

    prints = PrintSlots(MAX_PRINTS)

    def start_print(statement: PrintTopic) -> Response:
        """ksqlDB's PRINT over /query: the topic's records as text lines as they arrive, a
        blank line each second without any, until LIMIT or the client leaves."""
        prints.acquire()
        try:
            printer = node.open_print(statement)
        except BaseException:
            prints.release()
            raise

        def end() -> None:
            printer.close()
            prints.release()

        return streaming.ChunkedResponse(streaming.print_chunks(printer, threads), "text/plain",
                                         end, threads, limits.stream_write_timeout_seconds)

    @app.post("/query-stream")
    async def query_stream(request: Request) -> Response:
        body = await read_body(request)
        if isinstance(body, KsqlResponse):
            return body
        return await threads.run(Lane.QUERIES, _query_stream, body,
                                 streaming.wants_delimited(request), user_of(request),
                                 client_of(request.scope, auth is not None))

    def _query_stream(body: bytes, delimited: bool, user: str | None, client: str) -> Response:
        parsed = streaming.parse_body(streaming.QueryStreamRequest, body, limits)
        if isinstance(parsed, str):
            return error_response(codes.BAD_REQUEST, parsed)
        assert isinstance(parsed, streaming.QueryStreamRequest)
        media_type = streaming.DELIMITED if delimited else "application/json"
        try:
            statement, config = prepare_query(parsed.sql, parsed.properties,
                                              parsed.sessionVariables)
            assert isinstance(statement, SelectStatement)
            if statement.query.emit_changes:
                push = start_push(statement, config, user, client)
                return streaming.ChunkedResponse(streaming.stream_chunks(push, delimited, threads),
                                                 media_type, push.close, threads,
                                                 limits.stream_write_timeout_seconds)
            result = run_pull(statement, config)
        except MetastoreError as error:
            return failure(error, parsed.sql)
        return Response(streaming.pull_stream_body(result, delimited), media_type=media_type)

    @app.post(INSERTS_STREAM_PATH)
    async def inserts_stream(request: Request) -> Response:
        request.state.body_read = True  # the response reads the body, row by row
        return InsertsStreamResponse(node, limits, streaming.wants_delimited(request), failure,
                                     lambda: int(time.time() * 1000), threads)

    @app.post("/close-query")
    async def close_query(request: Request) -> Response:
        body = await read_body(request)
        if isinstance(body, KsqlResponse):
            return body
        parsed = streaming.parse_body(streaming.CloseQueryRequest, body, limits)
        if isinstance(parsed, str):
            return error_response(codes.BAD_REQUEST, parsed)
        assert isinstance(parsed, streaming.CloseQueryRequest)
        try:
            if push_queries is None:
                raise UnknownPushQueryError(f"No query with id {parsed.queryId}")
            await threads.run(Lane.QUERIES, push_queries.close, parsed.queryId,
                              user_of(request))
        except MetastoreError as error:
            return failure(error, parsed.queryId)
        return Response(status_code=200)

    def write_failed(error: MetastoreError, text: str) -> KsqlResponse:
        if isinstance(error, NotReadyError) and node.state is NodeState.DEGRADED:
            return error_response(codes.SERVER_ERROR, error.message)
        if codes.classify(error).code == codes.SERVER_ERROR and not isinstance(
                error, NotWrittenError | OutcomeUnknownError):
            return failure(error, text, f"The statement was NOT written: {error.message}")
        return failure(error, text)

    @app.get("/info")
    @threads.endpoint(Lane.HEALTH)
    def info() -> Response:
        return KsqlResponse({"KsqlServerInfo": {
            "version": __version__, "kafkaClusterId": node.kafka_cluster_id,
            "ksqlServiceId": node.config.service_id,
            "serverStatus": "RUNNING" if node.state is NodeState.READY else node.state.value}})

    @app.get("/healthcheck")
    @threads.endpoint(Lane.HEALTH)
    def healthcheck() -> Response:
        spark_down = node.projection.down if node.projection is not None else None
        details = health_details(health.check(), node.state, node.projection is not None,
                                 spark_down)
        healthy = all(detail["isHealthy"] for detail in details.values())
        return KsqlResponse({"isHealthy": healthy, "details": details},
                            status_code=200 if healthy else 503)

    @app.get("/clusterStatus")
    @threads.endpoint(Lane.HEALTH)
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
    @threads.endpoint(Lane.HEALTH)
    def statuses() -> Response:
        return KsqlResponse({"commandStatuses": {
            command_id: "SUCCESS" for command_id in sorted(node.replica.command_offsets)}})

    @app.get("/status/{kind}/{entity}/{action}")
    @threads.endpoint(Lane.HEALTH)
    def status(kind: str, entity: str, action: str) -> Response:
        command_id = f"{kind}/{entity}/{action}"
        offset = node.replica.command_offsets.get(command_id)
        if offset is None:
            return error_response(codes.NOT_FOUND, f"Command not found: {command_id}")
        return KsqlResponse({"status": "SUCCESS", "message": f"Applied at offset {offset}",
                             "commandSequenceNumber": offset})

    @app.get("/v1/metastore")
    @threads.endpoint(Lane.HEALTH)
    def metastore_status() -> Response:
        body = node.status()
        body["endOffset"] = node.end_offset()
        return KsqlResponse(body)

    @app.get("/metrics", response_class=PlainTextResponse)
    @threads.endpoint(Lane.HEALTH)
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
            "metastore_write_batches_total": ("Batches of queued write requests this node's "
                                              "writer took (group commit).",
                                              float(writer.queue_stats.batches if writer else 0)),
            "metastore_write_batch_requests_total": ("Write requests taken into those batches.",
                                                     float(writer.queue_stats.batched_requests
                                                           if writer else 0)),
        }
        for lane in Lane:
            gauges[f"metastore_http_{lane.value}_in_flight"] = (
                f"HTTP requests of the {lane.value} lane in flight (an own bound and threads).",
                float(in_flight[lane]))
        if forwarder is not None:
            gauges["metastore_writes_forwarded_total"] = (
                "Write requests this node forwarded to the service's writer and answered with "
                "its verdict.", float(forwarder.stats.forwarded))
            gauges["metastore_forwards_written_here_total"] = (
                "Forwards that failed and were written on this node instead.",
                float(forwarder.stats.written_here))
        if node.queries is not None:
            gauges["metastore_records_skipped_total"] = (
                "Records this node's persistent and push queries skipped because they cannot "
                "deserialize them.", float(node.queries.skipped.total()))
        if push_queries is not None:
            gauges["metastore_push_queries"] = ("Push queries running on this node.",
                                                float(push_queries.running))
            gauges["metastore_spark_streaming_queries"] = (
                "Spark StreamingQueries active on this node (persistent and push queries).",
                float(push_queries.active_spark_queries()))
        if table_stores is not None:
            gauges["metastore_table_stores"] = ("Tables kept materialized for pull queries.",
                                                float(table_stores.tables))
            gauges["metastore_pull_queries_from_stores_total"] = (
                "Pull queries answered from a materialized table, not by Spark.",
                float(table_stores.answered))
        spark = node.projection.status if node.projection is not None else None
        if spark is not None:
            gauges.update({
                "metastore_spark_in_sync": ("1 when the Spark catalog equals the image.",
                                            float(spark.in_sync
                                                  and spark.image is node.replica.image)),
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


class Guard:
    """What every request goes through: ``refuse`` may answer it first (bad credentials, a body
    too large), an unexpected failure before the answer started is answered by
    :func:`internal_error`, and the answer's ``Connection`` header fits the protocol (none in
    HTTP/2; ``close`` where a declared body was left unread).

    Plain ASGI, not Starlette's ``BaseHTTPMiddleware``: that one reads the request's receive
    channel itself, which ``/inserts-stream`` reads row by row, and Starlette before 0.38.3 lost
    body chunks between the two."""

    def __init__(self, app: ASGIApp, refuse: Callable[[Request], Response | None]) -> None:
        self._app = app
        self._refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        request = Request(scope, receive)
        started = False

        async def send_fitted(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                if scope.get("http_version", "1.1") == "2":
                    del headers["connection"]  # HTTP/2 has no connection-specific headers
                elif _body_left_unread(request):
                    headers["connection"] = "close"
            await send(message)

        try:
            refusal = self._refuse(request)
            if refusal is not None:
                await refusal(scope, receive, send_fitted)
            else:
                await self._app(scope, receive, send_fitted)
        except Exception:  # the server never dies of a request, nor tells its internals
            if started:
                raise  # too late for an answer: the server aborts the response
            await internal_error(request)(scope, receive, send_fitted)


def _body_left_unread(request: Request) -> bool:
    """Whether the request declared a body that was not read: answered before it (refused, or
    an endpoint without a body). Its connection must close, or a client could keep it open for
    ever by sending the rest of the body slowly (the server discards it, and every byte resets
    the keep-alive timeout)."""
    declared = request.headers.get("content-length", "0") != "0"
    chunked = "transfer-encoding" in request.headers
    return (declared or chunked) and not getattr(request.state, "body_read", False)


def health_details(kafka: KafkaHealth, state: NodeState, runs_spark: bool = False,
                   spark_down: str | None = None) -> dict[str, dict[str, Any]]:
    """ksqlDB's healthcheck details, and this node's Spark where it runs one; each unhealthy
    part says why, in a ``reason``."""
    def detail(healthy: bool, reason: str | None, **extra: str) -> dict[str, Any]:
        return {"isHealthy": healthy, **extra, **({} if healthy else {"reason": reason})}

    ready = state is NodeState.READY
    return {
        "metastore": detail(kafka.command_topic_exists, kafka.reason if kafka.kafka_reachable
                            else "the command topic cannot be checked: Kafka did not answer"),
        "kafka": detail(kafka.kafka_reachable, kafka.reason),
        "commandRunner": detail(ready, f"the node is {state.value}, not READY",
                                state=state.value),
        **({"spark": detail(spark_down is None, spark_down)} if runs_spark else {}),
    }
