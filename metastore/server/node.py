"""A metastore node: the command-log replica, the writer, and request execution.

``Node.execute`` is what ``POST /ksql`` does: parse, optionally wait for a command sequence
number (read-your-writes), answer read-only requests from the replica's image, and hand requests
that write to the single-writer protocol.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metastore.catalog.exceptions import TooLargeError, UnknownTopicError
from metastore.catalog.image import Image
from metastore.catalog.image_worker import ImageConsumer, ImageWorker
from metastore.catalog.model import DataSource, PersistentQuery
from metastore.checkpoint.checkpointer import Checkpointer, CheckpointPolicy
from metastore.checkpoint.exceptions import CheckpointError
from metastore.checkpoint.snapshots import SnapshotTopic, snapshot_topic_name
from metastore.checkpoint.store import CheckpointStore, Incarnation
from metastore.connect.client import ConnectClient
from metastore.connect.settings import ConnectSettings
from metastore.connect.statements import ConnectorStatements
from metastore.core.faults import NO_FAULTS, Faults
from metastore.core.limits import RequestLimits
from metastore.engine import (
    access,
    asserts,
    inference,
    insert_record,
    insert_values,
    responses,
    topics,
)
from metastore.engine.asserts import SchemaFacts
from metastore.engine.overrides import NO_OVERRIDES, ConfigOverrides
from metastore.engine.topics import is_hidden
from metastore.engine.validation import Explained, Read, Skip, Validator, Write
from metastore.formats import written_schemas
from metastore.kafka import row_encoding
from metastore.kafka.admin import Admin
from metastore.kafka.consumer import EndOffsetProbe
from metastore.kafka.data_writer import DataWriter
from metastore.kafka.exceptions import KafkaClientError, KafkaUnavailableError
from metastore.kafka.settings import KafkaSettings
from metastore.kafka.topic_printer import TopicPrinter
from metastore.log.exceptions import CatchUpTimeoutError
from metastore.log.reader import LogReplica, NodeState, Resume
from metastore.log.replay import collector_paused
from metastore.log.topic import CommandTopicSpec, command_topic_name, ensure_command_topic
from metastore.log.writer import (
    Authorize,
    CommandWriter,
    KafkaTopicFacts,
    ReadAnswer,
    WriterOptions,
    catalog_answer,
)
from metastore.planner.plan import stored_plan
from metastore.planner.support import check_runtime
from metastore.schema_registry.client import SchemaRegistryClient
from metastore.server.acl_validator import (
    OFF,
    AccessValidatorSettings,
    KafkaAclValidator,
    start_validator,
)
from metastore.server.roles import RoleFile
from metastore.spark.projection import ProjectionRunner
from metastore.sql.statements import (
    ConnectorStatement,
    CreateAsSelect,
    CreateSource,
    Describe,
    Explain,
    InsertValues,
    ListObjects,
    PrintTopic,
    SelectStatement,
    SetProperty,
    Statement,
)
from metastore.sql.variables import parse_request

if TYPE_CHECKING:
    from metastore.runtime.runner import QueryRunner

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
    data_dir: Path | None = None
    """Where checkpoints live; None: no checkpoints, every start replays the whole log."""
    checkpoint: CheckpointPolicy = field(default_factory=CheckpointPolicy)
    snapshots: bool = True
    """Publish checkpoints to the snapshot topic, and bootstrap from it without a checkpoint."""
    limits: RequestLimits = field(default_factory=RequestLimits)
    schema_registry_url: str | None = None
    """A Confluent-compatible Schema Registry's base URL; None: statements that need one fail."""
    faults: Faults = NO_FAULTS
    """Injected faults (tests only); none by default."""
    query_defaults: Mapping[str, str] = field(default_factory=dict)
    """The node's defaults of persistent queries' settings a request did not give
    (``ksql.streams.processing.guarantee``), ksqlDB's names to their parsed values."""
    connect: ConnectSettings = field(default_factory=ConnectSettings)
    """The Kafka Connect cluster the connector statements are executed on."""
    roles: RoleFile | None = None
    """Each authenticated user's topic permissions (:mod:`metastore.server.roles`); None: an
    authenticated user may touch every topic the Kafka ACL validator lets them."""
    access_validator: AccessValidatorSettings = field(
        default_factory=lambda: AccessValidatorSettings(OFF))
    """ksqlDB's topic access validator on the broker's ACLs (:mod:`metastore.server.
    acl_validator`); off unless the node authenticates its users."""

    @property
    def topic(self) -> str:
        return self.command_topic or command_topic_name(self.service_id)


