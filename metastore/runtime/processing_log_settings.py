"""The processing log's settings: ksqlDB's server properties ``ksql.logging.processing.*``, the
log's topic, and the statement of its stream ``KSQL_PROCESSING_LOG``
(:mod:`metastore.runtime.processing_log` writes the log). Light on purpose: a node's settings
are read before anything heavy is imported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from metastore.core.exceptions import MetastoreError

PREFIX = "ksql.logging.processing."
TOPIC_NAME = PREFIX + "topic.name"
TOPIC_AUTO_CREATE = PREFIX + "topic.auto.create"
TOPIC_PARTITIONS = PREFIX + "topic.partitions"
TOPIC_REPLICATION_FACTOR = PREFIX + "topic.replication.factor"
STREAM_AUTO_CREATE = PREFIX + "stream.auto.create"
STREAM_NAME = PREFIX + "stream.name"
ROWS_INCLUDE = PREFIX + "rows.include"
PROPERTIES = (TOPIC_NAME, TOPIC_AUTO_CREATE, TOPIC_PARTITIONS, TOPIC_REPLICATION_FACTOR,
              STREAM_AUTO_CREATE, STREAM_NAME, ROWS_INCLUDE)
"""The server properties this module reads, by ksqlDB's names."""

_CAUSE = "CAUSE ARRAY<STRING>"
STREAM_COLUMNS = (
    "LOGGER STRING, LEVEL STRING, TIME BIGINT, MESSAGE STRUCT<TYPE INT, "
    f"DESERIALIZATIONERROR STRUCT<TARGET STRING, ERRORMESSAGE STRING, RECORDB64 STRING, {_CAUSE}, "
    "`TOPIC` STRING>, "
    f"RECORDPROCESSINGERROR STRUCT<ERRORMESSAGE STRING, RECORD STRING, {_CAUSE}>, "
    "PRODUCTIONERROR STRUCT<ERRORMESSAGE STRING>, "
    f"SERIALIZATIONERROR STRUCT<TARGET STRING, ERRORMESSAGE STRING, RECORD STRING, {_CAUSE}, "
    "`TOPIC` STRING>, "
    f"KAFKASTREAMSTHREADERROR STRUCT<ERRORMESSAGE STRING, THREADNAME STRING, {_CAUSE}>>")
"""The processing log stream's columns, ksqlDB's ``ProcessingLogMessageSchema``."""


class ProcessingLogSettingError(MetastoreError):
    """A ``ksql.logging.processing.*`` property with a value the node cannot use."""

    code = "bad_processing_log_setting"

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name


@dataclass(frozen=True)
class ProcessingLogSettings:
    """ksqlDB's processing log properties; the topic and the stream are created by default."""

    topic_name: str | None = None
    """None: ``<service id>ksql_processing_log``."""
    topic_auto_create: bool = True
    topic_partitions: int = 1
    topic_replication_factor: int = 1
    stream_auto_create: bool = True
    stream_name: str = "KSQL_PROCESSING_LOG"
    rows_include: bool = False
    """Whether an entry holds the record it is about (base64), as ksqlDB's ``rows.include``."""

    @classmethod
    def of(cls, properties: Mapping[str, str]) -> ProcessingLogSettings:
        """The settings ``properties`` name (ksqlDB's names); the others' defaults."""
        unknown = sorted(set(properties) - set(PROPERTIES))
        if unknown:
            raise ProcessingLogSettingError(unknown[0], "unknown property; known: "
                                            + ", ".join(PROPERTIES))
        default = cls()
        return cls(
            topic_name=properties.get(TOPIC_NAME) or None,
            topic_auto_create=_boolean(properties, TOPIC_AUTO_CREATE, default.topic_auto_create),
            topic_partitions=_positive(properties, TOPIC_PARTITIONS, default.topic_partitions),
            topic_replication_factor=_positive(properties, TOPIC_REPLICATION_FACTOR,
                                               default.topic_replication_factor),
            stream_auto_create=_boolean(properties, STREAM_AUTO_CREATE,
                                        default.stream_auto_create),
            stream_name=_stream_name(properties.get(STREAM_NAME, default.stream_name)),
            rows_include=_boolean(properties, ROWS_INCLUDE, default.rows_include))

    def topic(self, service_id: str) -> str:
        """The log's topic: ksqlDB's default is the service id then ``ksql_processing_log``."""
        return self.topic_name or f"{service_id}ksql_processing_log"

    def stream_statement(self, service_id: str) -> str:
        """The statement that creates the log's stream, as ksqlDB's
        ``ProcessingLogServerUtils`` writes it."""
        topic = self.topic(service_id).replace("'", "''")
        return (f"CREATE STREAM IF NOT EXISTS {self.stream_name} ({STREAM_COLUMNS}) WITH "
                f"(KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', KEY_FORMAT='KAFKA');")


def _boolean(properties: Mapping[str, str], name: str, default: bool) -> bool:
    """Property ``name``: true or false in any case."""
    value = properties.get(name)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ProcessingLogSettingError(name, f"{value!r} is not true or false")
    return value.strip().lower() == "true"


def _positive(properties: Mapping[str, str], name: str, default: int) -> int:
    """Property ``name``: an integer of 1 or more."""
    value = properties.get(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise ProcessingLogSettingError(name, f"{value!r} is not a positive integer")
    return number


def _stream_name(value: str) -> str:
    """A stream name ksqlDB takes unquoted, upper-cased as ksqlDB reads it."""
    if not _NAME.fullmatch(value):
        raise ProcessingLogSettingError(STREAM_NAME, f"{value!r} is not a stream name (letters, "
                                        "digits and underscores, not starting with a digit)")
    return value.upper()


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


__all__ = ["PROPERTIES", "STREAM_COLUMNS", "ProcessingLogSettingError", "ProcessingLogSettings"]
