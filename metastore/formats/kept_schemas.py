"""The registry schemas a source keeps: the subject of a topic's key or value (Kafka's
topic-name strategy), the formats whose schemas the registry holds, and the source properties
that keep a side's registered schema and the schemas it references, so replay and the runtime
never ask the registry."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from metastore.schema_registry.client import ReferencedSchema, RegisteredSchema, SchemaReference

INFERRING_FORMATS = {"AVRO": "AVRO", "PROTOBUF": "PROTOBUF", "JSON_SR": "JSON"}
"""The formats whose schemas are in the registry, and the registry's name of their schema type."""


def subject_of(topic: str, is_key: bool) -> str:
    """The subject of a topic's key or value schema (Kafka's topic-name strategy)."""
    return f"{topic}-{'key' if is_key else 'value'}"


KEPT_SCHEMA_PROPERTIES = {True: "registry.keySchema", False: "registry.valueSchema"}
KEPT_REFERENCES_PROPERTIES = {True: "registry.keySchemaReferences",
                              False: "registry.valueSchemaReferences"}
"""The schemas a kept schema references, as JSON: ``references``, the schema's own references
(``name``, ``subject``, ``version``) in the registry's order, which a writer registers it with;
``dependencies``, the texts of those and of the schemas they reference in turn, each after
those it references (the same fields and ``schema``)."""


def kept_properties(is_key: bool, found: RegisteredSchema) -> list[tuple[str, str]]:
    """The properties that keep a side's registered schema, and its references if it has any."""
    kept = [(KEPT_SCHEMA_PROPERTIES[is_key], found.schema)]
    if found.references:
        kept.append((KEPT_REFERENCES_PROPERTIES[is_key], json.dumps({
            "references": [r.as_json() for r in found.references],
            "dependencies": [{**d.reference.as_json(), "schema": d.schema}
                             for d in found.dependencies]}, separators=(",", ":"))))
    return kept


def kept_dependencies(properties: Callable[[str], str | None], is_key: bool
                      ) -> tuple[ReferencedSchema, ...]:
    """The referenced schemas a source keeps for a side (``properties``: its property of a
    name), dependencies first."""
    return tuple(ReferencedSchema(_reference(entry), str(entry["schema"]))
                 for entry in _kept(properties, is_key).get("dependencies", []))


def kept_references(properties: Callable[[str], str | None], is_key: bool
                    ) -> tuple[SchemaReference, ...]:
    """The references of the schema a source keeps for a side: what its registration names."""
    return tuple(_reference(entry)
                 for entry in _kept(properties, is_key).get("references", []))


def _kept(properties: Callable[[str], str | None], is_key: bool) -> dict[str, Any]:
    text = properties(KEPT_REFERENCES_PROPERTIES[is_key])
    return dict(json.loads(text)) if text else {}


def _reference(entry: Mapping[str, Any]) -> SchemaReference:
    return SchemaReference(str(entry["name"]), str(entry["subject"]), int(entry["version"]))
