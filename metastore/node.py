"""A metastore node: the command-log replica, the writer, and request execution.

``Node.execute`` is what ``POST /ksql`` does: parse, optionally wait for a command sequence
number (read-your-writes), answer read-only requests from the replica's image, and hand requests
that write to the single-writer protocol.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from metastore.catalog import responses
from metastore.catalog.validation import Read, Skip, Validator, Write
from metastore.kafka.admin import Admin
from metastore.kafka.consumer import EndOffsetProbe
from metastore.kafka.exceptions import KafkaUnavailableError
from metastore.kafka.settings import KafkaSettings
from metastore.log.exceptions import CatchUpTimeoutError
from metastore.log.reader import LogReplica, NodeState
from metastore.log.topic import CommandTopicSpec, command_topic_name, ensure_command_topic
from metastore.log.writer import CommandWriter, KafkaTopicFacts, WriterOptions
from metastore.spark.projection import ProjectionRunner
from metastore.sql.parser import parse
from metastore.sql.statements import Describe, ListObjects, Statement

Entity = dict[str, Any]


@dataclass(frozen=True)
class NodeConfig:
    service_id: str
    bootstrap_servers: str
    node_id: str = "node-1"
    kafka_client: dict[str, str] = field(default_factory=dict)
    command_topic: str | None = None
    command_topic_replication: int | None = None
    command_topic_min_isr: int | None = None
    writer: WriterOptions = field(default_factory=WriterOptions)
    read_timeout: float = 30.0
    fetch_wait_ms: int = 10

    @property
    def topic(self) -> str:
        return self.command_topic or command_topic_name(self.service_id)


class Node:
    def __init__(self, config: NodeConfig, progress: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.settings = KafkaSettings(config.bootstrap_servers, dict(config.kafka_client))
        self.admin = Admin(self.settings)
        self._progress = progress
        self.replica = LogReplica(self.settings, config.topic,
                                  group_id=f"{config.service_id}-{config.node_id}",
                                  progress=progress, fetch_wait_ms=config.fetch_wait_ms)
        self.writer: CommandWriter | None = None
        self.kafka_cluster_id: str | None = None
        self.projection: ProjectionRunner | None = None
        """The Spark catalog projection, when this node runs Spark."""
        self._probe: EndOffsetProbe | None = None
        self._probe_lock = threading.Lock()
        self.queries: Any = None
        """The persistent-query runner (metastore.queries.runner), when this node runs Spark."""
        self.query_status: Callable[[], Mapping[str, Mapping[str, Any]]] | None = None
        """Every query's state, owner and lag across the cluster, for SHOW QUERIES / DESCRIBE."""

    # -- lifecycle -----------------------------------------------------------------------------
    def attach_projection(self, projection: ProjectionRunner) -> None:
        """Project every image into Spark (call before ``start``)."""
        self.projection = projection
        self.replica.add_listener(projection.offer)

    def attach_queries(self, runner: Any) -> None:
        """Run the persistent queries this node is assigned (call before ``start``)."""
        self.queries = runner
        self.replica.add_listener(runner.offer)

    def start(self) -> None:
        """Check Kafka, verify (or create) the command topic, start replaying."""
        self.kafka_cluster_id = self.admin.cluster_id()
        if self.kafka_cluster_id is None:
            raise KafkaUnavailableError(
                f"Kafka is unreachable at {self.config.bootstrap_servers}: no broker answered")
        brokers = self.admin.broker_count()
        ensure_command_topic(self.admin, CommandTopicSpec(
            self.config.topic, self.config.command_topic_replication,
            self.config.command_topic_min_isr), brokers)
        self.writer = CommandWriter(self.settings, self.config.topic, self.config.service_id,
                                    self.config.node_id, self.replica, self.admin,
                                    self.config.writer)
        self.replica.start()
        if self.projection is not None:
            self.projection.start()
        if self.queries is not None:
            self.queries.start()

    def stop(self) -> None:
        if self.queries is not None:
            self.queries.stop()  # before Spark goes: stop this node's queries, leave the group
        if self.projection is not None:
            self.projection.stop()
        if self.writer is not None:
            self.writer.close()
        self.replica.stop()
        with self._probe_lock:
            if self._probe is not None:
                self._probe.close()
                self._probe = None

    def end_offset(self) -> int | None:
        """The command log's last stable offset, or None when Kafka does not answer."""
        with self._probe_lock:
            if self._probe is None:
                self._probe = EndOffsetProbe(self.settings, self.config.topic,
                                             group_id=f"{self.config.service_id}-status")
            try:
                return self._probe.end_offset(timeout=5)
            except KafkaUnavailableError:
                return None

    @property
    def state(self) -> NodeState:
        return self.replica.state

    # -- requests ------------------------------------------------------------------------------
    def execute(self, text: str, request_id: str | None = None, submitter: str = "",
                command_sequence_number: int | None = None,
                timeout: float | None = None) -> list[Entity]:
        statements = parse(text)
        if command_sequence_number is not None:
            self.wait_for(command_sequence_number, timeout or self.config.read_timeout)
        if not any(statement.writes_log for statement in statements):
            return self.read(statements)
        assert self.writer is not None, "start() the node first"
        return self.writer.submit(statements, request_id or str(uuid.uuid4()), submitter, timeout)

    def wait_for(self, command_sequence_number: int, timeout: float) -> None:
        if not self.replica.wait_for_position(command_sequence_number + 1, timeout):
            raise CatchUpTimeoutError(
                f"Timed out after {timeout:.0f}s waiting for command sequence number "
                f"{command_sequence_number} (applied up to {self.replica.position - 1})",
                command_sequence_number)

    def read(self, statements: list[Statement]) -> list[Entity]:
        """Answer statements that never write, from the current image."""
        image = self.replica.image
        validator = Validator(image, KafkaTopicFacts(self.admin))
        entities: list[Entity] = []
        status = self.query_status() if self.query_status is not None and any(
            isinstance(s, ListObjects | Describe) for s in statements) else None
        for statement in statements:
            outcome = validator.validate(statement)
            if isinstance(outcome, Skip):
                entities.append(responses.warning(statement, outcome.message))
                continue
            assert isinstance(outcome, Read) and not isinstance(outcome, Write)
            topics = None
            if isinstance(statement, ListObjects) and statement.what == "TOPICS":
                topics = [(t.name, t.partitions) for t in self.admin.list_topics()]
            entities.append(responses.read_entity(statement, image, topics, status))
        return entities

    def status(self) -> dict[str, Any]:
        degradation = self.replica.degradation
        image = self.replica.image
        spark = self.projection.status if self.projection is not None else None
        return {
            "serviceId": self.config.service_id, "nodeId": self.config.node_id,
            "state": self.replica.state.value,
            "degradedReason": degradation.describe() if degradation else None,
            "appliedOffset": self.replica.position - 1, "endOffset": None,
            "imageFingerprint": image.fingerprint,
            "sparkCatalogFingerprint": spark.fingerprint if spark else None,
            "sparkInSync": (spark.in_sync and spark.image is image)
            if spark else None,
            "sparkReason": spark.reason if spark else "this node runs without Spark",
        }
