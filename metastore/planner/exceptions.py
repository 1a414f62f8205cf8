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


class RealTimeSlotsError(QueryRuntimeError):
    """A real-time query needs more task slots than the node has free."""

    code = "real_time_slots"
    user_error = True

    def __init__(self, query_id: str, needed: int, free: int, slots: int, kept: int) -> None:
        super().__init__(
            f"Not enough task slots for real-time mode: {query_id} reads {needed} source "
            f"partition{'s' if needed != 1 else ''} and needs a task slot for each, the node's "
            f"Spark has {slots}, of which {free} are free ({kept} kept for its queries in "
            "micro-batches). Give the node more cores, or run the query in micro-batches.")
        self.query_id = query_id
        self.needed = needed
        self.free = free
        self.slots = slots
        self.kept = kept


class AssignmentError(MetastoreError):
    """The query-assignment group or its topic is unusable."""

    code = "query_assignment"


class PushQueryLimitError(MetastoreError):
    """The node runs as many push queries as it may (``--max-push-queries``)."""

    code = "max_push_queries"


class UnknownPushQueryError(MetastoreError):
    """``/close-query`` names no push query running on this node."""

    code = "unknown_push_query"

