"""Test records in the Schema Registry formats, through the same JVM codec the queries use.

An AVRO or JSON_SR input is written with its topic's declared schema (a test's ``keySchema`` /
``valueSchema``) or, when the test declares none, with the schema ksqlDB derives from the
columns of the source on the topic, registered under the topic's subject, as ksqlDB's test driver
writes it; a sink's AVRO records are read with the schema their id names in the registry, its
JSON_SR records as JSON after their header.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from metastore.catalog.model import DataSource
from metastore.formats.avro import schema as avro
from metastore.formats.json_sr import schema as json_sr
from metastore.formats.kept_schemas import INFERRING_FORMATS, subject_of
from metastore.formats.protobuf import proto_text
from metastore.formats.protobuf import schema as protobuf
from metastore.formats.protobuf import values as protobuf_values
from metastore.formats.written_schemas import written_schema
from metastore.jvm.classes import AVRO_CODEC_CLASS, REGISTRY_CALLS_CLASS
from metastore.schema_registry.client import (
    RegisteredSchema,
    SchemaReference,
    SchemaRegistryClient,
)
from metastore.testing.cases import DeclaredTopic, SchemaImport
from metastore.testing.schema_numbering import SchemaSide, registration_order

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


SCHEMA_TYPES = {**INFERRING_FORMATS, "JSON": json_sr.SCHEMA_TYPE}
"""A topic's declared format, as the registry names the type of its schemas (a test may declare
a JSON_SR topic's format as JSON)."""


class TestRegistry:
    """The registry as one test's statements see it: the schemas the test declares on its
    topics, registered under the subjects of the topics' namespaced names, which the
    statements ask for by the topics' own names. The ids the test's statements name are those
    ksqlDB's test driver gives (:mod:`metastore.testing.schema_numbering`): 1, 2, ... in
    the order it registers the declared schemas and those its CREATE statements derive from
    their columns (``statement_sides``; the CREATE registers such a schema when it runs,
    :meth:`register`), unless the test declares them."""

    def __init__(self, client: SchemaRegistryClient, topics: Iterable[DeclaredTopic],
                 physical: Callable[[str], str],
                 statement_sides: Sequence[SchemaSide] = (),
                 record_topics: Sequence[str] = ()) -> None:
        self._client = client
        self._physical = physical
        self._ids: dict[int, int] = {}
        self._pending: dict[int, str] = {}
        """Numbers of schemas a CREATE derives, by the subject it registers them under."""
        declared = {topic.name: topic for topic in topics}
        sides = [SchemaSide(topic.name, is_key) for topic in declared.values()
                 for is_key in (True, False)
                 if (topic.key_schema if is_key else topic.value_schema) is not None]
        sides += [side for side in statement_sides if side not in sides]
        names = [*declared, *(side.topic for side in statement_sides), *record_topics]
        seen: set[int] = set()  # the registry's ids numbered so far
        number = 0  # a test's own registry numbers new schemas from 1
        for side in registration_order(names, sides):
            subject = subject_of(physical(side.topic), side.is_key)
            topic = declared.get(side.topic)
            schema = None if topic is None else (
                topic.key_schema if side.is_key else topic.value_schema)
            if topic is None or schema is None:  # its id is known once the CREATE ran
                number += 1
                self._pending[number] = subject
                continue
            fmt = (topic.key_format if side.is_key else topic.value_format) or "AVRO"
            schema_type = SCHEMA_TYPES.get(fmt, "AVRO")
            if schema_type == "JSON":
                schema = json_sr.with_draft(schema)
            text = schema if isinstance(schema, str) and schema_type == "PROTOBUF" else (
                json.dumps(schema))
            imports = (topic.key_schema_references if side.is_key
                       else topic.value_schema_references)
            got = client.register(subject, text, schema_type, self._imported(imports))
            if got not in seen:
                seen.add(got)
                number += 1
                self._ids.setdefault(number, got)
            declared_id = topic.key_schema_id if side.is_key else topic.value_schema_id
            if declared_id is not None:
                self._ids[declared_id] = got

    def _imported(self, imports: Sequence[SchemaImport]) -> tuple[SchemaReference, ...]:
        """Register the schemas a declared schema imports, each under a subject of its name
        (in the test's namespace), as ksqlDB's test driver does; their references."""
        references = []
        for imported in imports:
            subject = self._physical(imported.name)
            schema_type = SCHEMA_TYPES.get(imported.format, "AVRO")
            text = imported.schema if isinstance(imported.schema, str) else json.dumps(
                imported.schema)
            schema_id = self._client.register(subject, text, schema_type)
            version = next((v for s, v in self._client.versions_of(schema_id) if s == subject),
                           None)
            if version is None:
                raise RegistryRecordError(f"the registry does not list schema {schema_id} under "
                                          f"{subject}, just registered there")
            references.append(SchemaReference(imported.name, subject, version))
        return tuple(references)

    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: tuple[SchemaReference, ...] = ()) -> int:
        """Register a schema a statement derives, under the namespaced topic's subject."""
        return self._client.register(self._subject(subject), schema, schema_type, references)

    def _subject(self, subject: str) -> str:
        for suffix in ("-key", "-value"):
            if subject.endswith(suffix):
                return self._physical(subject[:-len(suffix)]) + suffix
        return subject

    def _id(self, number: int) -> int:
        pending = self._pending.get(number)
        if pending is not None and number not in self._ids:
            found = self._client.latest(pending)
            if found is not None:
                return found.schema_id
        return self._ids.get(number, number)

    def latest(self, subject: str) -> RegisteredSchema | None:
        return self._client.latest(self._subject(subject))

    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        return self._client.by_id(self._id(schema_id))

    def versions_of(self, schema_id: int) -> list[tuple[str, int]]:
        return self._client.versions_of(self._id(schema_id))

    def with_references(self, schema: RegisteredSchema) -> RegisteredSchema:
        return self._client.with_references(schema)


