"""Errors of the connector statements: what Kafka Connect refused (with its reason), a connector
that exists or does not, a config that does not validate, and a Connect that does not answer.
Each is the statement's error, never the server's: nothing was created or dropped."""

from __future__ import annotations

from metastore.core.exceptions import MetastoreError


class ConnectError(MetastoreError):
    """Kafka Connect refused a connector statement; ``status``: its HTTP status, if it answered,
    and ``reason`` what it said (its body), else the message."""

    code = "connect"

    def __init__(self, message: str, status: int | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = message if reason is None else reason


class ConnectorExistsError(ConnectError):
    """CREATE CONNECTOR of a name Connect already has (without IF NOT EXISTS)."""

    code = "connector_exists"


class ConnectorNotFoundError(ConnectError):
    """DROP or DESCRIBE CONNECTOR of a name Connect does not have."""

    code = "connector_not_found"


class ConnectorValidationError(ConnectError):
    """Connect's validation of a CREATE CONNECTOR's config found errors (or it names no class)."""

    code = "connector_invalid"


class ConnectUnavailableError(ConnectError):
    """Connect did not answer (refused, timed out), or answered what is not its API's JSON."""

    code = "connect_unavailable"