def _check_all(checks: list[access.AccessCheck], user: str, needs: list[access.Need]) -> None:
    for check in checks:
        check.check(user, needs)


def _before(statement: Statement, image: Image) -> list[access.Need]:
    """What a statement that acts outside the log needs, checked before it is validated (an
    INSERT VALUES' validation registers its row's schemas; a connector is validated by
    Connect): :mod:`metastore.engine.access`."""
    if isinstance(statement, InsertValues):
        return access.of_insert(statement.target, image)
    if isinstance(statement, ConnectorStatement):
        return access.of_connector(statement)
    return []


class _Budget:
    """What is left of a response's bytes (``limits.max_response_bytes``)."""

    def __init__(self, limit: int) -> None:
        self.limit = self.left = limit

    def spend(self, entity: Entity) -> Entity:
        self.left -= len(json.dumps(entity, separators=(",", ":")))
        if self.left < 0:
            raise TooLargeError(f"The response would be larger than {self.limit} bytes; ask "
                                "for less in one request.")
        return entity


QueryStatus = Callable[[], Mapping[str, Mapping[str, Any]]]
"""Every query's state, owner and lag across the cluster, for SHOW QUERIES and DESCRIBE."""
Explainer = Callable[[Explained, ConfigOverrides], str]
"""The execution plan of what an EXPLAIN resolved (``metastore.runtime.explain``)."""


