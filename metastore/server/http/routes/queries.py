"""``POST /query`` (a pull query's rows, a push query streamed as ksqlDB streams it, or
``PRINT``), ``POST /query-stream`` (the HTTP/2 API's queries) and ``POST /close-query``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from metastore.core.exceptions import MetastoreError
from metastore.engine import overrides
from metastore.kafka.topic_printer import TopicPrinter
from metastore.planner.exceptions import UnknownPushQueryError
from metastore.runtime.push import PushQuery
from metastore.server.http import error_codes as codes
from metastore.server.http import streaming
from metastore.server.http.answers import (
    KsqlRequest,
    KsqlResponse,
    error_response,
    failure,
)
from metastore.server.http.concurrency import Lane, client_of
from metastore.server.http.context import ServerContext
from metastore.server.http.protobuf_rows import MEDIA_TYPE as PROTOBUF_MEDIA_TYPE
from metastore.spark.exceptions import SparkUnavailableError, UnsupportedQueryError
from metastore.spark.query import QueryResult
from metastore.sql import variables
from metastore.sql.statements import PrintTopic, SelectStatement

NO_SPARK = "This node runs without Spark (--spark-master none); send queries to a node with Spark."


def router(context: ServerContext) -> APIRouter:
    api = APIRouter()
    queries = Queries(context)
    gate = context.gate
    with_auth = gate.auth is not None

    @api.post("/query", response_class=KsqlResponse)
    async def query(request: Request) -> Response:
        body = await gate.read_body(request)
        if isinstance(body, KsqlResponse):
            return body
        return await context.threads.run(Lane.QUERIES, queries.query, body, gate.user_of(request),
                                         client_of(request.scope, with_auth),
                                         streaming.shape_of(request, query_endpoint=True))

    @api.post("/query-stream")
    async def query_stream(request: Request) -> Response:
        body = await gate.read_body(request)
        if isinstance(body, KsqlResponse):
            return body
        return await context.threads.run(Lane.QUERIES, queries.query_stream, body,
                                         streaming.shape_of(request, query_endpoint=False),
                                         gate.user_of(request),
                                         client_of(request.scope, with_auth))

    @api.post("/close-query")
    async def close_query(request: Request) -> Response:
        body = await gate.read_body(request)
        if isinstance(body, KsqlResponse):
            return body
        parsed = streaming.parse_body(streaming.CloseQueryRequest, body, context.limits)
        if isinstance(parsed, str):
            return error_response(codes.BAD_REQUEST, parsed)
        assert isinstance(parsed, streaming.CloseQueryRequest)
        try:
            if context.push_queries is None:
                raise UnknownPushQueryError(f"No query with id {parsed.queryId}")
            await context.threads.run(Lane.QUERIES, context.push_queries.close, parsed.queryId,
                                      gate.user_of(request))
        except MetastoreError as error:
            return failure(error, parsed.queryId)
        return Response(status_code=200)

    return api


@dataclass(frozen=True)
class Printing:
    """A PRINT under way: its printer, and ``close`` to stop it and free its slot."""

    printer: TopicPrinter
    close: Callable[[], None]


Started = QueryResult | PushQuery | Printing
"""What a request's query is once started: a pull query's answer, a push query, a PRINT."""


class Queries:
    """The answers of ``/query`` and ``/query-stream``, on the queries lane's threads."""

    def __init__(self, context: ServerContext) -> None:
        self._context = context
        self._node = context.node
        self._threads = context.threads
        self._write_timeout = context.limits.stream_write_timeout_seconds
        self._prints = context.prints

    def query(self, body: bytes, user: str | None, client: str,
              shape: streaming.Shape = streaming.Shape.V1) -> Response:
        parsed = self._context.gate.parse_request(body)
        if isinstance(parsed, KsqlResponse):
            return parsed
        try:
            started = self.start_any(parsed, user, client)
        except MetastoreError as error:
            return failure(error, parsed.ksql)
        if isinstance(started, Printing):
            return streaming.ChunkedResponse(streaming.print_chunks(started.printer,
                                                                    self._threads),
                                             "text/plain", started.close, self._threads,
                                             self._write_timeout)
        return self._answer(started, shape, parsed.ksql)

    def _answer(self, started: QueryResult | PushQuery, shape: streaming.Shape,
                text: str) -> Response:
        """A query's answer in the ``shape`` its client accepts."""
        try:
            protobuf = streaming.protobuf_rows(started) if shape is streaming.Shape.PROTOBUF \
                else None
        except ValueError as error:
            if isinstance(started, PushQuery):
                started.close()
            return error_response(codes.BAD_REQUEST, f"The query's rows cannot be answered "
                                  f"as {PROTOBUF_MEDIA_TYPE}: {error}", text)
        if isinstance(started, PushQuery):
            if shape in (streaming.Shape.DELIMITED, streaming.Shape.JSON):
                chunks = streaming.stream_chunks(started, shape is streaming.Shape.DELIMITED,
                                                 self._threads)
            else:
                chunks = streaming.v1_chunks(started, self._threads, protobuf)
            return streaming.ChunkedResponse(chunks, shape.media_type, started.close,
                                             self._threads, self._write_timeout)
        if shape in (streaming.Shape.DELIMITED, streaming.Shape.JSON):
            return Response(streaming.pull_stream_body(started, shape is streaming.Shape.DELIMITED),
                            media_type=shape.media_type)
        return KsqlResponse(streaming.pull_v1_body(started, protobuf),
                            media_type=shape.media_type)

    def start_any(self, parsed: KsqlRequest, user: str | None, client: str) -> Started:
        """The query of a ``/query`` or ``/ws/query`` request, started (a pull query run)."""
        if parsed.commandSequenceNumber is not None:
            self._node.wait_for(parsed.commandSequenceNumber, self._node.config.read_timeout)
        statement, config = self._prepare(parsed.ksql, parsed.streamsProperties,
                                          parsed.sessionVariables, printable=True)
        self._node.check_read(statement, user)
        if isinstance(statement, PrintTopic):
            return self._start_print(statement)
        if statement.query.emit_changes:
            return self._start_push(statement, config, user, client)
        return self._run_pull(statement, config)

    def query_stream(self, body: bytes, shape: streaming.Shape, user: str | None,
                     client: str) -> Response:
        parsed = streaming.parse_body(streaming.QueryStreamRequest, body, self._context.limits)
        if isinstance(parsed, str):
            return error_response(codes.BAD_REQUEST, parsed)
        assert isinstance(parsed, streaming.QueryStreamRequest)
        try:
            statement, config = self._prepare(parsed.sql, parsed.properties,
                                              parsed.sessionVariables)
            assert isinstance(statement, SelectStatement)
            self._node.check_read(statement, user)
            started: QueryResult | PushQuery = (
                self._start_push(statement, config, user, client)
                if statement.query.emit_changes else self._run_pull(statement, config))
        except MetastoreError as error:
            return failure(error, parsed.sql)
        return self._answer(started, shape, parsed.sql)

    @staticmethod
    def _prepare(text: str, properties: Mapping[str, Any], session_variables: Mapping[str, Any],
                 printable: bool = False
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

    def _run_pull(self, statement: SelectStatement,
                  config: overrides.ConfigOverrides) -> QueryResult:
        if self._context.query_runner is None:
            raise SparkUnavailableError(NO_SPARK)
        result: QueryResult = self._context.query_runner(statement.text, config)
        return result

    def _start_push(self, statement: SelectStatement, config: overrides.ConfigOverrides,
                    user: str | None, client: str) -> PushQuery:
        if self._context.push_queries is None:
            raise SparkUnavailableError(NO_SPARK)
        return self._context.push_queries.start(statement, self._node.replica.image, config,
                                                 owner=user, client=client)

    def _start_print(self, statement: PrintTopic) -> Printing:
        """ksqlDB's PRINT: the topic's records as text lines as they arrive, until LIMIT or
        the client leaves; a slot of the node's PRINTs held until it is closed."""
        self._prints.acquire()
        try:
            printer = self._node.open_print(statement)
        except BaseException:
            self._prints.release()
            raise

        def end() -> None:
            printer.close()
            self._prints.release()

        return Printing(printer, end)
