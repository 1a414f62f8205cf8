"""ksqlDB's ASSERT statements, checked against the catalog and the facts about Kafka topics.

- ``ASSERT STREAM | TABLE name (columns) WITH (...)`` (ksqlDB's sql-test runner, its
  AssertExecutor): the source exists as the statement would create it. Its properties are
  compared in ksqlDB's order (schema, type, topic, key format and its properties, value format
  and its properties, value serde features, timestamp column and format) and the first that
  differs fails the statement: ``Expected type does not match actual for source BAR.``, with
  the expected and actual values.
- ``ASSERT VALUES`` / ``ASSERT NULL VALUES`` (the sql-test runner's): the next record of the
  source's topic is the given one, or a tombstone. They compare records, which the catalog does
  not hold: once their source is known they are refused, saying so.
- ``ASSERT [NOT EXISTS] TOPIC name [WITH (PARTITIONS=n, REPLICAS=m)]`` (ksqlDB's server, its
  AssertTopicExecutor): the topic exists (or does not) with those partitions. The facts give a
  topic's partitions, not its replicas: REPLICAS is not compared. A failed assertion is
  :class:`AssertionFailedError` (ksqlDB answers it with 417).
- ``ASSERT [NOT EXISTS] SCHEMA [SUBJECT name] [ID n] [TIMEOUT n unit]`` (ksqlDB's
  AssertSchemaExecutor): the node's Schema Registry holds a schema under the subject, with the
  id, or with that id under that subject (or holds none), within the timeout. A registry that
  cannot answer, or none at all, fails the assertion with the reason, as ksqlDB does. A request
  that writes has them checked before it takes the write lock (:func:`check_schemas`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from metastore.catalog.exceptions import (
    AssertionFailedError,
    SourceNotFoundError,
    UnsupportedStatementError,
)
from metastore.catalog.model import Column, DataSource
from metastore.engine.ddl_rules import property_text
from metastore.engine.overrides import ConfigOverrides
from metastore.engine.upgrades import schema_text
from metastore.schema_registry.exceptions import SchemaRegistryError
from metastore.sql import statements as st

Property = tuple[str, Callable[[], str], Callable[[], str]]
"""What is compared: its name, the statement's (expected) value and the source's (actual)."""


def check_source(statement: st.AssertSource, columns: Sequence[Column],
                 sources: Mapping[str, DataSource], config: ConfigOverrides) -> None:
    """``columns``: the statement's, their types resolved (its WITH clause checked as a
    CREATE's). Raise for the first property of the source that is not as declared."""
    properties = statement.properties
    source = sources.get(statement.name)
    if source is None:
        raise SourceNotFoundError(f"{statement.name} does not exist.", statement.name)
    declared = sorted(columns, key=lambda column: not column.is_key)  # as CREATE orders them
    key_format = _format(properties, "KEY_FORMAT", config.default_key_format)
    value_format = _format(properties, "VALUE_FORMAT", config.default_value_format)
    compared: list[Property] = [
        ("schema", lambda: schema_text(declared), lambda: schema_text(source.columns)),
        ("type", lambda: _type(statement.kind), lambda: _type(source.kind)),
        ("kafka topic", lambda: str(property_text(properties.get("KAFKA_TOPIC"))), lambda: source.topic),
        ("key format", lambda: key_format, lambda: source.key_format),
        ("key format properties", lambda: _delimiter(properties.get("KEY_DELIMITER")),
         lambda: _delimiter(source.property("KEY_DELIMITER"))),
        ("value format", lambda: value_format, lambda: source.value_format),
        ("value format properties", lambda: _delimiter(properties.get("VALUE_DELIMITER")),
         lambda: _delimiter(source.property("VALUE_DELIMITER"))),
        ("value serde features", lambda: _features(properties.get("WRAP_SINGLE_VALUE")),
         lambda: _features(source.property("WRAP_SINGLE_VALUE"))),
        ("timestamp column", lambda: _optional(_column_name(properties.get("TIMESTAMP"))),
         lambda: _optional(f"`{source.timestamp_column}`" if source.timestamp_column else None)),
        ("timestamp format", lambda: _optional(property_text(properties.get("TIMESTAMP_FORMAT"))),
         lambda: _optional(source.property("TIMESTAMP_FORMAT"))),
    ]
    for what, expected, actual in compared:
        if expected() != actual():
            raise AssertionFailedError(
                f"Expected {what} does not match actual for source {source.name}.\n"
                f"\tExpected: {expected()}\n\tActual: {actual()}", source.name)


def check_values(statement: st.AssertValues, sources: Mapping[str, DataSource]) -> None:
    """Refuse ASSERT VALUES / ASSERT NULL VALUES: there are no records to compare."""
    if statement.target not in sources:
        raise SourceNotFoundError(f"{statement.target} does not exist.", statement.target)
    what = "ASSERT NULL VALUES" if statement.tombstone else "ASSERT VALUES"
    raise UnsupportedStatementError(
        f"{what} compares the records of {statement.target}'s topic, and checking statements "
        "reads no records: run the test with its records (ksqlDB's test runner) to check it.",
        statement.target)


