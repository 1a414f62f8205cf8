"""Human-readable rendering of ksqlDB REST entities."""

from __future__ import annotations

from typing import Any

import typer

from cli import render_connectors as connectors
from cli.output import print_table


def _type_text(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "?")
    if kind == "ARRAY":
        return f"ARRAY<{_type_text(schema['memberSchema'])}>"
    if kind == "MAP":
        return f"MAP<STRING, {_type_text(schema['memberSchema'])}>"
    if kind == "STRUCT":
        inner = ", ".join(f"{f['name']} {_type_text(f['schema'])}" for f in schema.get("fields") or [])
        return f"STRUCT<{inner}>"
    if kind == "DECIMAL" and schema.get("parameters"):
        return f"DECIMAL({schema['parameters']['precision']}, {schema['parameters']['scale']})"
    return str(kind)


def render_entity(entity: dict[str, Any]) -> None:
    kind = entity.get("@type")
    if kind == "currentStatus":
        status = entity.get("commandStatus", {})
        sequence = entity.get("commandSequenceNumber")
        suffix = f" (command {sequence})" if sequence is not None else ""
        typer.echo(f"{status.get('message', status.get('status'))}{suffix}")
    elif kind == "warning_entity":
        typer.echo(f"Warning: {entity.get('message')}")
    elif kind == "assert_topic":
        state = "exists" if entity.get("exists") else "does not exist"
        typer.echo(f"Topic {entity.get('topicName')} {state}")
    elif kind in _LISTINGS:
        _render_listing(str(kind), entity)
    elif kind == "describe_function":
        render_function(entity)
    elif kind == "sourceDescription":
        render_description(entity["sourceDescription"])
    elif kind == "source_descriptions":
        for description in entity["sourceDescriptions"]:
            render_description(description)
    elif kind in connectors.KINDS:
        connectors.render_connector_entity(entity)
    else:
        typer.echo(str(entity))


_LISTINGS = frozenset({"streams", "tables", "queries", "type_list", "kafka_topics",
                       "kafka_topics_extended", "variables", "properties", "function_names"})
"""The entities that list things, printed as tables."""


def _render_listing(kind: str, entity: dict[str, Any]) -> None:
    if kind in ("streams", "tables"):
        rows = [[s["name"], s["topic"], s["keyFormat"], s["valueFormat"], s["isWindowed"]]
                for s in entity[kind]]
        print_table([f"{kind[:-1].capitalize()} Name", "Kafka Topic", "Key Format",
                     "Value Format", "Windowed"], rows)
    elif kind == "queries":
        rows = [[q["id"], q.get("state", ""), ",".join(q["sinks"]), q["queryString"][:60]]
                for q in entity["queries"]]
        print_table(["Query ID", "Status", "Sink", "Query"], rows)
    elif kind == "type_list":
        print_table(["Type Name", "Schema"],
                    [[name, _type_text(schema)] for name, schema in entity["types"].items()])
    elif kind == "kafka_topics":
        print_table(["Kafka Topic", "Partitions"],
                    [[t["name"], len(t["replicaInfo"])] for t in entity["topics"]])
    elif kind == "kafka_topics_extended":
        print_table(["Kafka Topic", "Partitions", "Partition Replicas", "Consumers",
                     "ConsumerGroups"],
                    [[t["name"], len(t["replicaInfo"]), ",".join(map(str, t["replicaInfo"])),
                      t.get("consumerCount", 0), t.get("consumerGroupCount", 0)]
                     for t in entity["topics"]])
    elif kind == "variables":  # ksqlDB's ListVariablesTableBuilder
        print_table(["Variable Name", "Value"],
                    [[v["name"], v["value"]] for v in entity["variables"]])
    elif kind == "properties":  # ksqlDB's PropertiesListTableBuilder
        overwritten = set(entity.get("overwrittenProperties") or [])
        defaults = set(entity.get("defaultProperties") or [])
        print_table(["Property", "Scope", "Level", "Editable", "Effective Value",
                     "Default Value"],
                    [[p["name"], p["scope"], p.get("level", ""), p.get("editable", False),
                      p["value"], "" if p["name"] in overwritten or p["name"] not in defaults
                      else p["value"]]
                     for p in entity["properties"]])
    elif kind == "function_names":  # ksqlDB's FunctionNameListTableBuilder
        print_table(["Function Name", "Category", "Type"],
                    [[f["name"], f.get("category", ""), f["type"]]
                     for f in entity["functions"]])


def render_function(entity: dict[str, Any]) -> None:
    """DESCRIBE FUNCTION as ksqlDB's console prints it: the function, then each variation."""
    typer.echo(f"Name        : {entity['name']}")
    if entity.get("author"):
        typer.echo(f"Author      : {entity['author']}")
    if entity.get("version"):
        typer.echo(f"Version     : {entity['version']}")
    if entity.get("description"):
        typer.echo(f"Overview    : {entity['description']}")
    typer.echo(f"Type        : {entity['type']}")
    typer.echo(f"Jar         : {entity.get('path', '')}")
    typer.echo("Variations  :")
    for variation in entity.get("functions") or []:
        arguments = ", ".join(
            (f"{a['name']} " if a.get("name") else "") + a["type"]
            + ("[]" if a.get("isVariadic") else "") for a in variation["arguments"])
        typer.echo(f"\n\tVariation   : {entity['name']}({arguments})")
        typer.echo(f"\tReturns     : {variation['returnType']}")
        if variation.get("description"):
            typer.echo(f"\tDescription : {variation['description']}")


def _query_label(query: dict[str, Any]) -> str:
    """A query's id, with its processing guarantee when it is not the default."""
    guarantee = query.get("processingGuarantee")
    return str(query["id"]) + (f" ({guarantee})" if guarantee not in (None, "at_least_once") else "")


def render_description(description: dict[str, Any]) -> None:
    typer.echo(f"Name                 : {description['name']}")
    typer.echo(f"Type                 : {description['type']}")
    typer.echo(f"Kafka topic          : {description['topic']} (partitions: "
               f"{description['partitions']})")
    typer.echo(f"Key format           : {description['keyFormat']}")
    typer.echo(f"Value format         : {description['valueFormat']}")
    rows = [[f["name"], _type_text(f["schema"]) + (f" ({f['type']})" if f.get("type") else "")]
            for f in description["fields"]]
    print_table(["Field", "Type"], rows)
    for label, key in (("Queries that read from this source", "readQueries"),
                       ("Queries that write into this source", "writeQueries")):
        queries = description.get(key) or []
        if queries:
            typer.echo(f"{label}: " + ", ".join(_query_label(q) for q in queries))
