"""Errors of the Spark side."""

from __future__ import annotations

from metastore.exceptions import MetastoreError


class SparkError(MetastoreError):
    code = "spark_error"


class SparkUnavailableError(SparkError):
    """Spark is not running on this node (disabled, starting, or failed to start)."""

    code = "spark_unavailable"


class UnsupportedQueryError(SparkError):
    code = "unsupported_query"


class SparkQueryError(SparkError):
    """Spark rejected or failed the query (the client's query, not the node, is at fault)."""

    code = "spark_query"

    @classmethod
    def of(cls, doing: str, error: BaseException) -> SparkQueryError:
        """Spark's ``error`` while ``doing`` something with a query, as its first line."""
        text = str(error).strip()
        first = text.splitlines()[0] if text else type(error).__name__
        return cls(f"Spark could not {doing}: {first[:1000]}")