def check_topic(statement: st.AssertTopic, partitions: int | None) -> None:
    """``partitions``: the topic's, None when it does not exist."""
    topic = statement.topic
    if not statement.exists:
        if partitions is not None:
            raise AssertionFailedError(f"Topic {topic} exists", topic)
        return
    if partitions is None:
        raise AssertionFailedError(f"Topic {topic} does not exist", topic)
    problems = []
    for name, value in statement.properties.items():
        if name.lower() == "partitions":
            if isinstance(value, bool) or value != partitions:
                problems.append(f"Mismatched configuration for topic {topic}: For config "
                                f"partitions, expected {property_text(value)} got {partitions}")
        elif name.lower() != "replicas":  # the facts do not tell a topic's replicas
            problems.append(f"Cannot assert unknown topic property: {name}")
    if problems:
        raise AssertionFailedError("\n".join(problems), topic)


class SchemaFacts(Protocol):
    """What ASSERT SCHEMA asks a Schema Registry (:class:`metastore.schema_registry.client.
    SchemaRegistryClient` answers it): each None or empty when the registry holds nothing."""

    def latest(self, subject: str) -> object | None: ...

    def by_id(self, schema_id: int) -> object | None: ...

    def versions_of(self, schema_id: int) -> list[tuple[str, int]]: ...


ASSERT_SCHEMA_TIMEOUT_MS = 1000
"""How long ASSERT SCHEMA waits without a TIMEOUT clause (ksqlDB's
``ksql.assert.schema.default.timeout.ms``)."""
ASSERT_RETRY_SECONDS = 0.1
MAX_ASSERT_WAIT_SECONDS = 300.0
"""The longest the schema assertions of one request wait in all, whatever their TIMEOUTs say: a
request holds a thread meanwhile."""
NO_SCHEMA_REGISTRY = ("Cannot check schema existence: no Schema Registry is configured (a node's "
                      "--schema-registry-url)")


def check_schema(statement: st.AssertSchema, schemas: SchemaFacts | None,
                 not_after: float | None = None) -> None:
    """The schema is in the registry (or, for NOT EXISTS, is not), asked again every 100 ms
    until the statement's TIMEOUT (ksqlDB's AssertSchemaExecutor), and never after
    ``not_after`` (``time.monotonic()``). A registry that cannot answer fails it too, saying why
    (ksqlDB's 'Cannot check schema existence')."""
    if schemas is None:
        raise AssertionFailedError(NO_SCHEMA_REGISTRY, statement.subject)
    timeout_ms = statement.timeout_ms if statement.timeout_ms is not None \
        else ASSERT_SCHEMA_TIMEOUT_MS
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000
    if not_after is not None:
        deadline = min(deadline, not_after)
    while True:
        try:
            if _schema_exists(statement, schemas) == statement.exists:
                return
            failure = (f"{_schema_named(statement.subject, statement.schema_id)} "
                       f"{'does not exist' if statement.exists else 'exists'}")
        except SchemaRegistryError as error:
            failure = f"Cannot check schema existence: {error.message}"
        if time.monotonic() + ASSERT_RETRY_SECONDS > deadline:
            raise AssertionFailedError(failure, statement.subject)
        time.sleep(ASSERT_RETRY_SECONDS)


def check_schemas(statements: Sequence[st.Statement], schemas: SchemaFacts | None) -> None:
    """Check every ASSERT SCHEMA of a request, in order, within one bound of waiting."""
    not_after = time.monotonic() + MAX_ASSERT_WAIT_SECONDS
    for statement in statements:
        if isinstance(statement, st.AssertSchema):
            check_schema(statement, schemas, not_after)


def _schema_exists(statement: st.AssertSchema, schemas: SchemaFacts) -> bool:
    subject, schema_id = statement.subject, statement.schema_id  # the parser wants one
    if subject is not None and schema_id is not None:
        return any(name == subject for name, _ in schemas.versions_of(schema_id))
    if subject is not None:
        return schemas.latest(subject) is not None
    assert schema_id is not None
    return schemas.by_id(schema_id) is not None


def _schema_named(subject: str | None, schema_id: int | None) -> str:
    named = [f"subject name {subject}"] if subject is not None else []
    named += [f"id {schema_id}"] if schema_id is not None else []
    return f"Schema with {' '.join(named)}"


def _format(properties: Mapping[str, st.PropertyValue], specific: str,
            default: str | None) -> str:
    chosen = properties.get("FORMAT", properties.get(specific, default))
    return "null" if chosen is None else str(chosen).upper()


def _type(kind: st.SourceKind) -> str:
    return "KSTREAM" if kind is st.SourceKind.STREAM else "KTABLE"


def _delimiter(value: st.PropertyValue | None) -> str:
    return "{}" if value is None else f"{{delimiter={property_text(value)}}}"


def _features(wrapping: st.PropertyValue | None) -> str:
    if wrapping is None:
        return "[]"
    return "[WRAP_SINGLES]" if property_text(wrapping) == "true" else "[UNWRAP_SINGLES]"


def _column_name(value: st.PropertyValue | None) -> str | None:
    """A TIMESTAMP property's column as ksqlDB names it: unquoted names upper-cased."""
    text = property_text(value)
    if text is None:
        return None
    if len(text) > 1 and text[0] == text[-1] and text[0] in "`\"":
        return f"`{text[1:-1]}`"
    return f"`{text.upper()}`"


def _optional(value: str | None) -> str:
    return "Optional.empty" if value is None else f"Optional[{value}]"
