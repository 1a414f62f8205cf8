"""The registry schema a source's records are written with, per side: one rule for INSERT VALUES
(:mod:`metastore.kafka.row_encoding`), for the registration of a new source's schemas, and, in
Spark SQL, for a query's sink (:mod:`metastore.planner.encoding`).

A source whose columns were inferred writes the registered schema they were inferred from (which
it keeps, as ksqlDB writes with its id); any other the schema derived from its columns (for
PROTOBUF, that schema's ``.proto`` text). Subjects
follow Kafka's topic-name strategy: ``<topic>-key``, ``<topic>-value``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Protocol

from metastore.catalog.model import DataSource
from metastore.formats.avro import schema as avro
from metastore.formats.json_sr import schema as json_sr
from metastore.formats.kept_schemas import (
    INFERRING_FORMATS,
    KEPT_SCHEMA_PROPERTIES,
    kept_references,
    subject_of,
)
from metastore.formats.protobuf import proto_text
from metastore.formats.protobuf import schema as protobuf
from metastore.schema_registry.client import SchemaReference

log = logging.getLogger(__name__)
SCHEMA_TYPES = INFERRING_FORMATS
"""The registry formats and the registry's name of their schemas' type."""
REGISTRY_FORMATS = tuple(SCHEMA_TYPES)


class SchemaIds(Protocol):
    """A Schema Registry as a writer uses it: the id of a schema (and the schemas it
    references) under a subject."""

    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: tuple[SchemaReference, ...] = ()) -> int: ...


class Subjects(SchemaIds, Protocol):
    """A Schema Registry that also tells whether a subject has a schema."""

    def latest(self, subject: str) -> object | None: ...


@dataclass(frozen=True)
class WrittenSchema:
    subject: str
    text: str
    schema_type: str
    """The registry's name of the schema's type: AVRO, PROTOBUF or JSON."""
    references: tuple[SchemaReference, ...] = ()
    """The registered schemas it references (a kept schema's), by subject and version."""

    def references_json(self) -> str:
        """The references as the registry's JSON takes them (``[]`` for none)."""
        return json.dumps([reference.as_json() for reference in self.references])


def written_schema(source: DataSource, is_key: bool) -> WrittenSchema | None:
    """The schema the side's records are written with; None when the side has no registry
    format or no columns."""
    fmt = source.key_format if is_key else source.value_format
    columns = source.key_columns if is_key else source.value_columns
    if fmt not in REGISTRY_FORMATS or not columns:
        return None
    subject = subject_of(source.topic, is_key)
    kept = source.property(KEPT_SCHEMA_PROPERTIES[is_key])
    if kept is not None:
        return WrittenSchema(subject, kept, SCHEMA_TYPES[fmt],
                             kept_references(source.property, is_key))
    if fmt == avro.FORMAT:
        shape = avro.key_schema(source) if is_key else avro.value_schema(source)
        return WrittenSchema(subject, shape.text, "AVRO")
    if fmt == json_sr.FORMAT:
        derived = json_sr.key_schema(source) if is_key else json_sr.value_schema(source)
        return WrittenSchema(subject, derived.text, json_sr.SCHEMA_TYPE)
    message = protobuf.key_schema(source) if is_key else protobuf.value_schema(source)
    return WrittenSchema(subject, proto_text.render(message), "PROTOBUF")


def register(source: DataSource, registry: Subjects, if_absent: bool) -> list[str]:
    """Register both sides' schemas (ksqlDB's SchemaRegisterInjector, after the statement is
    written; ``if_absent``, for a CREATE: only on a subject without a schema): the subjects
    registered. A registry that refuses is logged, not raised: the source exists, and its
    writers register the schema again when they write."""
    done = []
    for is_key in (True, False):
        try:
            schema = written_schema(source, is_key)
            if schema is not None and not (if_absent and registry.latest(schema.subject)):
                registry.register(schema.subject, schema.text, schema.schema_type,
                                  schema.references)
                done.append(schema.subject)
        except Exception as error:  # the statement is written; the writers register later
            log.warning("registering the %s schema of %s failed: %s",
                        "key" if is_key else "value", source.name, error)
    return done
