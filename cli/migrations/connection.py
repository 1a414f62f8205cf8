"""The node a project's ``ksql.server.url`` names, reached through the CLI's ``KsqlClient``: its
statements, pull queries and server info, every failure turned into a :class:`MigrationError`
(exit 2 when the server cannot be reached, with its URL; exit 1 when it refuses a statement)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from cli.client import ClientError, KsqlClient, StatementFailedError
from cli.migrations.config import BASIC_AUTH_PASSWORD, BASIC_AUTH_USERNAME, MigrationConfig
from cli.migrations.errors import MigrationError, usage_error
from cli.migrations.properties import load_properties


class Server:
    """One connection to the project's node, closed on leaving a ``with`` block."""

    def __init__(self, config: MigrationConfig, headers: Mapping[str, str] | None = None) -> None:
        self.config = config
        self.url = config.server_url
        self._client = KsqlClient(self.url, auth=config.basic_auth, headers=headers)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._client.close()

    def execute(self, text: str, failure: str = "", properties: Mapping[str, Any] | None = None,
                variables: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """Run statements over ``/ksql``; a refusal raises ``<failure>: <the server's message>``
        (the message alone without ``failure``)."""
        try:
            return self._client.ksql(text, properties=dict(properties or {}),
                                     variables=dict(variables or {}))
        except StatementFailedError as error:
            raise MigrationError(f"{failure}: {error.message}" if failure else error.message) \
                from error
        except ClientError as error:
            raise self._unreachable(error) from error

    def rows(self, query: str, failure: str) -> list[list[Any]]:
        """The rows of one pull query over ``/query-stream``."""
        try:
            items = list(self._client.stream_query(query))
        except StatementFailedError as error:
            raise MigrationError(f"{failure}: {error.message}") from error
        except ClientError as error:
            raise self._unreachable(error) from error
        return [item for item in items if isinstance(item, list)]

    def service_id(self) -> str:
        """The node's ksqlServiceId, from ``/info``."""
        try:
            info = self._client.get("/info")
        except (ClientError, StatementFailedError) as error:
            raise self._unreachable(error) from error
        try:
            return str(info["KsqlServerInfo"]["ksqlServiceId"])
        except (KeyError, TypeError):
            raise usage_error(f"{self.url}/info did not answer as a ksqlDB server: "
                              f"{str(info)[:200]}") from None

    def _unreachable(self, error: Exception) -> MigrationError:
        message = str(error)
        if "requires credentials" in message:  # KsqlClient's answer to a 401
            message = (f"the server at {self.url} requires credentials: set {BASIC_AUTH_USERNAME} "
                       f"and {BASIC_AUTH_PASSWORD} in {self.config.path}")
        elif self.url not in message:
            message = f"{self.url}: {message}"
        return usage_error(message)


def load_headers(path: Path | None) -> dict[str, str]:
    """``apply --headers``: a file of ``Name: value`` or ``Name=value`` lines."""
    if path is None:
        return {}
    try:
        return load_properties(path)
    except MigrationError as error:
        raise usage_error(f"Could not parse headers file '{path}': {error}") from error
