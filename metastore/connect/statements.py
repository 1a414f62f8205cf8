"""The connector statements, executed against Kafka Connect as ksqlDB's executors do, answered
with ksqlDB's entities.

They are never written to the command log (ksqlDB's are not written to its command topic):
Connect keeps connectors in its own topics, so the node that takes the statement executes it
once, and a node replaying the log meets none. Each is answered with ksqlDB's entity:

- CREATE CONNECTOR: ``connector_info`` (Connect's answer, its config masked as the statement's
  text is); :meth:`ConnectorStatements.check`, before any statement of the request acts, fails
  a name taken (compared without case) with ``Connector <name> already exists`` unless IF NOT
  EXISTS (then answered with a ``warning_entity``), and has Connect validate the config
  (``Validation error: <field> - <errors>``), so a refused one creates nothing;
- DROP CONNECTOR: ``drop_connector``; an unknown name with IF EXISTS ``Connector '<name>' does not
  exist.``;
- DESCRIBE CONNECTOR: ``connector_description``: its class, Connect's status, the topics it uses
  and the streams and tables over them;
- SHOW [SOURCE | SINK] CONNECTORS: ``connector_list``, each with its state as ksqlDB sums it up
  (``RUNNING (1/1 tasks RUNNING)``);
- SHOW CONNECTOR PLUGINS: ``connector_plugins_list`` (ksqlDB's ``connectorsPlugins``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metastore.catalog.image import Image
from metastore.connect.client import ConnectClient
from metastore.connect.exceptions import (
    ConnectError,
    ConnectorExistsError,
    ConnectorNotFoundError,
    ConnectorValidationError,
)
from metastore.engine.responses import base_entity, warning
from metastore.sql import statements as st
from metastore.sql.connector_config import CONNECTOR_CLASS, MASK

Entity = dict[str, Any]
SourceDescriber = Callable[[str], dict[str, Any]]
"""A catalog source's description (ksqlDB's SourceDescription) by name."""
SHOWN = frozenset({CONNECTOR_CLASS, "name"})
"""The config keys whose values an answer shows; the others are masked."""


class ConnectorStatements:
    """Executes connector statements on the Connect cluster ``client`` calls."""

    def __init__(self, client: ConnectClient) -> None:
        self.client = client

    def answer(self, statement: st.ConnectorStatement, image: Image,
               describe: SourceDescriber) -> Entity:
        if isinstance(statement, st.CreateConnector):
            return self._create(statement)
        if isinstance(statement, st.DropConnector):
            return self._drop(statement)
        if isinstance(statement, st.DescribeConnector):
            return self._describe(statement, image, describe)
        if isinstance(statement, st.ListConnectors):
            return self._list(statement)
        assert isinstance(statement, st.ListConnectorPlugins)
        return self._plugins(statement)

    def check(self, statement: st.ConnectorStatement) -> None:
        """ksqlDB's validation of a statement before any of its request acts: a CREATE's name
        is free (unless IF NOT EXISTS) and Connect takes its config."""
        if not isinstance(statement, st.CreateConnector):
            return
        if not statement.if_not_exists and self._exists(statement.name):
            raise ConnectorExistsError(f"Connector {statement.name} already exists", 409)
        self._validate(statement.config)

    def _create(self, statement: st.CreateConnector) -> Entity:
        """Executed once :meth:`check` passed (no second validation, as in ksqlDB)."""
        if statement.if_not_exists and self._exists(statement.name):
            return warning(statement, f"Connector {statement.name} already exists")
        try:
            info = self.client.create(statement.name, statement.config)
        except ConnectError as error:
            raise _typed(error) from error
        return {**base_entity(statement, "connector_info"), "info": _masked_info(info)}

    def _exists(self, name: str) -> bool:
        try:
            return any(existing.lower() == name.lower() for existing in self.client.connectors())
        except ConnectError as error:
            raise _typed(error) from error

    def _validate(self, config: dict[str, str]) -> None:
        """Connect's validation of ``config``, as ksqlDB words its errors."""
        connector_class = config.get(CONNECTOR_CLASS)
        if connector_class is None:
            shown = ", ".join(f"{key}={value if key in SHOWN else MASK}"
                              for key, value in config.items())
            raise ConnectorValidationError(f"Validation error: Connector config {{{shown}}} "
                                           "contains no connector type", 400)
        if not connector_class.strip():
            raise ConnectorValidationError("Validation error: Connector type cannot be empty",
                                           400)
        try:
            answer = self.client.validate(connector_class, config)
        except ConnectError as error:
            raise ConnectorValidationError(f"Validation error: {error.reason}",
                                           error.status) from error
        errors = [f"{value.get('name')} - {'. '.join(map(str, value['errors']))}"
                  for value in (c.get("value") or {} for c in answer.get("configs") or [])
                  if isinstance(value, dict) and value.get("errors")]
        if errors:
            raise ConnectorValidationError("Validation error: " + "\n".join(errors), 400)

    def _drop(self, statement: st.DropConnector) -> Entity:
        try:
            self.client.delete(statement.name)
        except ConnectError as error:
            if error.status == 404 and statement.if_exists:
                return warning(statement, f"Connector '{statement.name}' does not exist.")
            raise _typed(error) from error
        return {**base_entity(statement, "drop_connector"), "connectorName": statement.name}

    def _describe(self, statement: st.DescribeConnector, image: Image,
                  describe: SourceDescriber) -> Entity:
        try:
            status = self.client.status(statement.name)
            info = self.client.info(statement.name)
        except ConnectError as error:
            raise _typed(error) from error
        entity = base_entity(statement, "connector_description")
        try:
            topics = self.client.topics(statement.name)
        except ConnectError as error:
            topics = []
            if error.status != 404:
                entity["warnings"].append({"message": "Could not list related topics due to "
                                                      f"error: {error.message}"})
        sources = [describe(source.name) for source in image.sources.values()
                   if source.topic in topics]
        return {**entity, "connectorClass": (info.get("config") or {}).get(CONNECTOR_CLASS),
                "status": status, "sources": sources, "topics": topics}

    def _list(self, statement: st.ListConnectors) -> Entity:
        try:
            names = self.client.connectors()
        except ConnectError as error:
            raise _typed(error) from error
        entity = base_entity(statement, "connector_list")
        listed: list[dict[str, Any]] = []
        for name in names:
            try:
                info, status = self.client.info(name), self.client.status(name)
            except ConnectError as error:  # dropped meanwhile, or Connect failing it
                entity["warnings"].append({"message": f"Could not describe connector {name}: "
                                                      f"{error.message}"})
                if statement.kind is None:
                    listed.append({"name": name, "type": "unknown"})
                continue
            kind = str(info.get("type") or "unknown")
            if statement.kind is None or kind == statement.kind.value.lower():
                listed.append({"name": name, "type": kind,
                               "className": (info.get("config") or {}).get(CONNECTOR_CLASS),
                               "state": summary(status)})
        return {**entity, "connectors": listed}

    def _plugins(self, statement: st.ListConnectorPlugins) -> Entity:
        try:
            plugins = self.client.plugins()
        except ConnectError as error:
            raise _typed(error) from error
        return {**base_entity(statement, "connector_plugins_list"), "connectorsPlugins": [
            {key: value for key, value in (("className", p.get("class")),
                                           ("type", p.get("type")),
                                           ("version", p.get("version"))) if value is not None}
            for p in plugins]}


def summary(status: dict[str, Any]) -> str:
    """A connector's state as ksqlDB sums it up: Connect's state unless RUNNING, else
    ``RUNNING (<running>/<tasks> tasks RUNNING)`` (``WARNING`` when no task of several runs)."""
    state = str((status.get("connector") or {}).get("state") or "UNKNOWN")
    if state != "RUNNING":
        return state
    tasks = status.get("tasks") or []
    running = sum(1 for task in tasks if task.get("state") == "RUNNING")
    shown = "WARNING" if tasks and not running else "RUNNING"
    return f"{shown} ({running}/{len(tasks)} tasks RUNNING)"


def _typed(error: ConnectError) -> ConnectError:
    """``error`` as the statement's error: unknown connectors and names taken typed."""
    kind = {404: ConnectorNotFoundError, 409: ConnectorExistsError}.get(error.status or 0,
                                                                        type(error))
    return kind(error.message, error.status, error.reason)


def _masked_info(info: dict[str, Any]) -> dict[str, Any]:
    config = info.get("config") or {}
    return {**info, "config": {key: value if key in SHOWN else MASK.strip("'")
                               for key, value in config.items()}}


__all__ = ["ConnectorStatements", "summary"]
