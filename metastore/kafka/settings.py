"""Connection settings shared by every client a node creates, and the creation of clients."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from metastore.kafka.exceptions import KafkaClientError
from metastore.kafka.java_security import java_security

LIBRDKAFKA_LOGGER = logging.getLogger("metastore.librdkafka")


JAVA_CLIENT_NAMES = {"fetch.wait.max.ms": "fetch.max.wait.ms"}
"""Client settings whose librdkafka name (the node's settings) differs from the Java client's."""


@dataclass(frozen=True)
class KafkaSettings:
    """Bootstrap servers plus pass-through client settings (TLS, SASL, timeouts)."""

    bootstrap_servers: str
    client: Mapping[str, str] = field(default_factory=dict)

    def config(self, **overrides: Any) -> dict[str, Any]:
        """A librdkafka configuration: the common settings, then ``overrides``."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers,
                                  "logger": LIBRDKAFKA_LOGGER}
        config.update(self.client)
        config.update({key.replace("_", "."): value for key, value in overrides.items()})
        return config

    def java_config(self) -> dict[str, str]:
        """The same settings for Kafka's Java clients (Spark's Kafka source and sink, a
        producer in Spark's JVM): the client settings under the Java client's names, security
        written as Java takes it (:mod:`metastore.kafka.java_security`)."""
        return {"bootstrap.servers": self.bootstrap_servers,
                **{JAVA_CLIENT_NAMES.get(name, name): value
                   for name, value in java_security(self.client).items()}}


Client = TypeVar("Client", Consumer, Producer, AdminClient)


def create_client(kind: type[Client], config: dict[str, Any]) -> Client:
    """A librdkafka client of ``kind``; settings it refuses are a :class:`KafkaClientError`."""
    try:
        return kind(config)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        reason = error.str() if isinstance(error, KafkaError) else str(exc)
        raise KafkaClientError(f"the Kafka client settings were refused: {reason}") from exc