class RegistryRecordError(ValueError):
    """A test record that cannot be written in its topic's Schema Registry format."""


class RegistryCodec:
    """AVRO keys and values to and from the test's JSON values, on the registry at ``url``."""

    def __init__(self, spark: SparkSession, url: str) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None, "a running SparkSession has a JVM"
        self._codec = _jvm_class(jvm, AVRO_CODEC_CLASS)
        self._calls = _jvm_class(jvm, REGISTRY_CALLS_CLASS)
        self._url = url

    def encode(self, value: Any, source: DataSource, declared: DeclaredTopic | None,
               physical_topic: str, is_key: bool) -> bytes | None:
        if value is None:
            return None
        fmt = source.key_format if is_key else source.value_format
        given = declared and (declared.key_schema if is_key else declared.value_schema)
        if fmt == protobuf.SR_FORMAT:
            return self._protobuf(value, source, given, subject_of(physical_topic, is_key),
                                  is_key)
        derived: avro.AvroSchema | json_sr.JsonSchema
        if fmt == json_sr.FORMAT:
            derived = json_sr.key_schema(source) if is_key else json_sr.value_schema(source)
        else:
            derived = avro.key_schema(source) if is_key else avro.value_schema(source)
        if given is not None and fmt == json_sr.FORMAT:
            given = json_sr.with_draft(given)
        schema_text = json.dumps(given) if given is not None else derived.text
        text = json.dumps(value, default=_json_default)
        subject = subject_of(physical_topic, is_key)
        try:
            if fmt == json_sr.FORMAT:
                header = self._calls.headerWith(self._url, json_sr.SCHEMA_TYPE, subject,
                                                schema_text)
                return base64.b64decode(header) + text.encode()
            encoded = self._codec.encodeWith(self._url, schema_text, subject, text)
        except Exception as error:  # the JVM's refusal of the value, as the record's error
            raise RegistryRecordError(_first_line(error)) from error
        return None if encoded is None else base64.b64decode(encoded)

    def _protobuf(self, value: Any, source: DataSource, given: Any, subject: str,
                  is_key: bool) -> bytes | None:
        """A PROTOBUF record of the schema derived from the columns (the test's own schema, when
        it declares one, numbers its fields alike), registered as the test declares it."""
        schema = protobuf.key_schema(source) if is_key else protobuf.value_schema(source)
        text = given if isinstance(given, str) else proto_text.render(schema)
        written = written_schema(source, is_key)  # a kept schema's references: the text's
        references = written.references_json() if written is not None else "[]"
        try:
            message = protobuf_values.encode(schema, value)
            header = self._calls.headerWith(self._url, "PROTOBUF", subject, text, references)
        except protobuf_values.ProtobufValueError as error:
            raise RegistryRecordError(str(error)) from error
        except Exception as error:  # the registry's refusal, as the record's error
            raise RegistryRecordError(_first_line(error)) from error
        if message is None:
            return None
        schema_id = int.from_bytes(base64.b64decode(header)[1:], "big")
        return protobuf_values.framed(schema_id, message, schema.indexes)

    def decode(self, raw: bytes, fmt: str) -> Any:
        if fmt == json_sr.FORMAT:
            if len(raw) < json_sr.HEADER_BYTES or raw[0] != 0:
                return f"<not a JSON_SR record: {raw.hex()}>"
            try:
                return json.loads(raw[json_sr.HEADER_BYTES:], parse_float=Decimal)
            except ValueError:
                return raw[json_sr.HEADER_BYTES:].decode(errors="replace")
        text = self._codec.decodeWith(self._url, base64.b64encode(raw).decode())
        if text is None:
            return f"<not an AVRO record: {raw.hex()}>"
        return json.loads(text, parse_float=Decimal)


def _jvm_class(jvm: Any, name: str) -> Any:
    found = jvm
    for part in name.split("."):
        found = getattr(found, part)
    return found


def _json_default(value: object) -> object:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:500] if text else type(error).__name__
