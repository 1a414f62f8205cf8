"""The answers every route of the REST server shares: the ``/ksql`` request body, ksqlDB's media
type and error entities (``statement_error`` / ``generic_error``), and the one mapping of a typed
error to its answer (the codes: :mod:`metastore.server.http.error_codes`)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from metastore.core.exceptions import MetastoreError
from metastore.log.exceptions import NotReadyError, NotWrittenError, OutcomeUnknownError
from metastore.server.http import error_codes as codes
from metastore.sql.connector_config import masked_text
from metastore.sql.exceptions import ParseError

KSQL_MEDIA_TYPE = "application/vnd.ksql.v1+json"

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
    """The answer to a typed error, from the one table of ksqlDB codes (server/http/error_codes.py)."""
    answer = codes.classify(error)
    statement = None
    if answer.code == codes.BAD_STATEMENT:
        statement = (error.statement or text) if isinstance(error, ParseError) else text
    body: dict[str, Any] = {"@type": "generic_error" if statement is None else "statement_error",
                            "error_code": answer.code,
                            "message": masked_text(message or error.message)}
    if statement is not None:
        body |= {"statementText": masked_text(statement), "entities": []}
    if isinstance(error, OutcomeUnknownError):  # what a client needs to learn the outcome
        body |= {"requestId": error.request_id, "commandIds": list(error.command_ids)}
    return KsqlResponse(body, status_code=answer.http_status)


_OUTCOMES: tuple[tuple[type[MetastoreError], str], ...] = (
    (NotWrittenError, "not_written"), (OutcomeUnknownError, "outcome_unknown"),
    (NotReadyError, "not_ready"))


def outcome_label(error: MetastoreError) -> str:
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


