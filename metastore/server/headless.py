"""Headless mode, ksqlDB's ``ksql.queries.file`` (``metastore server --queries-file``): a node
that runs a fixed file of statements and serves no statements or queries over its REST API.

ksqlDB's headless servers have no command topic: each executes the file on its own. Here the
catalog is the command log's, so the file is written to the log once, as one request whose id
is the file's digest: the first node of the service to start writes every statement of it in
one transaction (all or none); a node started later with the same file finds that request in
the log and writes nothing. Every node of the service must be started with the same file, as
ksqlDB asks: a node given another file meets what the log holds already (a stream that exists)
and does not start, with the statement's error. A file that changes makes a new service.

The file takes what ksqlDB's headless mode takes: CREATE STREAM and TABLE (AS SELECT), INSERT
INTO ... SELECT, CREATE TYPE, SET and UNSET, DEFINE and UNDEFINE; anything else stops the node
before anything is written. Its health, status and metrics are served as usual; the routes of
statements and queries answer 403 (:meth:`~metastore.server.http.request_gate.RequestGate.
refuse_interactive`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

from metastore.catalog.exceptions import TooLargeError, UnsupportedStatementError
from metastore.core.exceptions import MetastoreError
from metastore.server.node import Node
from metastore.sql import statements as st
from metastore.sql.variables import parse_request

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 1 << 20
READY_PATIENCE_SECONDS = 300.0
HEADLESS_STATEMENTS: dict[type[st.Statement], str] = {
    st.CreateSource: "CREATE STREAM, CREATE TABLE",
    st.CreateAsSelect: "CREATE STREAM AS SELECT, CREATE TABLE AS SELECT",
    st.InsertInto: "INSERT INTO ... SELECT", st.CreateType: "CREATE TYPE",
    st.SetProperty: "SET, UNSET", st.DefineVariable: "DEFINE", st.UndefineVariable: "UNDEFINE"}
"""The statements a queries file may hold, with their names in the refusal's message."""


class QueriesFileError(MetastoreError):
    """The queries file cannot be read, or holds what headless mode does not run."""

    code = "queries_file"


def read_queries_file(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise QueriesFileError(f"the queries file {path} is larger than {MAX_FILE_BYTES} "
                                   "bytes")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise QueriesFileError(f"Could not read the query file: {path}. Details: "
                               f"{error}") from error


def request_id(text: str) -> str:
    """The request id the file is written under: the same file, the same request."""
    return "queries-file-" + hashlib.sha256(text.encode()).hexdigest()[:40]


def run_queries_file(node: Node, path: Path, ready: Callable[[float], bool] | None = None,
                     before: Callable[[], None] = lambda: None) -> None:
    """Write the statements of the queries file ``path`` through ``node``, once for the
    service, once ``ready`` (the node's READY, within the seconds it is given; by default its
    replica's) and what must come ``before`` them has run; raises :class:`QueriesFileError` or
    the statement's error, with nothing written, when the file cannot run."""
    text = read_queries_file(path)
    statements = parse_request(text, {})
    refused = [s for s in statements if not isinstance(s, tuple(HEADLESS_STATEMENTS))]
    if refused:
        raise UnsupportedStatementError(
            f"Unsupported statement. Only the following statements are supported in headless "
            f"mode: {', '.join(HEADLESS_STATEMENTS.values())}. Found: {refused[0].text}")
    if not statements:
        raise QueriesFileError(f"the queries file {path} holds no statement")
    if not (ready or node.replica.wait_ready)(READY_PATIENCE_SECONDS):
        raise QueriesFileError(f"the node was not READY within {READY_PATIENCE_SECONDS:g} s "
                               f"({node.state.value}); the queries file {path} is not written")
    before()
    try:
        entities = node.execute(statements, request_id=request_id(text),
                                submitter="queries-file")
    except TooLargeError as error:
        raise QueriesFileError(f"the queries file {path}: {error.message} (raise it with "
                               "--limit max_statements=N)") from error
    written = sum(1 for entity in entities if entity.get("@type") == "currentStatus")
    log.info("headless mode: the queries file %s, %d statements (%d in the log)", path,
             len(statements), written)