class Node:
    """The command-log node; with Spark, also the image's consumers it starts and stops.

    ``projection`` and ``queries`` receive every image the replica publishes; ``query_status``
    answers for the cluster's queries. :func:`metastore.server.build.build` wires them.
    """

    def __init__(self, config: NodeConfig, progress: Callable[[str], None] | None = None,
                 admin: Admin | None = None, projection: ProjectionRunner | None = None,
                 queries: QueryRunner | None = None,
                 query_status: QueryStatus | None = None,
                 explainer: Explainer | None = None) -> None:
        self.config = config
        self.settings = KafkaSettings(config.bootstrap_servers, dict(config.kafka_client))
        self.admin = admin or Admin(self.settings)
        self._progress = progress
        self.replica = LogReplica(self.settings, config.topic,
                                  group_id=f"{config.service_id}-{config.node_id}",
                                  progress=progress, fetch_wait_ms=config.fetch_wait_ms,
                                  faults=config.faults)
        self.writer: CommandWriter | None = None
        self.schema_registry = SchemaRegistryClient(config.schema_registry_url) \
            if config.schema_registry_url else None
        """The Schema Registry ASSERT SCHEMA asks, when the node has one."""
        self.connectors = ConnectorStatements(ConnectClient(config.connect))
        """Executes the connector statements on Kafka Connect."""
        self.kafka_cluster_id: str | None = None
        self.projection = projection
        """The Spark catalog projection, when this node runs Spark."""
        self._probe: EndOffsetProbe | None = None
        self._probe_lock = threading.Lock()
        self._data_writer = DataWriter(self.settings)
        """Writes INSERT VALUES records (its producer is created on the first one)."""
        self.checkpointer: Checkpointer | None = None
        self.incarnation: Incarnation | None = None
        self.acl_validator: KafkaAclValidator | None = None
        """Checks users' statements against the cluster's ACLs, once started, when asked."""
        self._checkpoint_warnings: list[str] = []
        self._restore_seconds: float | None = None
        self.process_started = time.monotonic() - _process_age()
        """``time.monotonic()`` of this process's start (for the start-to-READY figure)."""
        self.queries = queries
        """The persistent-query runner, when this node runs Spark."""
        self.query_status = query_status
        self.explainer = explainer
        """Spark's plans for EXPLAIN and SHOW QUERIES EXTENDED, when this node runs Spark."""
        consumers: list[ImageConsumer] = [c for c in (projection, queries) if c is not None]
        self.image_worker = ImageWorker(consumers)
        """Hands the image's consumers every image the replica publishes, on one thread."""
        self.replica.add_listener(self.image_worker.offer)

    # -- lifecycle -----------------------------------------------------------------------------
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
                                    self.config.writer, limits=self.config.limits,
                                    faults=self.config.faults, answer_read=self._read_answerer(),
                                    runtime_check=check_runtime, planner=stored_plan)
        self.incarnation = Incarnation(self.config.service_id, self.config.topic,
                                       self.admin.topic_id(self.config.topic))
        self.acl_validator = start_validator(self.config.access_validator,
                                             self.admin.describe_acls)
        if self.config.data_dir is not None:
            self._start_checkpoints(self.config.data_dir, self.incarnation)
        self.replica.start()
        if self.queries is not None:
            self.queries.scope(self.incarnation.path())
        self.image_worker.start()

    def _start_checkpoints(self, data_dir: Path, incarnation: Incarnation) -> None:
        """Offer the replica the newest usable checkpoint (or snapshot); checkpoint from now on."""
        config = self.config
        store = CheckpointStore(data_dir / "checkpoints", faults=config.faults)
        snapshots = None
        if config.snapshots:
            snapshots = SnapshotTopic(self.settings, self.admin,
                                      snapshot_topic_name(config.service_id),
                                      config.command_topic_replication)
        started = time.perf_counter()
        resume = self._resume_point(store, snapshots, incarnation)
        self._restore_seconds = round(time.perf_counter() - started, 3)
        self.replica.resume_from(resume)
        self.checkpointer = Checkpointer(store, incarnation, config.node_id, config.checkpoint,
                                         snapshots)
        self.replica.on_boundary = self.checkpointer.on_boundary
        self.checkpointer.start()

    def _resume_point(self, store: CheckpointStore, snapshots: SnapshotTopic | None,
                      incarnation: Incarnation) -> Resume | None:
        def warn(message: str) -> None:
            self._checkpoint_warnings.append(message)
            if self._progress:
                self._progress(message)

        local = store.load_newest(incarnation, warn)
        if local is not None:  # its checksum is this node's own: decode sources when used
            candidate, origin, lazy = local, f"checkpoint at offset {local.header.offset}", True
        else:
            try:
                shared = snapshots.newest(incarnation) if snapshots is not None else None
            except KafkaUnavailableError as error:
                warn(f"the snapshot topic could not be read: {error}")
                shared = None
            if shared is None:
                return None
            candidate, origin, lazy = shared, (f"snapshot at offset {shared.header.offset} by "
                                               f"{shared.header.node_id}"), False
        try:
            with collector_paused():
                state = candidate.state(lazy)
        except CheckpointError as error:
            warn(f"ignoring the {origin} ({error.reason}): {error}")
            return None
        return Resume(state, candidate.header.record_digest, origin)

    def stop(self, checkpoint: bool = True) -> None:
        """Stop; ``checkpoint``: write a last checkpoint of what was applied (a clean stop)."""
        if self.queries is not None:
            self.queries.interrupt()
        self.image_worker.stop()
        if self.queries is not None:
            self.queries.stop()  # before Spark goes: stop this node's queries, leave the group
        if self.writer is not None:
            self.writer.close()
        self._data_writer.close()
        if self.schema_registry is not None:
            self.schema_registry.close()
        self.connectors.client.close()
        self.replica.stop()
        if self.checkpointer is not None:
            self.checkpointer.stop(self.replica if checkpoint else None)
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
    def execute(self, request: str | Sequence[Statement], request_id: str | None = None,
                submitter: str = "", command_sequence_number: int | None = None,
                timeout: float | None = None,
                config: ConfigOverrides = NO_OVERRIDES, user: str | None = None) -> list[Entity]:
        """Answer a request: its text, or its statements as already parsed; ``config``: its
        ksqlDB configuration overrides (``streamsProperties``); ``user``: the authenticated
        user it is checked for against the role file (None: not checked)."""
        statements = parse_request(request) if isinstance(request, str) else list(request)
        limit = self.config.limits.max_statements
        if len(statements) > limit:
            raise TooLargeError(f"The request holds {len(statements)} statements; the limit is "
                                f"{limit}. Split it into several requests.")
        if command_sequence_number is not None:
            self.wait_for(command_sequence_number, timeout or self.config.read_timeout)
        authorize = self._authorizer(user)
        if not any(statement.writes_log for statement in statements):
            return answered(statements, self.read(statements, config, authorize))
        assert self.writer is not None, "start() the node first"
        asserts.check_schemas(statements, self.schema_registry)  # waits: not under the lock
        schemas = inference.prefetch(statements, self.schema_registry, config)  # likewise
        request_id = request_id or str(uuid.uuid4())
        if not any(isinstance(statement, InsertValues | ConnectorStatement)
                   for statement in statements):
            entities = self.writer.submit(statements, request_id, submitter, timeout, config,
                                          schemas, authorize)
        else:
            self._validate_request(statements, config, schemas, authorize)
            entities = self._execute_in_parts(statements, request_id, submitter, timeout,
                                              config, schemas, authorize)
        self._register_schemas(statements)
        return answered(statements, entities)

    def _register_schemas(self, statements: list[Statement]) -> None:
        """Register the schemas of the sources the request created in a Schema Registry
        format, once they are written (ksqlDB's SchemaRegisterInjector), outside the lock."""
        if self.schema_registry is None:
            return
        for statement in statements:
            if isinstance(statement, CreateSource | CreateAsSelect):
                source = self.replica.image.source(statement.name)
                if source is not None:
                    written_schemas.register(source, self.schema_registry,
                                             if_absent=isinstance(statement, CreateSource))

    def check_read(self, statement: SelectStatement | PrintTopic, user: str | None) -> None:
        """Refuse a query or PRINT that reads a topic ``user`` may not read (the role file)."""
        self.authorize(access.of_print(statement) if isinstance(statement, PrintTopic)
                       else access.of_query(statement.query, self.replica.image), user)

    def authorize(self, needs: list[access.Need], user: str | None) -> None:
        """Refuse ``needs`` that ``user`` does not have (the role file; nothing without)."""
        authorize = self._authorizer(user)
        if authorize is not None:
            authorize(needs)

    def _authorizer(self, user: str | None) -> Authorize | None:
        checks: list[access.AccessCheck] = [
            check for check in (self.config.roles, self.acl_validator) if check is not None]
        if not checks or user is None:
            return None
        return functools.partial(_check_all, checks, user)

    def _validate_request(self, statements: list[Statement], config: ConfigOverrides,
                          schemas: SchemaFacts | None, authorize: Authorize | None) -> None:
        """Validate every statement of a request mixing log writes and INSERT VALUES on the
        current image, in order (ksqlDB's sandbox), before any part is written or any record
        produced: a request with a statement that fails writes nothing. Each part is
        validated again when it runs."""
        validator = Validator(self.replica.image, KafkaTopicFacts(self.admin),
                              limits=self.config.limits, config=config,
                              encoder=self.encode_record, schemas=schemas,
                              schemas_checked=True)
        for statement in statements:
            stopped = None if authorize is None else access.queries_before(
                statement, validator.image)
            if authorize is not None:
                authorize(_before(statement, validator.image))
            outcome = validator.validate(statement)
            if authorize is not None and isinstance(outcome, Write):
                authorize(access.of_write(outcome, validator.image, stopped))
            if isinstance(statement, ConnectorStatement):
                self.connectors.check(statement)

    def _execute_in_parts(self, statements: list[Statement], request_id: str, submitter: str,
                          timeout: float | None, config: ConfigOverrides,
                          schemas: SchemaFacts | None, authorize: Authorize | None
                          ) -> list[Entity]:
        """A request mixing log writes and statements that act outside the log (INSERT VALUES,
        the connector statements), in statement order as ksqlDB runs it: each run of statements
        up to one of those is written (request id ``<id>/<n>``, so a retry does not write it
        twice), then it acts on the image that includes it. A retry acts again (ksqlDB has no
        request ids at all)."""
        assert self.writer is not None
        entities: list[Entity] = []
        part: list[Statement] = []
        parts = 0
        for index, statement in enumerate(statements):
            part.append(statement)
            last = index == len(statements) - 1
            if not (last or isinstance(statements[index + 1], InsertValues | ConnectorStatement)
                    or isinstance(statement, InsertValues | ConnectorStatement)):
                continue
            if any(s.writes_log for s in part):
                entities += self.writer.submit(part, f"{request_id}/{parts}", submitter, timeout,
                                               config, schemas, authorize)
                parts += 1
            else:
                entities += self.read(part, config, authorize)
            for done in part:
                if isinstance(done, SetProperty):
                    config = config.set(done.name, done.value)
            part = []
        return entities

    def wait_for(self, command_sequence_number: int, timeout: float) -> None:
        if not self.replica.wait_for_position(command_sequence_number + 1, timeout):
            raise CatchUpTimeoutError(
                f"Timed out after {timeout:.0f}s waiting for command sequence number "
                f"{command_sequence_number} (applied up to {self.replica.position - 1})",
                command_sequence_number)

    def read(self, statements: list[Statement], config: ConfigOverrides = NO_OVERRIDES,
             authorize: Authorize | None = None) -> list[Entity]:
        """Answer statements that never write the log, from the current image. What acts
        outside the log (INSERT VALUES, the connector statements) acts only once every
        statement is valid, and allowed by ``authorize``, as in ksqlDB's sandbox (Kafka
        Connect validates a CREATE CONNECTOR's config first)."""
        image = self.replica.image
        validator = Validator(image, KafkaTopicFacts(self.admin), limits=self.config.limits,
                              config=config, encoder=self.encode_record,
                              schemas=self.schema_registry)
        answers: list[Entity | ConnectorStatement] = []
        budget = _Budget(self.config.limits.max_response_bytes)
        status = self._query_statuses(statements)
        records: list[tuple[str, insert_record.EncodedRecord]] = []
        for statement in statements:
            if authorize is not None:
                authorize(_before(statement, image))
            if isinstance(statement, ConnectorStatement):
                self.connectors.check(statement)
                answers.append(statement)
                continue
            outcome = validator.validate(statement)
            if isinstance(outcome, Skip):
                entity = responses.warning(statement, outcome.message)
            else:
                assert isinstance(outcome, Read) and not isinstance(outcome, Write)
                if outcome.record is not None:
                    assert isinstance(statement, InsertValues)
                    records.append((statement.target, outcome.record))
                entity = self._answer(outcome, image, validator.config, status)
            answers.append(budget.spend(entity))
        if records and self.writer is not None:
            self.writer.check_writable()
        entities = [budget.spend(self._connector_answer(answer, image))
                    if isinstance(answer, ConnectorStatement) else answer for answer in answers]
        for target, record in records:
            self.insert_values(target, record)
        return entities

    def _connector_answer(self, statement: ConnectorStatement, image: Image) -> Entity:
        return self.connectors.answer(statement, image, lambda name: responses.source_description(
            image.sources[name], image, extended=False))

    def _query_statuses(self, statements: Sequence[Statement]
                        ) -> Mapping[str, Mapping[str, Any]] | None:
        """The queries' runtime status, when one of ``statements`` shows it."""
        if self.query_status is None or not any(
                isinstance(s, ListObjects | Describe | Explain) for s in statements):
            return None
        return self.query_status()

    def _answer(self, outcome: Read, image: Image, config: ConfigOverrides,
                status: Mapping[str, Mapping[str, Any]] | None) -> Entity:
        """The entity of a statement that only reads, validated on ``image``: EXPLAIN's and
        SHOW QUERIES EXTENDED's descriptions with Spark's plans, SHOW TOPICS with Kafka's
        topics, the rest from the catalog."""
        statement = outcome.statement
        if outcome.explained is not None:
            return self._explain(statement, outcome.explained, status, config)
        if isinstance(statement, ListObjects) and statement.what == "QUERIES" and (
                statement.extended):
            return responses.query_descriptions(statement, [
                self._describe(image.queries[q], image, status, config)
                for q in sorted(image.queries)])
        topics = None
        if isinstance(statement, ListObjects) and statement.what == "TOPICS":
            topics = self.topic_listings(statement.show_all, statement.extended)
        return responses.read_entity(statement, image, topics, status, config,
                                     self.server_properties())

    def _read_answerer(self) -> ReadAnswer:
        """:meth:`_answer_in_write` for the writer, holding the node weakly: a node the writer
        kept alive would keep its Kafka clients (closed when it is collected) polling after it
        stopped."""
        method = weakref.WeakMethod(self._answer_in_write)

        def answer(outcome: Read, image: Image, config: ConfigOverrides) -> Entity:
            bound = method()
            if bound is None:
                return catalog_answer(outcome, image, config)
            return bound(outcome, image, config)

        return answer

    def _answer_in_write(self, outcome: Read, image: Image, config: ConfigOverrides) -> Entity:
        """A read in a request that writes (the writer validates it): answered as alone."""
        return self._answer(outcome, image, config, self._query_statuses([outcome.statement]))

    def _plan(self, explained: Explained, config: ConfigOverrides) -> str:
        return self.explainer(explained, config) if self.explainer is not None else (
            "(this node runs without Spark: no execution plan)")

    def _describe(self, query: PersistentQuery, image: Image,
                  status: Mapping[str, Mapping[str, Any]] | None,
                  config: ConfigOverrides) -> Entity:
        plan = self._plan(Explained(image, query=query), config)
        return responses.persistent_query_description(
            query, image, plan, status.get(query.query_id) if status is not None else None)

    def _explain(self, statement: Statement, explained: Explained,
                 status: Mapping[str, Mapping[str, Any]] | None,
                 config: ConfigOverrides) -> Entity:
        """ksqlDB's QueryDescriptionEntity of an EXPLAIN."""
        if explained.query is not None:
            description = self._describe(explained.query, explained.image, status, config)
        else:
            assert explained.select is not None
            description = responses.query_description(
                "", explained.select.text, explained.columns, explained.sources, [],
                self._plan(explained, config), query_type=(
                    "PUSH" if explained.select.query.emit_changes else "PULL"))
        return responses.explain_entity(statement, description)

    def open_print(self, statement: PrintTopic) -> TopicPrinter:
        """A reader of the topic a PRINT names, once validated (the topic exists and may be
        read); the caller polls and closes it."""
        Validator(self.replica.image, KafkaTopicFacts(self.admin),
                  limits=self.config.limits).validate(statement)
        shape = self.admin.describe(statement.topic)
        if shape is None:
            raise UnknownTopicError(f"Could not find topic '{statement.topic}'",
                                    statement.topic)
        return TopicPrinter(self.settings, statement.topic, shape.partitions,
                            statement.from_beginning, statement.interval or 1, statement.limit)

    def insert_target(self, name: str, user: str | None = None) -> DataSource:
        """The source an inserts stream writes into, as INSERT VALUES checks it: known, not
        windowed, its topic not read-only and one this service (and ``user``) may write; the
        node READY."""
        if self.writer is not None:
            self.writer.check_writable()
        target = insert_values.target(name, self.replica.image.sources)
        self.authorize([access.Need(access.WRITE, target.topic)], user)
        topics.check_writable(target.topic)
        insert_values.check_writable(target)
        return target

    def encode_record(self, source: DataSource, row: Mapping[str, Any]
                      ) -> tuple[bytes | None, bytes | None]:
        """An INSERT VALUES row as Kafka bytes in its source's formats, the Schema Registry
        formats through the node's registry (their schemas registered, outside any lock)."""
        return row_encoding.encode_record(source, row, self.schema_registry)

    def insert_row(self, source: DataSource, row: Mapping[str, Any], timestamp_ms: int) -> int:
        """Write one row of ``source`` (every column typed, as :func:`insert_record.json_row`
        makes it) into its topic and wait for Kafka's acknowledgement: its offset."""
        try:
            key, value = self.encode_record(source, row)
        except ValueError as error:
            raise insert_record.InsertValuesError(
                f"Failed to insert values into '{source.name}'. {error}", source.name) from error
        return self.insert_values(source.name, insert_record.EncodedRecord(
            source.topic, key, value, timestamp_ms))

    def insert_values(self, target: str, record: insert_record.EncodedRecord) -> int:
        """Write the record of a validated INSERT INTO ``target`` VALUES (built and encoded by
        the validator) into its source's topic and wait for Kafka's acknowledgement (ksqlDB's
        InsertValuesExecutor): its offset."""
        try:
            return self._data_writer.write(record.topic, record.key, record.value,
                                           record.timestamp_ms)
        except KafkaClientError as error:
            raise insert_record.InsertValuesError(
                f"Failed to insert values into '{target}'. The record was not acknowledged by "
                f"Kafka: {error.message}", target) from error

    def topic_listings(self, show_all: bool = False,
                       extended: bool = False) -> list[responses.TopicListing]:
        """The topics SHOW [ALL] TOPICS [EXTENDED] lists (ksqlDB's ListTopicsExecutor): without
        ALL, not the hidden ones; with EXTENDED, their consumers and consumer groups."""
        counts = self.admin.topic_consumers() if extended else {}
        return [responses.TopicListing(t.name, t.partitions, t.replication,
                                       *counts.get(t.name, (0, 0)))
                for t in self.admin.list_topics(internal=show_all)
                if show_all or not is_hidden(t.name)]

    def server_properties(self) -> dict[str, str]:
        """The node's own settings SHOW PROPERTIES lists (ksqlDB's names)."""
        return {"ksql.service.id": self.config.service_id,
                "ksql.streams.bootstrap.servers": self.config.bootstrap_servers,
                **self.config.query_defaults}

    def status(self) -> dict[str, Any]:
        degradation = self.replica.degradation
        image = self.replica.image
        spark = self.projection.status if self.projection is not None else None
        return {
            "serviceId": self.config.service_id, "nodeId": self.config.node_id,
            "state": self.replica.state.value,
            "degradedReason": degradation.describe() if degradation else None,
            "appliedOffset": self.replica.position - 1, "endOffset": None,
            "imageFingerprint": image.fingerprint, "lastWriter": self.replica.last_writer,
            "sparkCatalogFingerprint": spark.fingerprint if spark else None,
            "sparkInSync": (spark.in_sync and spark.image is image)
            if spark else None,
            "sparkReason": spark.reason if spark else "this node runs without Spark",
            "sparkCatalogCalls": spark.total_catalog_calls if spark else None,
            "sparkApplication": spark.application.to_json()
            if spark and spark.application else None,
            "startup": self._startup(),
        }

    def _startup(self) -> dict[str, Any]:
        report = self.replica.start_report
        ready_at = self.replica.ready_at
        checkpoints = self.checkpointer.status if self.checkpointer is not None else None
        return {
            "readySeconds": round(ready_at - self.process_started, 3) if ready_at else None,
            "restoreSeconds": self._restore_seconds,
            "resumedFrom": report.resumed_from if report else None,
            "resumedOffset": report.resumed_offset if report else None,
            "checkpointRejected": "; ".join(
                [*self._checkpoint_warnings, *([report.rejected] if report and report.rejected
                                               else [])]) or None,
            "recordsReplayed": self.replica.records_applied,
            "checkpoints": None if checkpoints is None else {
                "written": checkpoints.written, "lastOffset": checkpoints.last_offset,
                "lastSeconds": checkpoints.last_seconds, "lastBytes": checkpoints.last_bytes,
                "published": checkpoints.published, "lastError": checkpoints.last_error},
        }


def answered(statements: Sequence[Statement], entities: list[Entity]) -> list[Entity]:
    """The entities of the statements ksqlDB answers with one (not SET, UNSET, DEFINE, nor
    UNDEFINE of a defined variable: its executors handle those without an entity)."""
    return [entity for statement, entity in zip(statements, entities, strict=True)
            if statement.has_entity]


def _process_age() -> float:
    """Seconds since this process started, from the kernel's record of it (0 where unknown)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started_ticks = int(fields[19])  # field 22, counted after the command name
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0
