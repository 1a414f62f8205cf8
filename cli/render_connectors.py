"""The connector entities as ksqlDB's console prints them: created and dropped as a message,
lists as tables (``Connector Name | Type | Class | Status``, ``Class | Type | Version``), a
description as ``Name : ...`` lines with its tasks, its sources and its topics."""

from __future__ import annotations

from typing import Any

import typer

from cli.output import print_table

KINDS = frozenset({"connector_info", "drop_connector", "connector_list",
                   "connector_plugins_list", "connector_description"})


def render_connector_entity(entity: dict[str, Any]) -> None:
    kind = entity.get("@type")
    if kind == "connector_info":
        print_table(["Message"], [[f"Created connector {entity['info'].get('name')}"]])
    elif kind == "drop_connector":
        print_table(["Message"], [[f'Dropped connector "{entity.get("connectorName")}"']])
    elif kind == "connector_list":
        print_table(["Connector Name", "Type", "Class", "Status"],
                    [[c.get("name"), str(c.get("type") or "unknown").upper(),
                      c.get("className") or "", c.get("state") or ""]
                     for c in entity.get("connectors") or []])
    elif kind == "connector_plugins_list":
        print_table(["Class", "Type", "Version"],
                    [[p.get("className"), str(p.get("type") or "unknown").upper(),
                      p.get("version") or ""] for p in entity.get("connectorsPlugins") or []])
    else:
        _describe(entity)
    for warning in entity.get("warnings") or []:
        typer.echo(f"WARNING: {warning.get('message')}")


def _describe(entity: dict[str, Any]) -> None:
    status = entity.get("status") or {}
    connector = status.get("connector") or {}
    lines = [("Name", status.get("name")), ("Class", entity.get("connectorClass")),
             ("Type", status.get("type")), ("State", connector.get("state")),
             ("WorkerId", connector.get("worker_id"))]
    if connector.get("trace"):
        lines.append(("Trace", connector["trace"]))
    for label, value in lines:
        typer.echo(f"{label:<20} : {value if value is not None else ''}")
    tasks = status.get("tasks") or []
    if tasks:
        print_table(["Task ID", "State", "Error Trace"],
                    [[t.get("id"), t.get("state"), t.get("trace") or ""] for t in tasks])
    sources = entity.get("sources") or []
    if sources:
        print_table(["KSQL Source Name", "Kafka Topic", "Type"],
                    [[s.get("name"), s.get("topic"), s.get("type")] for s in sources])
    if entity.get("topics"):
        print_table(["Related Topics"], [[topic] for topic in entity["topics"]])
