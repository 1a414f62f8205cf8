"""Errors of the persistent-query runtime."""

from __future__ import annotations

from metastore.catalog.exceptions import UnsupportedStatementError
from metastore.core.exceptions import MetastoreError


class UnsupportedByRuntimeError(UnsupportedStatementError):
    """A persistent query the Spark runtime cannot run: rejected at validation, never written."""

    code = "unsupported_by_runtime"


class QueryRuntimeError(MetastoreError):
    """A persistent query could not be compiled or started on this node."""

    code = "query_runtime"


class AssignmentError(MetastoreError):
    """The query-assignment group or its topic is unusable."""

    code = "query_assignment"


class PushQueryLimitError(MetastoreError):
    """The node runs as many push queries as it may (``--max-push-queries``)."""

    code = "max_push_queries"


class UnknownPushQueryError(MetastoreError):
    """``/close-query`` names no push query running on this node."""

    code = "unknown_push_query"

