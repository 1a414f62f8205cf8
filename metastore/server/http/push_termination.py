"""``TERMINATE <push query id>`` through ``/ksql``: as ksqlDB's, a push query is stopped on the
node that runs it, never through the command log.

A TERMINATE naming a query the catalog does not hold, but that a node of the service lists as a
push query it runs (its heartbeat, :func:`metastore.runtime.status.push_queries`), is answered
here: this node closes it when it runs it, or forwards the request to the node that does, with
the client's credentials (a push query started by an authenticated user is that user's to stop).
Anything else goes on to validation, which refuses an unknown query id as ksqlDB does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metastore.catalog.exceptions import UnknownQueryError
from metastore.core.exceptions import MetastoreError
from metastore.server.http.answers import KsqlRequest, KsqlResponse, failure
from metastore.server.http.context import ServerContext
from metastore.sql.statements import Statement, Terminate


def push_query_named(context: ServerContext, statements: list[Statement]
                     ) -> tuple[Terminate, Mapping[str, Any]] | None:
    """The TERMINATE of ``statements`` (alone in its request) and the push query it names, as
    the service lists it (with its ``id``); None when the request is anything else."""
    if len(statements) != 1 or not isinstance(statements[0], Terminate):
        return None
    statement = statements[0]
    query_id, node = statement.query_id, context.node
    if query_id is None or query_id in node.replica.image.queries or node.query_status is None:
        return None
    wanted = query_id.upper()  # ksqlDB's query ids compare without case
    for listed_id, listed in node.query_status().items():
        if listed_id.upper() == wanted and listed.get("queryType") == "PUSH":
            return statement, {**listed, "id": listed_id}
    return None


def terminate_push_query(context: ServerContext, statement: Terminate, listed: Mapping[str, Any],
                         body: KsqlRequest, credentials: Mapping[str, str], user: str | None,
                         may_forward: bool) -> KsqlResponse:
    """Stop the push query ``listed``: here when this node runs it, else on its node."""
    assert statement.query_id is not None
    query_id = statement.query_id
    refused = UnknownQueryError(f"Failed to terminate query with query ID: '{query_id}'",
                                query_id)
    if listed.get("ownerNode") == context.node.config.node_id:
        try:
            if context.push_queries is None:
                raise refused
            context.push_queries.close(str(listed["id"]), user)
        except MetastoreError:
            return failure(refused, statement.text)
        return KsqlResponse([{"@type": "terminate_query", "statementText": statement.text,
                              "queryId": query_id, "wasTerminated": True, "warnings": []}])
    url = listed.get("ownerUrl")
    if not may_forward or context.forwarder is None or not isinstance(url, str) or not url:
        return failure(refused, statement.text)
    answer = context.forwarder.forward(url, body.model_dump(exclude_none=True), credentials)
    if answer is None:
        return failure(refused, statement.text)
    return KsqlResponse(answer.content, status_code=answer.status)
