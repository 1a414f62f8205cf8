"""The columns a CREATE STREAM / TABLE infers from the Schema Registry (ksqlDB's
DefaultSchemaInjector and SchemaRegistryTopicSchemaSupplier).

A side (key or value) is inferred when its format supports inference and the statement declares
no columns of that side: from the schema ``<SIDE>_SCHEMA_ID`` names, else from the latest version
of the topic's subject (``<topic>-key`` / ``<topic>-value``). The inferred columns go into the
command, so replay never asks the registry.

The registry is asked before the writer's lock is taken (:func:`prefetch`): validation under the
lock asks nothing, it translates the answers (:class:`PrefetchedSchemas`; a bounded amount of
work, :data:`metastore.formats.avro_columns.MAX_TRANSLATED_TYPES`), so a slow registry never
holds other writers, and one that does not answer fails the request before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from metastore.catalog.exceptions import SchemaError
from metastore.catalog.model import Column
from metastore.core.limits import MAX_TYPE_DEPTH
from metastore.engine import ddl_rules, upgrades
from metastore.engine.asserts import SchemaFacts
from metastore.engine.overrides import ConfigOverrides
from metastore.formats import avro_columns, json_schema_columns, protobuf_columns
from metastore.formats.kept_schemas import (
    INFERRING_FORMATS,
    kept_properties,
    subject_of,
)
from metastore.schema_registry.client import (
    RegisteredSchema,
)
from metastore.sql import statements as st
from metastore.sql import types as ty

MAX_DECIMAL_PRECISION = 38
"""The widest DECIMAL Spark holds (ksqlDB's limit is 1000): an inferred one beyond it is refused."""

@dataclass(frozen=True)
class PrefetchedSchemas:
    """The registry's answers a request's statements need, asked before validation."""

    latest_versions: Mapping[str, RegisteredSchema | None] = field(default_factory=dict)
    ids: Mapping[int, RegisteredSchema | None] = field(default_factory=dict)

    def latest(self, subject: str) -> RegisteredSchema | None:
        return self.latest_versions.get(subject)

    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        return self.ids.get(schema_id)

    def versions_of(self, schema_id: int) -> list[tuple[str, int]]:
        return []


def prefetch(statements: Iterable[st.Statement], registry: SchemaFacts | None,
             config: ConfigOverrides) -> PrefetchedSchemas | None:
    """Ask ``registry`` what the request's CREATE statements may infer their columns from;
    None without a registry. A registry that does not answer raises its error here."""
    if registry is None:
        return None
    latest: dict[str, RegisteredSchema | None] = {}
    ids: dict[int, RegisteredSchema | None] = {}
    for statement in statements:
        if isinstance(statement, st.CreateAsSelect):  # its sink's formats come from analysis
            for is_key in (True, False):
                schema_id = _schema_id(statement, is_key)
                if schema_id is not None and schema_id not in ids:
                    ids[schema_id] = _read(registry, registry.by_id(schema_id))
            continue
        if not isinstance(statement, st.CreateSource):
            continue
        topic = ddl_rules.with_clause_value(statement.properties, "KAFKA_TOPIC")
        key, value = ddl_rules.given_formats(statement.properties)
        formats = ((key or config.default_key_format).upper(),
                   (value or config.default_value_format or "").upper())
        for is_key, fmt in ((True, formats[0]), (False, formats[1])):
            declared = any(c.role.is_key if is_key else c.role is st.ColumnRole.VALUE
                           for c in statement.columns)
            if fmt not in INFERRING_FORMATS or declared:  # a declared side needs no registry
                continue
            schema_id = _schema_id(statement, is_key)
            if schema_id is not None:
                if schema_id not in ids:
                    ids[schema_id] = _read(registry, registry.by_id(schema_id))
            elif topic is not None:
                name = subject_of(str(topic), is_key)
                if name not in latest:
                    latest[name] = _read(registry, registry.latest(name))
    return PrefetchedSchemas(latest, ids)


@runtime_checkable
class ReadsReferences(Protocol):
    """A registry that reads the schemas a schema references
    (:meth:`metastore.schema_registry.client.SchemaRegistryClient.with_references`)."""

    def with_references(self, schema: RegisteredSchema) -> RegisteredSchema: ...


def _registered(answer: object) -> RegisteredSchema | None:
    return answer if isinstance(answer, RegisteredSchema) else None


def _read(registry: SchemaFacts, answer: object) -> RegisteredSchema | None:
    """A registry's answer, with the schemas it references read."""
    found = _registered(answer)
    if found is None or not found.references or not isinstance(registry, ReadsReferences):
        return found
    return registry.with_references(found)


def _schema_id(statement: st.CreateSource | st.CreateAsSelect, is_key: bool) -> int | None:
    value = statement.properties.get("KEY_SCHEMA_ID" if is_key else "VALUE_SCHEMA_ID")
    try:
        return None if value is None or isinstance(value, bool) else int(str(value))
    except ValueError:
        return None


@dataclass(frozen=True)
class Inferred:
    """A CREATE's columns with those inferred, and the registered schemas the source keeps
    (``registry.keySchema`` / ``registry.valueSchema``): its records are written with the schema
    they were inferred from, as ksqlDB writes with the inferred schema's id, and a PROTOBUF
    side's are read by that ``.proto``'s field numbers."""

    columns: list[Column]
    properties: tuple[tuple[str, str], ...] = ()


def infer_columns(statement: st.CreateSource, columns: list[Column], key_format: str,
                  value_format: str, registry: SchemaFacts) -> Inferred:
    """``columns`` with the key columns and the value columns the registry's schemas give the
    sides the statement declares none of (ksqlDB's order: key columns first)."""
    topic = str(ddl_rules.with_clause_value(statement.properties, "KAFKA_TOPIC"))
    key_role = (st.ColumnRole.PRIMARY_KEY if statement.kind is st.SourceKind.TABLE
                else st.ColumnRole.KEY)
    kept_schemas: list[tuple[str, str]] = []
    inferred: list[Column] = []
    if key_format in INFERRING_FORMATS and not any(c.is_key for c in columns):
        key_columns, found = _side(statement, topic, key_format, True, registry)
        inferred += [Column(name, sql_type, key_role) for name, sql_type in key_columns]
        kept_schemas += kept_properties(True, found)
    kept = [c for c in columns if c.is_key]
    inferred_values: list[Column] = []
    if value_format in INFERRING_FORMATS and not any(
            c.role is st.ColumnRole.VALUE for c in columns):
        value_columns, found = _side(statement, topic, value_format, False, registry)
        inferred_values = [Column(name, sql_type, st.ColumnRole.VALUE)
                           for name, sql_type in value_columns]
        kept_schemas += kept_properties(False, found)
    others = [c for c in columns if not c.is_key]
    return Inferred([*inferred, *kept, *inferred_values, *others], tuple(kept_schemas))


def registered_sink_schemas(statement: st.CreateAsSelect, topic: str, columns: list[Column],
                            key_format: str, value_format: str, registry: SchemaFacts
                            ) -> tuple[tuple[str, str], ...]:
    """DefaultSchemaInjector for a C*AS: a side given a ``<SIDE>_SCHEMA_ID`` is written with
    that registered schema, whose columns must begin with the query's, in order, with the same
    names and types (more columns after them are written with their defaults, or NULL); the
    sink's properties that keep the schemas
    (:data:`metastore.formats.kept_schemas.KEPT_SCHEMA_PROPERTIES`)."""
    kept: list[tuple[str, str]] = []
    for is_key, fmt in ((True, key_format), (False, value_format)):
        if _schema_id(statement, is_key) is None or fmt not in INFERRING_FORMATS:
            continue  # a format without inference was refused with the WITH clause
        found, registered_schema = _side(statement, topic, fmt, is_key, registry)
        mine = [c for c in columns if (c.is_key if is_key else c.role is st.ColumnRole.VALUE)]
        role = st.ColumnRole.KEY if is_key else st.ColumnRole.VALUE
        registered = [Column(name, sql_type, role) for name, sql_type in found]
        changed = [c for index, c in enumerate(mine) if index >= len(found)
                   or (c.name, c.type) != found[index]]
        if changed:
            side = "key" if is_key else "value"
            shown = [Column(c.name, c.type, role) for c in changed]
            raise SchemaError(
                f"The following {side} columns are changed, missing or reordered: "
                f"[{upgrades.schema_text(shown)}]. Schema from schema registry is "
                f"[{upgrades.schema_text(registered)}]",
                statement.name)
        kept += kept_properties(is_key, registered_schema)
    return tuple(kept)


def _side(statement: st.CreateSource | st.CreateAsSelect, topic: str, fmt: str, is_key: bool,
          registry: SchemaFacts) -> tuple[list[tuple[str, ty.SqlType]], RegisteredSchema]:
    """The columns of one side and the registered schema they are read from."""
    schema_id = _schema_id(statement, is_key)
    if schema_id is not None:
        found = _read(registry, registry.by_id(schema_id))
    else:
        found = _read(registry, registry.latest(subject_of(topic, is_key)))
    if found is None:
        raise SchemaError(_not_found(topic, schema_id, is_key), statement.name)
    expected = INFERRING_FORMATS[fmt]
    if found.schema_type.upper() != expected:
        config = "KEY_FORMAT" if is_key else "VALUE_FORMAT"
        raise SchemaError(
            f"{'Key' if is_key else 'Value'} schema is not in the expected format. You may want "
            f"to set {config} to '{found.schema_type}'.\n{_source(topic, schema_id)}\n"
            f"expected format: {expected}\nactual format from Schema Registry: "
            f"{found.schema_type}", statement.name)
    wrap = ddl_rules.with_clause_value(statement.properties, "WRAP_SINGLE_VALUE")
    full_name = ddl_rules.with_clause_value(
        statement.properties, "KEY_SCHEMA_FULL_NAME" if is_key else "VALUE_SCHEMA_FULL_NAME")
    original = schema_id is not None
    try:
        if found.reference_problem is not None:
            raise ValueError(f"the schemas it references cannot be read: "
                             f"{found.reference_problem}")
        if fmt == "PROTOBUF":
            found_columns = protobuf_columns.columns_of(
                found.schema, None if full_name is None else str(full_name), original,
                tuple((d.reference.name, d.schema) for d in found.dependencies))
        elif found.references:
            raise ValueError(f"schema references are read in PROTOBUF schemas only: this "
                             f"{fmt} schema references {found.references[0].name}")
        else:
            translate = avro_columns.columns_of if fmt == "AVRO" else json_schema_columns.columns_of
            found_columns = translate(
                found.schema, is_key, unwrapped=not is_key and str(wrap).lower() == "false",
                original_names=original)
    except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as error:
        # a registered schema is input like any other: whatever it holds is the statement's
        # error (the *ColumnsError reasons are ValueErrors)
        raise SchemaError(
            f"Unable to verify if the {'key' if is_key else 'value'} schema for "
            f"{_source(topic, schema_id)} is compatible with ksqlDB.\nReason: {error}\n\n"
            "Please see https://github.com/confluentinc/ksql/issues/ to see if this particular "
            "reason is already known.\nIf not, please log a new issue, including this full "
            f"error message.\nSchema:{found.schema}", statement.name) from error
    problem = _columns_problem(found_columns)
    if problem is not None:
        raise SchemaError(f"The {'key' if is_key else 'value'} schema for "
                          f"{_source(topic, schema_id)} cannot be the columns of a source: "
                          f"{problem}", statement.name)
    if is_key and len(found_columns) > 1:
        raise SchemaError(
            f"The key schema for {_source(topic, schema_id)} contains multiple columns, which "
            f"is not supported by ksqlDB at this time.\nSchema:{found.schema}", statement.name)
    return list(found_columns), found


def _columns_problem(columns: list[tuple[str, ty.SqlType]]) -> str | None:
    """What declared columns are refused for that inferred ones would get past: names twice
    (ksqlDB's names are case-sensitive, so only the same spelling), types nested too deeply,
    DECIMALs ksqlDB or Spark cannot hold."""
    names = [name for name, _ in columns]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        return f"the column {repeated[0]} is defined more than once"
    for name, sql_type in columns:
        if ty.depth(sql_type) > MAX_TYPE_DEPTH:
            return f"the type of {name} nests deeper than {MAX_TYPE_DEPTH} levels"
        for nested in sql_type.walk():
            if isinstance(nested, ty.DecimalType):
                problem = ty.decimal_problem(nested.precision, nested.scale) or (
                    f"DECIMAL precision must be <= {MAX_DECIMAL_PRECISION}: "
                    f"DECIMAL({nested.precision},{nested.scale})"
                    if nested.precision > MAX_DECIMAL_PRECISION else None)
                if problem is not None:
                    return f"{name}: {problem}"
    return None


def _source(topic: str, schema_id: int | None) -> str:
    return f"topic: {topic}" + ("" if schema_id is None else f", schema id: {schema_id}")


def _not_found(topic: str, schema_id: int | None, is_key: bool) -> str:
    schema_id_line = "" if schema_id is None else f"Schema Id: {schema_id}\n"
    return (f"Schema for message {'keys' if is_key else 'values'} on topic '{topic}' does not "
            f"exist in the Schema Registry.\nSubject: {subject_of(topic, is_key)}\n{schema_id_line}"
            "Possible causes include:\n- The topic itself does not exist\n"
            "\t-> Use SHOW TOPICS; to check\n"
            "- Messages on the topic are not serialized using a format Schema Registry supports\n"
            f"\t-> Use PRINT '{topic}' FROM BEGINNING; to verify\n"
            "- Messages on the topic have not been serialized using a Confluent Schema Registry "
            "supported serializer\n"
            "\t-> See https://docs.confluent.io/current/schema-registry/docs/serializer-formatter"
            ".html\n"
            "- The schema is registered on a different instance of the Schema Registry\n"
            "\t-> Use the REST API to list available subjects\t"
            "https://docs.confluent.io/current/schema-registry/docs/api.html#get--subjects\n"
            "- You do not have permissions to access the Schema Registry.\n"
            "\t-> See https://docs.confluent.io/current/schema-registry/docs/security.html")
