"""Errors of the Spark side."""

from __future__ import annotations

import re

from metastore.core.exceptions import MetastoreError

_RAISED = re.compile(r"^\[USER_RAISED_EXCEPTION\] (.*?)(?: SQLSTATE: \w+)?$")
"""A query's own ``raise_error`` (a function past its bound), as Spark words it."""


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
        """Spark's ``error`` while ``doing`` something with a query, as its first line (the
        JVM's root cause, where py4j wraps it; the query's own message, where it raised one)."""
        text = _root_cause(error).strip()
        first = text.splitlines()[0] if text else type(error).__name__
        raised = _RAISED.match(first)
        if raised is not None:
            return cls(raised.group(1)[:1000])
        return cls(f"Spark could not {doing}: {first[:1000]}")


def _root_cause(error: BaseException) -> str:
    """The message of the innermost cause of a JVM exception (py4j's ``java_exception``), or
    ``error``'s own text."""
    try:
        cause = getattr(error, "java_exception", None)
        if cause is None:
            return str(error)
        while cause.getCause() is not None:
            cause = cause.getCause()
        return str(cause.getMessage() or cause.toString())
    except Exception:  # the JVM is gone (py4j's str() of a Java exception asks it too)
        return type(error).__name__


def first_line(error: BaseException, limit: int = 200) -> str:
    """The first line of ``error``'s text, or its type's name: the text of a py4j Java exception
    is asked of the JVM, and a dying one fails that too."""
    try:
        text = str(error).strip()
    except Exception:  # py4j's str() of a Java exception calls the JVM
        text = ""
    return (text.splitlines() or [type(error).__name__])[0][:limit]


class AnswerTooLargeError(SparkQueryError):
    """A pull query's answer is larger than one answer may be."""

    code = "answer_too_large"


class PullQueryTimeoutError(SparkQueryError):
    """A pull query ran out of time and its Spark jobs were cancelled."""

    code = "pull_query_timeout"
