"""The registry schema a source's records are written with, per side: one rule for INSERT VALUES
(:mod:`metastore.kafka.row_encoding`), for the registration of a new source's schemas, and, in
Spark SQL, for a query's sink (:mod:`metastore.queries.encoding`).

AVRO and JSON_SR write the schema derived from the columns; PROTOBUF the ``.proto`` of the
derived schema, or the registered text a source whose columns were inferred keeps. Subjects
follow Kafka's topic-name strategy: ``<topic>-key``, ``<topic>-value``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from metastore.avro import schema as avro
from metastore.catalog.inference import KEPT_SCHEMA_PROPERTIES
from metastore.catalog.model import DataSource
from metastore.json_sr import schema as json_sr
from metastore.protobuf import proto_text
from metastore.protobuf import schema as protobuf

log = logging.getLogger(__name__)
REGISTRY_FORMATS = ("AVRO", "PROTOBUF", "JSON_SR")


class SchemaIds(Protocol):
    """A Schema Registry as a writer uses it: the id of a schema under a subject."""

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int: ...


@dataclass(frozen=True)
class WrittenSchema:
    subject: str
    text: str
    schema_type: str
    """The registry's name of the schema's type: AVRO, PROTOBUF or JSON."""


def written_schema(source: DataSource, is_key: bool) -> WrittenSchema | None:
    """The schema the side's records are written with; None when the side has no registry
    format or no columns."""
    fmt = source.key_format if is_key else source.value_format
    columns = source.key_columns if is_key else source.value_columns
    if fmt not in REGISTRY_FORMATS or not columns:
        return None
    subject = avro.subject(source.topic, is_key)
    if fmt == avro.FORMAT:
        shape = avro.key_schema(source) if is_key else avro.value_schema(source)
        return WrittenSchema(subject, shape.text, "AVRO")
    if fmt == json_sr.FORMAT:
        derived = json_sr.key_schema(source) if is_key else json_sr.value_schema(source)
        return WrittenSchema(subject, derived.text, json_sr.SCHEMA_TYPE)
    kept = source.property(KEPT_SCHEMA_PROPERTIES[is_key])
    if kept is not None:
        return WrittenSchema(subject, kept, "PROTOBUF")
    message = protobuf.key_schema(source) if is_key else protobuf.value_schema(source)
    return WrittenSchema(subject, proto_text.render(message), "PROTOBUF")


def register(source: DataSource, registry: SchemaIds) -> list[str]:
    """Register both sides' schemas (ksqlDB's SchemaRegisterInjector, after the statement is
    written): the subjects registered. A registry that refuses is logged, not raised: the source
    exists, and its writers register the schema again when they write."""
    done = []
    for is_key in (True, False):
        try:
            schema = written_schema(source, is_key)
            if schema is not None:
                registry.register(schema.subject, schema.text, schema.schema_type)
                done.append(schema.subject)
        except Exception as error:  # the statement is written; the writers register later
            log.warning("registering the %s schema of %s failed: %s",
                        "key" if is_key else "value", source.name, error)
    return done
