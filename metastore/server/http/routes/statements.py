"""``POST /ksql``: statements validated and written through the node (or forwarded to the
service's writer), answered with ksqlDB's entities; a SELECT or PRINT is sent to ``/query``.
``POST /ksql/terminate`` empties the catalog the same way (:mod:`~metastore.server.http.
cluster_termination`)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping

from fastapi import APIRouter, Request
from fastapi.responses import Response

from metastore.core.exceptions import MetastoreError
from metastore.engine import access, overrides
from metastore.log.exceptions import NotReadyError, NotWrittenError, OutcomeUnknownError
from metastore.log.reader import NodeState
from metastore.server.http import cluster_termination
from metastore.server.http import error_codes as codes
from metastore.server.http.answers import (
    KSQL_MEDIA_TYPE,
    KsqlRequest,
    KsqlResponse,
    error_response,
    failure,
    outcome_label,
)
from metastore.server.http.cluster_termination import TerminateRequestError
from metastore.server.http.concurrency import Lane
from metastore.server.http.context import ServerContext
from metastore.server.http.forwarding import FORWARDED_BY, Forwarded, forwarded_budget
from metastore.server.http.http_limits import decode_json
from metastore.server.http.push_termination import push_query_named, terminate_push_query
from metastore.sql import variables
from metastore.sql.statements import (
    ConnectorStatement,
    InsertValues,
    PrintTopic,
    SelectStatement,
    Statement,
)

QUERY_ENDPOINT_MESSAGE = ("The following statement types should be issued to the websocket "
                          "endpoint '/query':\n\t* PRINT\n\t* SELECT")
_KSQL_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": KsqlRequest.model_json_schema()},
    KSQL_MEDIA_TYPE: {"schema": KsqlRequest.model_json_schema()}}}}


def router(context: ServerContext) -> APIRouter:
    api = APIRouter()
    statements = Statements(context)

    @api.post("/ksql", response_class=KsqlResponse, openapi_extra=_KSQL_BODY)
    async def ksql(request: Request) -> Response:
        body = await context.gate.read_body(request)
        if isinstance(body, KsqlResponse):
            context.metrics.count_request("bad_request")
            return body
        credentials = {name: request.headers[name] for name in ("authorization",)
                       if name in request.headers}
        may_forward = FORWARDED_BY not in request.headers
        budget = None if may_forward else forwarded_budget(request.headers)
        return await context.threads.run(Lane.STATEMENTS, statements.execute_body, body,
                                         credentials, may_forward, budget,
                                         context.gate.user_of(request))

    @api.post("/ksql/terminate", response_class=KsqlResponse)
    async def terminate(request: Request) -> Response:
        body = await context.gate.read_body(request)
        if isinstance(body, KsqlResponse):
            return body
        credentials = {name: request.headers[name] for name in ("authorization",)
                       if name in request.headers}
        return await context.threads.run(Lane.STATEMENTS, statements.terminate_cluster, body,
                                         credentials, context.gate.user_of(request))

    return api


class Statements:
    """The answers of ``/ksql``, on the statements lane's threads."""

    def __init__(self, context: ServerContext) -> None:
        self._context = context
        self._node = context.node
        self._metrics = context.metrics

    def execute_body(self, body: bytes, credentials: Mapping[str, str],
                     may_forward: bool, budget: float | None, user: str | None) -> Response:
        parsed = self._context.gate.parse_request(body)
        if isinstance(parsed, KsqlResponse):
            self._metrics.count_request("bad_request")
            return parsed
        return self.execute(parsed, credentials, may_forward, budget, user)

    def execute(self, body: KsqlRequest, credentials: Mapping[str, str],
                may_forward: bool, budget: float | None = None,
                user: str | None = None) -> Response:
        """Answer a /ksql request; ``may_forward``: a write may go to the service's current
        writer (:mod:`metastore.server.http.forwarding`) with the client's ``credentials``;
        ``budget``: the seconds a forwarded request may take here; ``user``: who asks (None
        without authentication)."""
        started = time.perf_counter()
        try:  # ksqlDB checks the overrides before the statements: a bad request, 40000
            config = overrides.resolve(body.streamsProperties, strict=True).with_defaults(
                self._node.config.query_defaults)
        except overrides.ConfigError as error:
            self._metrics.count_request("bad_request")
            return error_response(codes.BAD_REQUEST, error.message)
        try:  # sessionVariables, DEFINE and UNDEFINE substitute at parsing (sql.variables)
            statements = variables.parse_request(
                body.ksql, body.sessionVariables,
                variables.substitution_enabled(body.streamsProperties))
            refused = self._refused(statements, body.ksql)
            if refused is not None:
                return refused
            push_query = push_query_named(self._context, statements)
            if push_query is not None:
                return terminate_push_query(self._context, *push_query, body, credentials,
                                            user, may_forward)
            return self._write(body, statements, config, credentials, may_forward, budget,
                               started, user or "")
        except MetastoreError as error:
            self._metrics.count_request(outcome_label(error))
            return self._write_failed(error, body.ksql)

    def terminate_cluster(self, body: bytes, credentials: Mapping[str, str],
                          user: str | None) -> Response:
        """``/ksql/terminate`` (:mod:`~metastore.server.http.cluster_termination`): the
        statements that empty the catalog, written as any request's."""
        try:
            patterns = cluster_termination.delete_patterns(
                decode_json(body, self._context.limits.max_json_depth))
        except (TerminateRequestError, ValueError) as error:
            message = str(error) if isinstance(error, TerminateRequestError) \
                else f"Invalid JSON in request: {error}"
            return error_response(codes.BAD_REQUEST, message)
        image = self._node.replica.image
        try:  # its requests run one by one: a refusal after the first would leave half
            self._node.authorize([access.Need(access.DELETE, topic) for topic in
                                  cluster_termination.deleted_topics(image, patterns)], user)
        except MetastoreError as error:
            return failure(error, cluster_termination.STATEMENT_TEXT)
        texts, dropped = cluster_termination.requests(image, patterns,
                                                      self._node.config.limits.max_statements)
        sequence = self._node.replica.position - 1
        for text in texts:
            answer = self.execute(KsqlRequest(ksql=text), credentials, may_forward=True,
                                  user=user)
            if answer.status_code != 200:
                return answer
            sequence = max([sequence, *(entity.get("commandSequenceNumber", -1)
                                        for entity in json.loads(bytes(answer.body)))])
        if self._context.push_queries is not None:  # as ksqlDB's engine closes its
            self._context.push_queries.stop()     # transient queries (this node's)
        return KsqlResponse(cluster_termination.terminated(sequence, dropped))

    def _refused(self, statements: list[Statement], text: str) -> KsqlResponse | None:
        """The answer to statements this endpoint does not take now, or None."""
        if not statements:
            return error_response(codes.BAD_REQUEST, "No statement in request", text)
        selects = [s for s in statements if isinstance(s, SelectStatement | PrintTopic)]
        if selects:
            return error_response(codes.QUERY_ENDPOINT, QUERY_ENDPOINT_MESSAGE, selects[0].text)
        if any(s.writes_log for s in statements) and self._node.state in (
                NodeState.STARTING, NodeState.CATCHING_UP):
            return error_response(codes.SERVER_NOT_READY, "The node is catching up with the "
                                  "command log; retry shortly.")
        return None

    def _write(self, body: KsqlRequest, statements: list[Statement],
               config: overrides.ConfigOverrides, credentials: Mapping[str, str],
               may_forward: bool, budget: float | None, started: float,
               submitter: str) -> Response:
        """Execute ``statements`` here, or forward their writes to the service's writer (which
        knows the user by the same credentials); ``submitter``: the authenticated user, whom
        the command log records as having written them."""
        node = self._node
        timeout: float | None = None if budget is None else min(
            budget, node.config.writer.request_timeout)
        forward_failed = False
        url = self._writer_url(statements) if may_forward else None
        if url is not None:
            assert self._context.forwarder is not None
            if body.commandSequenceNumber is not None:  # as this node would, before writing
                node.wait_for(body.commandSequenceNumber, node.config.read_timeout)
            body = body.model_copy(update={"requestId": body.requestId or str(uuid.uuid4())})
            answer = self._context.forwarder.forward(url, body.model_dump(exclude_none=True),
                                                     credentials)
            if answer is not None:
                return self._forwarded(answer, started)
            forward_failed = True
            timeout = max(node.config.writer.request_timeout
                          - (time.perf_counter() - started), 1.0)
        try:
            entities = node.execute(statements, request_id=body.requestId,
                                    submitter=submitter, user=submitter or None,
                                    command_sequence_number=body.commandSequenceNumber,
                                    config=config, timeout=timeout)
        except NotWrittenError as error:
            if not forward_failed:
                raise
            raise OutcomeUnknownError(  # the writer may have had it before it gave up
                f"The request was sent to the service's writer, which did not answer in "
                f"time, and this node did not write it ({error.message}).",
                body.requestId) from error
        if any(e.get("@type") == "currentStatus" and "commandSequenceNumber" in e
               for e in entities):
            self._metrics.statement_latency.observe(time.perf_counter() - started)
        self._metrics.count_request("ok")
        return KsqlResponse(entities)

    def _writer_url(self, statements: list[Statement]) -> str | None:
        """The service's writer to forward ``statements`` to, or None to execute them here."""
        forwarder = self._context.forwarder
        writes = any(s.writes_log for s in statements)
        if forwarder is None or not writes or self._node.state is not NodeState.READY \
                or any(isinstance(s, InsertValues | ConnectorStatement) for s in statements):
            return None  # acts outside the log: a forward that timed out must not act twice
        return forwarder.writer_url()

    def _forwarded(self, answer: Forwarded, started: float) -> Response:
        """The writer's answer to a forwarded write, once this node has applied it."""
        if answer.status != 200:
            self._metrics.count_request("statement_error")
            return KsqlResponse(answer.content, status_code=answer.status)
        newest = answer.newest_sequence_number
        if newest is not None:
            self._node.replica.wait_for_position(newest + 1,
                                                 self._node.config.writer.apply_timeout)
            self._metrics.statement_latency.observe(time.perf_counter() - started)
        self._metrics.count_request("ok")
        return KsqlResponse(answer.content)

    def _write_failed(self, error: MetastoreError, text: str) -> KsqlResponse:
        if isinstance(error, NotReadyError) and self._node.state is NodeState.DEGRADED:
            return error_response(codes.SERVER_ERROR, error.message)
        if codes.classify(error).code == codes.SERVER_ERROR and not isinstance(
                error, NotWrittenError | OutcomeUnknownError):
            return failure(error, text, f"The statement was NOT written: {error.message}")
        return failure(error, text)
