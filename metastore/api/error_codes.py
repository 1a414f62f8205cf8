"""ksqlDB's numeric error codes, assigned to metastore's typed errors at the edge only."""

from __future__ import annotations

from metastore.catalog.exceptions import StatementError
from metastore.exceptions import MetastoreError
from metastore.sql.exceptions import ParseError

BAD_REQUEST = 40000
BAD_STATEMENT = 40001
QUERY_ENDPOINT = 40002
NOT_FOUND = 40400
UNAUTHORIZED = 40100
REQUEST_TIMEOUT = 40800
PAYLOAD_TOO_LARGE = 41300
TOO_MANY_REQUESTS = 42900
SERVER_ERROR = 50000
COMMAND_QUEUE_CATCHUP_TIMEOUT = 50301
SERVER_NOT_READY = 50302


def error_code(error: MetastoreError) -> int:
    return BAD_STATEMENT if isinstance(error, ParseError | StatementError) else SERVER_ERROR


__all__ = ["BAD_REQUEST", "BAD_STATEMENT", "COMMAND_QUEUE_CATCHUP_TIMEOUT", "NOT_FOUND",
           "PAYLOAD_TOO_LARGE", "QUERY_ENDPOINT", "REQUEST_TIMEOUT", "SERVER_ERROR",
           "SERVER_NOT_READY", "TOO_MANY_REQUESTS", "UNAUTHORIZED", "error_code"]
