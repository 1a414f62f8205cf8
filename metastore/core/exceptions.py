"""The root of every error metastore raises on purpose.

Each package adds typed subclasses in its own ``exceptions.py``; every error carries a
machine-readable ``code`` (a short stable string) so callers never parse messages. Mapping to
ksqlDB's numeric error codes happens at the HTTP edge only.
"""

from __future__ import annotations


class MetastoreError(Exception):
    """Base class of all metastore errors."""

    code: str = "metastore_error"
    user_error: bool = False
    """Whether a query that meets it at run time has a USER error (ksqlDB's
    ``QueryError.Type``): one its user fixes, not the service's operator."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class PropertyValueError(MetastoreError):
    """A named property (a ksqlDB ``ksql.*`` or ``ssl.*`` setting) with a value it cannot
    take: ``name`` and ``reason``."""

    code = "bad_property_value"

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason
