"""Validate statements against a snapshot of the image plus facts about Kafka topics.

A :class:`Validator` works on a private delta of the snapshot: each accepted statement's command is
executed on it, so the next statement of the same request sees its effects. Nothing is written
here; the outcome says what to write (:class:`Write`), what to skip with a warning
(:class:`Skip`), or that the statement only reads (:class:`Read`). Validation runs before a record
is written, never at replay.

Besides the catalog's rules, a validator may be given the check of the runtime that will run
persistent queries (a :class:`RuntimeCheck`, such as
:func:`metastore.planner.support.check_runtime`); it gets the query's one analysis.

A validator may also be given the request's ksqlDB configuration overrides
(:class:`~metastore.engine.overrides.ConfigOverrides`; a ``SET`` statement of the request
changes them for the statements after it). They are resolved into the commands: default formats
become the command's explicit formats, ``ksql.persistence.wrap.single.values`` the source's
``WRAP_SINGLE_VALUE``, a persistent query's settings (``ksql.functions.collect_list.limit``)
its command's ``config``. Replay reads the commands only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from metastore.catalog import commands as cmd
from metastore.catalog.exceptions import (
    PREPARING,
    DependentsExistError,
    FormatError,
    IncompatibleSourceKindError,
    PropertyError,
    QueryError,
    SchemaError,
    SourceExistsError,
    SourceNotFoundError,
    StatementError,
    TopicDeletedError,
    TopicError,
    TypeExistsError,
    TypeNotFoundError,
    UnknownQueryError,
    UnknownTopicError,
    UnsupportedStatementError,
)
from metastore.catalog.image import Delta, Image
from metastore.catalog.model import Column, DataSource, PersistentQuery, WindowInfo
from metastore.core.exceptions import MetastoreError
from metastore.core.limits import MAX_NAME_LENGTH, MAX_REPLICAS, MAX_TYPE_DEPTH, RequestLimits
from metastore.engine import (
    alternatives,
    asserts,
    ddl_rules,
    inference,
    insert_record,
    insert_values,
    overrides,
    pseudo_columns,
    pull_queries,
    topics,
    upgrades,
)
from metastore.engine.analysis import (
    Analysis,
    analyse,
    check_reads,
    partitions_by_null,
)
from metastore.engine.intermediates import check_intermediate_types
from metastore.engine.overrides import NO_OVERRIDES, ConfigOverrides
from metastore.engine.typer import check_cast_types
from metastore.formats import rules as formats
from metastore.functions import library as function_library
from metastore.sql import literals
from metastore.sql import statements as st
from metastore.sql import types as ty
from metastore.sql.durations import DurationError, parse_duration_ms
from metastore.sql.parser import parse

PASS_THROUGH = ("TIMESTAMP_FORMAT", "VALUE_DELIMITER", "KEY_DELIMITER", "WRAP_SINGLE_VALUE",
                "RETENTION_MS", "REPLICAS", "KEY_PROTOBUF_NULLABLE_REPRESENTATION",
                "VALUE_PROTOBUF_NULLABLE_REPRESENTATION", "KEY_SCHEMA_FULL_NAME",
                "VALUE_SCHEMA_FULL_NAME", "VALUE_AVRO_SCHEMA_FULL_NAME")
DEFAULT_KEY_FORMAT = overrides.KSQL_DEFAULT_KEY_FORMAT


class TopicFacts(Protocol):
    """What validation may ask Kafka: a topic's partition count (None when it does not exist),
    and the number of brokers (None when unknown, offline)."""

    def partitions(self, topic: str) -> int | None: ...

    def broker_count(self) -> int | None: ...


class RuntimeCheck(Protocol):
    """Whether the runtime that runs persistent queries can run one: returns if it can, raises a
    :class:`StatementError` saying why not. Pure (the analysis and the sink only), so every node
    reaches the same verdict."""

    def __call__(self, analysis: Analysis, sink: DataSource) -> None: ...


class QueryPlanner(Protocol):
    """The plan of a persistent query on the image its command leaves, as the canonical text
    its command keeps (:mod:`metastore.planner.plan_format`); raises a :class:`StatementError`
    for a query it cannot plan, or that cannot go on from the checkpoint of the stored plan it
    ``replacing`` (CREATE OR REPLACE)."""

    def __call__(self, query: PersistentQuery, image: Image,
                 replacing: str | None = None) -> str: ...


@dataclass(frozen=True)
class TopicSpec:
    """A topic a statement creates: its name, partitions, replicas (None: the broker's
    default) and configuration (``cleanup.policy``, ``retention.ms``)."""

    name: str
    partitions: int
    replicas: int | None
    config: tuple[tuple[str, str], ...] = ()


class RecordEncoder(Protocol):
    """A row as its source's key and value bytes (``metastore.kafka.row_encoding``); a row
    its formats cannot hold raises a ``ValueError``."""

    def __call__(self, source: DataSource,
                 row: Mapping[str, Any]) -> tuple[bytes | None, bytes | None]: ...


@dataclass(frozen=True)
class Write:
    statement: st.Statement
    command: cmd.Command
    topics_to_create: tuple[TopicSpec, ...] = ()
    topics_to_delete: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skip:
    statement: st.Statement
    message: str


@dataclass(frozen=True)
class Explained:
    """What an EXPLAIN describes, on the catalog it runs on: a persistent query (running, or
    as its statement would start it), or a transient SELECT."""

    image: Image
    query: PersistentQuery | None = None
    select: st.SelectStatement | None = None
    columns: tuple[Column, ...] = ()
    """The SELECT's result columns."""
    sources: tuple[str, ...] = ()
    """The sources the SELECT reads."""


@dataclass(frozen=True)
class Read:
    statement: st.Statement
    record: insert_record.EncodedRecord | None = None
    """For an INSERT INTO ... VALUES: the record it writes, built and encoded (so a request
    is refused before any of its records is produced)."""
    explained: Explained | None = None
    """For an EXPLAIN: what it describes."""


Outcome = Write | Skip | Read


class Validator:
    """Validates a request's statements in order on one snapshot.

    With a ``runtime_check``, a persistent query it refuses is refused; without one, only the
    catalog's rules apply. ``config`` is the request's configuration overrides."""

    def __init__(self, snapshot: Image, facts: TopicFacts, first_offset: int | None = None,
                 runtime_check: RuntimeCheck | None = None,
                 limits: RequestLimits | None = None,
                 config: ConfigOverrides | None = None,
                 encoder: RecordEncoder | None = None,
                 earlier_topics: Mapping[str, int | None] | None = None,
                 schemas: asserts.SchemaFacts | None = None,
                 schemas_checked: bool = False, planner: QueryPlanner | None = None) -> None:
        """``encoder``: how an INSERT VALUES record is encoded; without it an INSERT VALUES is
        checked and typed but its outcome carries no record. ``earlier_topics``: topics that
        requests written before this one in the same transaction create (with their partitions)
        or delete (None), which Kafka does not show yet. ``schemas``: the node's Schema
        Registry, None when it has none. ``schemas_checked``: the request's ASSERT SCHEMA
        statements were checked already (:func:`asserts.check_schemas`, before the write lock),
        so they do not ask the registry again."""
        self._encoder = encoder
        self._schemas = schemas
        self._schemas_checked = schemas_checked
        self._assertions_until = time.monotonic() + asserts.MAX_ASSERT_WAIT_SECONDS
        self._delta = Delta(snapshot)
        self._config = config or NO_OVERRIDES
        self._runtime_check = runtime_check
        self._planner = planner
        self._facts = facts
        self._limits = limits or RequestLimits()
        self._next_offset = first_offset if first_offset is not None else snapshot.offset + 1
        self._planned_topics: dict[str, int] = {}
        self._topic_changes: dict[str, int | None] = dict(earlier_topics or {})
        """Topics this request and the earlier ones create (partitions) or delete (None)."""

    @property
    def image(self) -> Image:
        return self._delta.apply()

    @property
    def planned_topics(self) -> dict[str, int | None]:
        """The topics this request creates or deletes, after those of ``earlier_topics``."""
        return dict(self._topic_changes)

    @property
    def config(self) -> ConfigOverrides:
        """The configuration overrides in force (the request's, then its SET statements')."""
        return self._config

    def validate(self, statement: st.Statement) -> Outcome:
        outcome = self._validate(statement)
        if isinstance(outcome, Write):
            _check_names(outcome.command)
            self._check_topic_budget(outcome.topics_to_create)
            for topic in outcome.topics_to_create:
                self._planned_topics[topic.name] = topic.partitions
                self._topic_changes[topic.name] = topic.partitions
            for name in outcome.topics_to_delete:
                self._topic_changes[name] = None
            outcome = self._planned(outcome)
            self._delta.execute(outcome.command, self._next_offset)
            self._next_offset += 1
        return outcome

    def _planned(self, outcome: Write) -> Write:
        """A persistent query's command with its plan, made on the image the command leaves:
        the plan every node will run, whatever release it runs."""
        command = outcome.command
        if self._planner is None or not isinstance(
                command, cmd.CreateAsSelectCommand | cmd.InsertQueryCommand):
            return outcome
        before = self._delta.apply()
        preview = Delta(before)
        preview.execute(command, self._next_offset)
        image = preview.apply()
        query = _query_of(command, image, self._next_offset)
        assert query is not None, "a query command creates its query"
        running = before.queries.get(query.query_id)
        replacing = running.plan if running is not None and running.plan else None
        return replace(outcome, command=replace(command, plan=self._planner(
            query, image, replacing)))

    def _validate(self, statement: st.Statement) -> Outcome:
        literals.check_statement(statement)
        for kind, rule in self._write_rules():
            if isinstance(statement, kind):
                return rule(statement)
        if isinstance(statement, st.InsertValues):
            return Read(statement, self._insert_values(statement))
        self._check_read(statement)
        return Read(statement)

    def _write_rules(self) -> tuple[tuple[type[st.Statement], Callable[[Any], Outcome]], ...]:
        """The rule of each statement that writes a command, by the statement's class."""
        return ((st.CreateSource, self._create_source), (st.CreateAsSelect, self._create_as_select),
                (st.InsertInto, self._insert_into), (st.DropSource, self._drop_source),
                (st.Terminate, self._terminate), (st.PauseResume, self._pause_resume),
                (st.Explain, self._explain), (st.AlterSource, self._alter),
                (st.CreateType, self._create_type), (st.DropType, self._drop_type))

    def _check_read(self, statement: st.Statement) -> None:
        """The checks of a statement that writes nothing (a SELECT, PRINT, DESCRIBE, SET,
        SHOW, ASSERT): it raises what ksqlDB raises."""
        if isinstance(statement, st.SelectStatement):
            pull_queries.check_select(statement, self._delta.sources, self._delta.types,
                                      self._delta.queries, self._config)
        elif isinstance(statement, st.PrintTopic):
            self._print(statement)
        elif isinstance(statement, st.Describe):
            if statement.name not in self._delta.sources:
                raise SourceNotFoundError(
                    f"Could not find STREAM/TABLE '{statement.name}' in the Metastore",
                    statement.name)
        elif isinstance(statement, st.SetProperty):
            self._config = self._config.set(statement.name, statement.value)
        elif isinstance(statement, st.DescribeFunction):
            if function_library.lookup(statement.name) is None:  # ksqlDB's UdfFactory lookup
                raise StatementError(f"Can't find any functions with the name "
                                     f"'{statement.name}'")
        elif isinstance(statement, st.AssertSource | st.AssertValues | st.AssertTopic
                        | st.AssertSchema):
            self._assert(statement)
        elif not isinstance(statement, st.ListObjects | st.ListVariables | st.DefineVariable
                            | st.UndefineVariable  # variables were substituted at parsing
                            | st.ConnectorStatement):  # Kafka Connect checks them
            raise UnsupportedStatementError(f"Unsupported statement: {statement.text}")

    def _assert(self, statement: st.AssertSource | st.AssertValues | st.AssertTopic
                | st.AssertSchema) -> None:
        """ASSERT statements (:mod:`metastore.engine.asserts`)."""
        if isinstance(statement, st.AssertSource):  # its WITH clause is a CREATE's
            ddl_rules.check_with_clause(statement.properties)
            asserts.check_source(statement, self._resolve_columns(statement.columns),
                                 self._delta.sources, self._config)
        elif isinstance(statement, st.AssertValues):
            asserts.check_values(statement, self._delta.sources)
        elif isinstance(statement, st.AssertTopic):
            asserts.check_topic(statement, self._topic_partitions(statement.topic))
        elif not self._schemas_checked:
            asserts.check_schema(statement, self._schemas, self._assertions_until)

    def _print(self, statement: st.PrintTopic) -> None:
        """ksqlDB's PRINT: its topic exists (names are case-sensitive) and a statement may read
        it; INTERVAL is at least 1."""
        topics.check_readable(statement.topic)
        if self._topic_partitions(statement.topic) is None:
            raise UnknownTopicError(
                f"Could not find topic '{statement.topic}', or the KSQL user does not have "
                "permissions to list the topic. Topic names are case-sensitive.",
                statement.topic)
        if statement.interval is not None and statement.interval < 1:
            raise QueryError(f"INTERVAL must be greater than one, but was: {statement.interval}")

    def _check_topic_budget(self, created: tuple[TopicSpec, ...]) -> None:
        planned = {**self._planned_topics, **{t.name: t.partitions for t in created}}
        if len(planned) > self._limits.max_topics_created:
            raise TopicError(f"A request may create at most {self._limits.max_topics_created} "
                             f"topics; this one would create {len(planned)}.")
        total = sum(planned.values())
        if total > self._limits.max_partitions_created:
            raise TopicError(f"A request may create at most {self._limits.max_partitions_created}"
                             f" partitions; this one would create {total}.")

    # -- facts -------------------------------------------------------------------------------
    def _topic_partitions(self, topic: str) -> int | None:
        if topic in self._topic_changes:
            partitions = self._topic_changes[topic]
            if partitions is None:
                raise TopicDeletedError(topic)
            return partitions
        return self._facts.partitions(topic)

    # -- CREATE STREAM / TABLE ---------------------------------------------------------------
    def _create_source(self, statement: st.CreateSource) -> Outcome:
        """ksqlDB's stages, in order (see :mod:`metastore.engine.ddl_rules`)."""
        kind, name = statement.kind, statement.name
        properties: Mapping[str, st.PropertyValue] = statement.properties
        # 1. the statement (AstBuilder)
        columns = self._resolve_columns(statement.columns)
        ddl_rules.check_header_types(columns)
        ddl_rules.check_duplicate_names(statement.columns)
        ddl_rules.check_with_clause(properties)
        ddl_rules.check_key_roles(kind, statement.columns)
        topic = str(ddl_rules.with_clause_value(properties, "KAFKA_TOPIC"))
        topics.check_readable(topic)
        # 2. the formats (DefaultFormatInjector, DefaultSchemaInjector)
        key_format, value_format = self._source_formats(statement)
        window = _window_properties(properties)
        ddl_rules.check_cleanup_policy(properties)  # TopicCreateInjector
        partitions, topics_to_create = self._ensure_topic(  # a CREATE TABLE's: compacted
            topic, properties, config=ddl_rules.topic_config(kind, properties))
        ddl_rules.check_retention(kind, properties)
        # 3. the schema (DefaultSchemaInjector, SchemaRegisterInjector)
        kept_schemas: tuple[tuple[str, str], ...] = ()
        if self._schemas is not None:
            inferred = inference.infer_columns(statement, columns, key_format, value_format,
                                               self._schemas)
            columns, kept_schemas = inferred.columns, inferred.properties
        columns.sort(key=lambda column: not column.is_key)  # key columns first, as ksqlDB does
        if not columns:
            fmt = formats.lookup(value_format)
            if fmt is None or not fmt.infers_schema:
                raise SchemaError("No columns supplied.", name)
            key_fmt = formats.lookup(key_format)
            if kind is st.SourceKind.TABLE and not (key_fmt and key_fmt.infers_schema):
                raise SchemaError("Tables require a PRIMARY KEY. Please define the PRIMARY KEY.",
                                  name)  # whatever value columns the registry holds
            raise SchemaError(f"Schema Registry is not available to infer the columns of "
                              f"'{name}' from its {value_format} value schema; declare the "
                              "columns in the statement.", name)
        ddl_rules.check_headers(statement.columns)
        value_columns = [c for c in columns if c.role is st.ColumnRole.VALUE]
        ddl_rules.check_value_wrapping(properties, value_format, len(value_columns))
        properties = _default_wrapping(properties, columns, value_format, self._config)
        self._check_registered_schemas(statement, columns, key_format, value_format, properties)
        # 4. CreateSourceFactory
        pseudo_columns.check_source_names(c.name for c in statement.columns)
        timestamp = (_timestamp_column(properties, columns) if kind is st.SourceKind.STREAM
                     else None)
        existing = self._delta.sources.get(name)
        if existing is not None and not statement.or_replace and not statement.if_not_exists:
            raise SourceExistsError(
                f"Cannot add {kind.label} '{name}': A {existing.kind.label} with the same "
                "name already exists", name)
        if kind is st.SourceKind.TABLE and not any(c.is_key for c in columns):
            raise SchemaError("Tables require a PRIMARY KEY. Please define the PRIMARY KEY.", name)
        if statement.or_replace and (statement.is_source or (existing and existing.is_source)):
            raise SourceExistsError(
                f"Cannot add {kind.label} '{name}': CREATE OR REPLACE is not supported on "
                f"source {kind.label}s.", name)
        if kind is st.SourceKind.TABLE:
            timestamp = _timestamp_column(properties, columns)
        _check_formats(columns, key_format, value_format, properties)
        if window is not None and not any(c.is_key for c in columns):
            raise SchemaError("Windowed sources require a key column.", name)
        if existing is not None and statement.if_not_exists and not statement.or_replace:
            return Skip(statement, _exists_warning(kind, name))  # DdlCommandExec
        source = DataSource(
            name=name, kind=kind, columns=tuple(columns), topic=topic, key_format=key_format,
            value_format=value_format, partitions=partitions, statement=statement.text,
            is_source=statement.is_source, window=window, timestamp_column=timestamp,
            properties=tuple(sorted((*_pass_through(properties), *kept_schemas))))
        if existing is not None:  # ksqlDB's MetaStoreImpl.putSource, as the DDL runs
            upgrades.check_source_upgrade(existing, source)
        return Write(statement, cmd.CreateSourceCommand(source, replace=existing is not None),
                     topics_to_create)

    def _source_formats(self, statement: st.CreateSource) -> tuple[str, str]:
        """The key and value formats of a CREATE: the protobuf-only properties, the defaults
        (DefaultFormatInjector), then each side's format, its properties and its schema id
        (DefaultSchemaInjector)."""
        properties = statement.properties
        key, value = ddl_rules.given_formats(properties)
        ddl_rules.check_protobuf_properties(properties, key, value)
        key = (key or self._config.default_key_format).upper()
        if value is None:
            if self._config.default_value_format is None:
                raise PropertyError(
                    "Statement is missing the 'VALUE_FORMAT' property from the WITH clause. "
                    "Either provide one or set a default via the "
                    "'ksql.persistence.default.format.value' config.")
            value = self._config.default_value_format
        value = value.upper()
        for side, fmt in (("KEY", key), ("VALUE", value)):
            ddl_rules.check_format(side, fmt, ddl_rules.format_properties(
                side, fmt, properties, statement.name))
            _check_schema_id(statement, side, fmt)
        return key, value

    def _check_registered_schemas(self, statement: st.CreateSource | st.CreateAsSelect,
                                  columns: list[Column], key_format: str, value_format: str,
                                  properties: Mapping[str, st.PropertyValue]) -> None:
        """SchemaRegisterInjector: the Avro schema of the key, then of the value, that a CREATE
        or a C*AS's sink registers must be one Avro can name."""
        for side, fmt, chosen in (
                ("KEY", key_format, [c for c in columns if c.is_key]),
                ("VALUE", value_format, [c for c in columns if c.role is st.ColumnRole.VALUE])):
            if fmt != "AVRO" or not chosen:
                continue
            full_name = ddl_rules.format_properties(side, fmt, statement.properties,
                                                    statement.name).get("fullSchemaName")
            wrapping = ddl_rules.with_clause_value(properties, "WRAP_SINGLE_VALUE")
            unwrapped = len(chosen) == 1 if side == "KEY" else wrapping == "false"
            problem = ddl_rules.avro_problem(chosen, unwrapped, full_name)
            if problem:
                raise FormatError(f"Could not register schema for topic: Schema is not "
                                  f"compatible with Avro: {problem}", statement.name)

    def _resolve_columns(self, definitions: tuple[st.ColumnDef, ...]) -> list[Column]:
        columns = []
        for definition in definitions:
            missing = ty.unresolved(definition.type, dict(self._delta.types))
            if missing is not None:
                raise TypeNotFoundError(
                    f"Failed to prepare statement: Cannot resolve unknown type: {missing}", missing)
            resolved = ty.resolve(definition.type, dict(self._delta.types))
            _check_type_depth(resolved, definition.name)
            columns.append(Column(definition.name, resolved, definition.role,
                                  definition.header_key))
        return columns

    def _ensure_topic(self, topic: str, properties: Mapping[str, st.PropertyValue],
                      create_with: int | None = None, config: Mapping[str, str] | None = None
                      ) -> tuple[int | None, tuple[TopicSpec, ...]]:
        """The topic's partitions, and the topic to create: PARTITIONS, else ``create_with``,
        with ``config``."""
        requested = _positive_int(properties, "PARTITIONS")
        replicas = _positive_int(properties, "REPLICAS")
        self._check_replicas(replicas)
        existing = self._topic_partitions(topic)
        if existing is not None:
            if requested is not None and requested != existing:
                raise TopicError(
                    f"A Kafka topic with the name '{topic}' already exists, with different "
                    f"partition/replica configuration than required. KSQL expects {requested} "
                    f"partitions (topic has {existing}).", topic)
            return existing, ()
        partitions = requested if requested is not None else create_with
        if partitions is None:
            raise TopicError(
                f"Topic '{topic}' does not exist. If you want to create a new topic for the "
                "stream/table please re-run the statement providing the required 'PARTITIONS' "
                "configuration in the WITH clause (and optionally 'REPLICAS'). For example: "
                f"WITH (KAFKA_TOPIC='{topic}', PARTITIONS=2, ...)", topic)
        topics.check_writable(topic)
        if partitions > self._limits.max_partitions_per_topic:
            raise TopicError(f"Invalid PARTITIONS value: {partitions}. A statement may create "
                             f"a topic of at most {self._limits.max_partitions_per_topic} "
                             "partitions.", topic)
        return partitions, (TopicSpec(topic, partitions, replicas,
                                      tuple(sorted((config or {}).items()))),)

    def _check_replicas(self, replicas: int | None) -> None:
        if replicas is None:
            return
        brokers = self._facts.broker_count()
        if replicas > MAX_REPLICAS or (brokers is not None and replicas > brokers):
            available = f"the cluster has {brokers} broker(s)" if brokers is not None else (
                f"the limit is {MAX_REPLICAS}")
            raise TopicError(f"Invalid REPLICAS value: {replicas}. Replication factor: {replicas}"
                             f" larger than available brokers: {available}.")

    # -- CREATE ... AS SELECT ----------------------------------------------------------------
    def _create_as_select(self, statement: st.CreateAsSelect) -> Outcome:
        kind, name = statement.kind, statement.name
        existing = self._delta.sources.get(name)
        ddl_rules.check_with_clause(statement.properties, as_select=True)
        check_cast_types(statement.query)
        analysis = analyse(statement.query, self._delta.sources, self._delta.types, name,
                           new_planner=self._config.new_query_planner,
                           sink_properties=statement.properties)
        if existing is not None:  # ksqlDB plans the query first (its QueryIdUtil), then the sink
            upgrades.check_single_writer(name, [q.query_id for q in self._writers(name)])
            if not statement.or_replace and not statement.if_not_exists:
                raise SourceExistsError(f"Cannot add {kind.label} '{name}': A "
                                        f"{existing.kind.label} with the same name already "
                                        "exists", name)
        if analysis.kind is not kind:
            other = analysis.kind.value
            raise QueryError(f"Invalid result type. Your SELECT query produces a {other}. Please "
                             f"use CREATE {other} AS SELECT statement instead.", name)
        if existing is not None and not statement.or_replace:  # IF NOT EXISTS, once planned
            return Skip(statement, _exists_warning(kind, name))
        if name in analysis.sources:
            raise QueryError(f"Cannot create {kind.label} '{name}' from itself.", name)
        first = self._delta.sources[analysis.sources[0]]
        key_format, value_format = _formats(statement.properties,
                                            defaults=(first.key_format, first.value_format))
        inherited = not {"KEY_FORMAT", "FORMAT"} & set(statement.properties)
        if partitions_by_null(statement.query.partition_by):  # ksqlDB's Analyzer.keyFormatName
            if not inherited and key_format != "NONE":
                raise QueryError("Key format specified for stream without key columns.", name)
            key_format = "NONE"
        if key_format == "NONE" and analysis.key_columns and inherited:  # ksqlDB: the default
            key_format = self._config.default_key_format
        _check_delimiters(statement.properties, key_format, value_format)
        _check_sink_formats(statement, key_format, value_format)
        ddl_rules.check_wrapping_supported(statement.properties, value_format)
        columns = list(analysis.columns)
        if kind is st.SourceKind.TABLE and not analysis.key_columns:
            raise SchemaError("Tables require a PRIMARY KEY. Please define the PRIMARY KEY.", name)
        ddl_rules.check_single_value(statement.properties, sum(
            c.role is st.ColumnRole.VALUE for c in columns))
        properties = _default_wrapping(statement.properties, columns, value_format, self._config)
        check_intermediate_types(analysis)
        _check_formats(columns, key_format, value_format, properties)
        topic = str(properties.get("KAFKA_TOPIC", self._config.output_topic_prefix + name))
        topics.check_writable(topic)
        ddl_rules.check_cleanup_policy(properties)  # TopicCreateInjector
        window = analysis.query.window
        ddl_rules.check_retention(kind, properties, windowed=window is not None)
        config = ddl_rules.topic_config(kind, properties, window_retention_ms=(
            window.retention_ms if window is not None else None), windowed=window is not None)
        partitions, created = self._ensure_topic(topic, properties,
                                                 create_with=first.partitions or 1,
                                                 config=config)
        self._check_registered_schemas(statement, columns, key_format, value_format, properties)
        kept_schemas: tuple[tuple[str, str], ...] = ()
        if self._schemas is not None:
            kept_schemas = inference.registered_sink_schemas(statement, topic, columns, key_format,
                                                             value_format, self._schemas)
        if existing is not None and existing.is_source:  # ksqlDB's EngineExecutor.execute
            raise QueryError(f"Cannot insert into read-only {existing.kind.label}: {name}", name)
        source = DataSource(
            name=name, kind=kind, columns=tuple(columns), topic=topic, key_format=key_format,
            value_format=value_format, partitions=partitions, statement=statement.text,
            window=analysis.window, timestamp_column=_timestamp_column(properties, columns),
            properties=tuple(sorted((*_pass_through({**_inherited_delimiters(properties, first),
                                                     **properties}), *kept_schemas))))
        if existing is not None:  # its DDL replaces the source, then the query the one it had
            upgrades.check_source_upgrade(existing, source)
            self._check_upgrade(existing, analysis)
        if self._runtime_check is not None:
            self._runtime_check(analysis, source)
        query_kind = "CSAS" if kind is st.SourceKind.STREAM else "CTAS"
        return Write(statement, cmd.CreateAsSelectCommand(
            source, query_kind, analysis.sources, _stored_text(statement.query),
            replace=existing is not None, config=self._config.query_config()), created)

    def _check_upgrade(self, existing: DataSource, analysis: Analysis) -> None:
        """ksqlDB's plan check of a query replacing the one that writes ``existing`` (the one
        query writing it, re-analysed from its text; none, or a text that no longer analyses,
        is not compared)."""
        writers = self._writers(existing.name)
        if len(writers) != 1:
            return
        try:
            [previous] = parse(writers[0].sql)
            if not isinstance(previous, st.SelectStatement):
                return
            old = analyse(previous.query, self._delta.sources, self._delta.types, existing.name,
                          new_planner=overrides.new_query_planner(dict(writers[0].config)))
        except MetastoreError:
            # The stored text was accepted against an earlier catalog; any typed refusal of it
            # now (a source since replaced, a function since removed) means it cannot be
            # compared, never that the new statement fails.
            return
        upgrades.check_query_upgrade(old, analysis)

    def _writers(self, sink: str) -> list[PersistentQuery]:
        """The queries writing into ``sink``: the one that created it first, then its INSERTs."""
        writers = [q for q in self._delta.queries.values() if q.sink == sink]
        return sorted(writers, key=lambda q: (q.kind == "INSERT", q.offset, q.query_id))

    def _insert_into(self, statement: st.InsertInto) -> Outcome:
        ddl_rules.check_insert_with_clause(statement.properties)
        check_reads(statement.query, self._delta.sources)  # ksqlDB reads its sources first
        target = self._delta.sources.get(statement.target)
        if target is None:  # AstSanitizer: located where the name would start
            location = statement.location
            raise SourceNotFoundError(f"Source `{statement.target}` does not exist.",
                                      statement.target, stage=PREPARING,
                                      location=(location.line, location.column + 12))
        if target.kind is st.SourceKind.TABLE:
            raise QueryError(f"INSERT INTO can only be used to insert into a stream. "
                             f"{target.name} is a table.", target.name, stage=PREPARING)
        if any(c.role in (st.ColumnRole.HEADER, st.ColumnRole.HEADERS) for c in target.columns):
            raise QueryError(f"Cannot insert into {target.name} because it has header columns",
                             target.name, stage=PREPARING)
        if topics.READ_ONLY.fullmatch(target.topic) is not None:  # ksqlDB's DistributingExecutor
            raise TopicError(f"Cannot insert into read-only topic: {target.topic}", target.topic)
        topics.check_writable(target.topic)
        check_cast_types(statement.query)
        analysis = analyse(statement.query, self._delta.sources, self._delta.types, target.name,
                           new_planner=self._config.new_query_planner, target=target.columns)
        if analysis.kind is not st.SourceKind.STREAM:  # EngineExecutor.validateExistingSink
            raise QueryError(f"Incompatible data sink and query result. Data sink "
                             f"({target.name}) type is KSTREAM but select query result is "
                             f"KTABLE.", target.name)
        result = [(c.name, c.type, c.is_key) for c in analysis.columns]
        sink = [(c.name, c.type, c.is_key) for c in target.columns if c.role in (
            st.ColumnRole.KEY, st.ColumnRole.VALUE)]
        if result != sink:
            raise QueryError(
                "Incompatible schema between results and sink.\n"
                f"Result schema is {upgrades.schema_text(analysis.columns)}\n"
                f"Sink schema is {upgrades.schema_text(target.columns)}", target.name)
        if target.is_source:  # ksqlDB's EngineExecutor, once the query is planned
            raise QueryError(f"Cannot insert into read-only stream: {target.name}", target.name)
        if self._runtime_check is not None:
            self._runtime_check(analysis, target)
        return Write(statement, cmd.InsertQueryCommand(target.name, analysis.sources,
                                                       _stored_text(statement.query),
                                                       config=self._config.query_config()))

    def _insert_values(self, statement: st.InsertValues) -> insert_record.EncodedRecord | None:
        """The record of an INSERT VALUES, typed (``insert_record.build``) and in its topic's
        formats (``row_encoding.encode_row``): every check the node makes before writing it."""
        insert_values.check_statement(statement)
        target = insert_values.target(statement.target, self._delta.sources)
        topics.check_writable(target.topic)
        insert_values.check_writable(target)
        insert_values.check_record(statement, target)
        record = insert_record.build(statement, target, int(time.time() * 1000))
        if self._encoder is None:
            return None
        try:
            key, value = self._encoder(target, record.row)
        except ValueError as error:
            raise insert_record.InsertValuesError(
                f"Failed to insert values into '{statement.target}'. {error}",
                target.name) from error
        return insert_record.EncodedRecord(target.topic, key, value, record.timestamp_ms)

    # -- DROP / TERMINATE / ALTER --------------------------------------------------------------
    def _drop_source(self, statement: st.DropSource) -> Outcome:
        name = statement.name
        source = self._delta.sources.get(name)
        if source is None:
            if statement.if_exists:
                return Skip(statement, f"Source `{name}` does not exist.")
            hint = alternatives.hint(name, self._delta.sources.values(), statement.kind)
            raise SourceNotFoundError(
                f"{statement.kind.label.capitalize()} {name} does not exist.{hint}", name)
        if source.kind is not statement.kind:  # ksqlDB's DropSourceFactory, both kinds lower
            raise IncompatibleSourceKindError(
                f"Incompatible data source type is {source.kind.label}, but statement was "
                f"DROP {statement.kind.label}", name)
        if statement.delete_topic:
            self._check_deletable(source)
        readers = [q for q in self._delta.queries.values() if name in q.sources]
        if readers:
            sinks = sorted({q.sink for q in readers})
            raise DependentsExistError(
                f"Cannot drop {name}.\nThe following streams and/or tables read from this source: "
                f"[{', '.join(sinks)}].\nYou need to drop them before dropping {name}.", name)
        inserts = sorted(q.query_id for q in self._delta.queries.values()
                         if q.kind == "INSERT" and q.sink == name)
        if inserts:  # the query that created the sink is terminated with it; INSERTs are not
            raise DependentsExistError(
                f"Cannot drop {name}.\nThe following queries read from this source: [].\n"
                f"The following queries write into this source: [{', '.join(inserts)}].\n"
                f"You need to terminate them before dropping {name}.", name)
        return Write(statement, cmd.DropSourceCommand(source.kind, name, statement.delete_topic,
                                                      source.topic),
                     topics_to_delete=(source.topic,) if statement.delete_topic else ())

    def _check_deletable(self, source: DataSource) -> None:
        if source.is_source:
            raise StatementError(f"Cannot delete topic for read-only source: {source.name}",
                                 source.name)
        topics.check_writable(source.topic)
        using = sorted(other.name for other in self._delta.sources.values()
                       if other.topic == source.topic and other.name != source.name)
        if using:
            raise TopicError(f"Refusing to delete topic. Found other data sources "
                             f"({', '.join(using)}) using topic {source.topic}", source.topic)

    def _terminate(self, statement: st.Terminate) -> Outcome:
        if statement.query_id is None:
            return Write(statement, cmd.TerminateCommand(tuple(sorted(self._delta.queries))))
        if statement.query_id not in self._delta.queries:
            raise UnknownQueryError(f"Unknown queryId: {statement.query_id}", statement.query_id)
        return Write(statement, cmd.TerminateCommand((statement.query_id,)))

    def _explain(self, statement: st.Explain) -> Outcome:
        """ksqlDB's ExplainExecutor: a persistent query by id, or a statement that runs a query,
        checked as if it ran (a CREATE ... AS SELECT or INSERT INTO in a sandbox of this
        catalog, so its query is the one it would start)."""
        if statement.query_id is not None:
            query = self._delta.queries.get(statement.query_id)
            if query is None:
                raise UnknownQueryError(f"Query with id:{statement.query_id} does not exist, use "
                                        "SHOW QUERIES to view the full set of queries.",
                                        statement.query_id)
            return Read(statement, explained=Explained(self.image, query=query))
        inner = statement.explained
        if isinstance(inner, st.SelectStatement):
            analysis = pull_queries.check_select(inner, self._delta.sources, self._delta.types,
                                                 self._delta.queries, self._config)
            return Read(statement, explained=Explained(
                self.image, select=inner, columns=analysis.columns, sources=analysis.sources))
        if isinstance(inner, st.CreateAsSelect | st.InsertInto):
            sandbox = Validator(self.image, self._facts, self._next_offset, self._runtime_check,
                                self._limits, self._config, earlier_topics=self._topic_changes,
                                planner=self._planner)
            outcome = sandbox.validate(inner)
            image = sandbox.image
            query = _query_of(outcome.command, image, self._next_offset) if isinstance(
                outcome, Write) else None
            if query is not None:
                return Read(statement, explained=Explained(image, query=query))
        raise QueryError("The provided statement does not run a ksql query")

    def _pause_resume(self, statement: st.PauseResume) -> Outcome:
        """ksqlDB's ValidatedCommandFactory: a named query must be a persistent one."""
        if statement.query_id is None:
            return Write(statement, cmd.PauseResumeCommand(tuple(sorted(self._delta.queries)),
                                                           statement.pause, all_queries=True))
        if statement.query_id not in self._delta.queries:
            raise UnknownQueryError(f"Unknown queryId: {statement.query_id}", statement.query_id)
        return Write(statement, cmd.PauseResumeCommand((statement.query_id,), statement.pause))

    def _alter(self, statement: st.AlterSource) -> Outcome:
        """ksqlDB's order: the new columns' types (as it prepares the statement), read-only
        sources (its AlterSourceFactory, worded with the statement's kind), then as the command
        runs (DdlCommandExec): the source, its kind, C*AS sinks, the new schema, the upgrade."""
        name, kind = statement.name, statement.kind
        added = self._resolve_columns(statement.columns)
        source = self._delta.sources.get(name)
        if source is not None and source.is_source:
            raise UnsupportedStatementError(
                f"Cannot alter {kind.label} '{name}': ALTER operations are not supported on "
                f"source {kind.label}s.", name)
        if source is None:
            raise SourceNotFoundError(f"Source {name} does not exist.", name)
        if source.kind is not kind:
            raise IncompatibleSourceKindError(
                f"Incompatible data source type is {source.kind.value}, but statement was "
                f"ALTER {kind.value}", name)
        if source.query_id is not None:
            raise UnsupportedStatementError(
                "ALTER command is not supported for CREATE ... AS statements.", name)
        columns = list(source.columns)
        for column in added:  # appended to the value; a name the value has, or a header's, is
            if any(c.name == column.name and not c.is_key for c in columns):  # a duplicate
                raise SchemaError(f"Cannot add column `{column.name}` to schema. A column with "
                                  "the same name already exists.", name)
            columns.append(column)
        if any(c.name == k.name for c in added for k in source.key_columns):
            raise SchemaError("Schema contains duplicate column names", name)
        _check_formats(columns, source.key_format, source.value_format, {})
        upgrades.check_source_upgrade(source, replace(source, columns=tuple(columns)))
        return Write(statement, cmd.AlterSourceCommand(source.kind, name, tuple(added),
                                                       statement.text))

    # -- TYPES -------------------------------------------------------------------------------
    def _create_type(self, statement: st.CreateType) -> Outcome:
        """ksqlDB resolves the type as it prepares the statement, then (RegisterTypeFactory)
        refuses a registered name unless IF NOT EXISTS, which DdlCommandExec answers."""
        missing = ty.unresolved(statement.type, dict(self._delta.types))
        if missing is not None:
            raise TypeNotFoundError(f"Type '{missing}' does not exist.", missing)
        resolved = ty.resolve(statement.type, dict(self._delta.types))
        _check_type_depth(resolved, statement.name)
        existing = self._delta.types.get(statement.name)
        if existing is not None:
            shown = ty.backticked(existing)
            if statement.if_not_exists:
                return Skip(statement, f"{statement.name} is already registered with type {shown}")
            raise TypeExistsError(f"Cannot register custom type '{statement.name}' since it is "
                                  f"already registered with type: {shown}", statement.name)
        return Write(statement, cmd.CreateTypeCommand(statement.name, resolved))

    def _drop_type(self, statement: st.DropType) -> Outcome:
        if statement.name not in self._delta.types:
            if statement.if_exists:
                return Skip(statement, f"Type '{statement.name}' does not exist")
            raise TypeNotFoundError(f"Type {statement.name} does not exist.", statement.name)
        return Write(statement, cmd.DropTypeCommand(statement.name))


# -- helpers ---------------------------------------------------------------------------------------
def _check_type_depth(sql_type: ty.SqlType, name: str) -> None:
    depth = ty.depth(sql_type)
    if depth > MAX_TYPE_DEPTH:
        raise SchemaError(f"The type of '{name[:60]}' is nested {depth} levels deep, custom "
                          f"types resolved; the limit is {MAX_TYPE_DEPTH}.", name)


def _check_names(command: cmd.Command) -> None:
    """Every name a command adds to the catalog is at most MAX_NAME_LENGTH characters long."""
    for what, name in cmd.names(command):
        if len(name) > MAX_NAME_LENGTH:
            raise SchemaError(f"The {what} name '{name[:60]}...' is {len(name)} characters long; "
                              f"the limit is {MAX_NAME_LENGTH}.", name[:MAX_NAME_LENGTH])


def _exists_warning(kind: st.SourceKind, name: str) -> str:
    return f"Cannot add {kind.label} `{name}`: A {kind.label} with the same name already exists."


def _formats(properties: Mapping[str, st.PropertyValue],
             defaults: tuple[str, str]) -> tuple[str, str]:
    """The key and value formats of a C*AS: the statement's, else ``defaults`` (its first
    source's), as ksqlDB's DefaultFormatInjector."""
    if "FORMAT" in properties:
        for specific in ("KEY_FORMAT", "VALUE_FORMAT"):
            if specific in properties:
                raise PropertyError(
                    f"Cannot supply both '{specific}' and 'FORMAT' properties, as 'FORMAT' sets "
                    "both key and value formats. Either use just 'FORMAT', or use 'KEY_FORMAT' "
                    "and 'VALUE_FORMAT'.")
    key, value = ddl_rules.given_formats(properties)
    key, value = (key or defaults[0]).upper(), (value or defaults[1]).upper()
    for name in (key, value):
        if formats.lookup(name) is None:
            raise FormatError(f"Unknown format: {name}")
    return key, value


def _check_schema_id(statement: st.CreateSource, side: str, fmt: str) -> None:
    """DefaultSchemaInjector.shouldInferSchema: a schema id needs a format that infers schemas,
    and no columns of its side (headers are neither side's)."""
    prop = f"{side}_SCHEMA_ID"
    if prop not in statement.properties:
        return
    found = formats.lookup(fmt)
    if found is None or not found.infers_schema:
        raise PropertyError(f"{side}_FORMAT should support schema inference when {prop} is "
                            f"provided. Current format is {fmt}.")
    if any(c.role.is_key if side == "KEY" else c.role is st.ColumnRole.VALUE
           for c in statement.columns):
        raise SchemaError(f"Table elements and {prop} cannot both exist for create statement.")


def _window_properties(properties: Mapping[str, st.PropertyValue]) -> WindowInfo | None:
    window_type = properties.get("WINDOW_TYPE")
    size = properties.get("WINDOW_SIZE")
    if window_type is None:
        if size is not None:
            raise PropertyError("'WINDOW_SIZE' should not be set without 'WINDOW_TYPE'.")
        return None
    kind = str(window_type).strip().upper()
    if kind not in ("TUMBLING", "HOPPING", "SESSION"):
        raise PropertyError(f"Configuration WINDOW_TYPE is invalid: Unknown window type: "
                            f"'{window_type}'. Valid values are TUMBLING, HOPPING, SESSION")
    if kind == "SESSION":
        if size is not None:
            raise PropertyError("'WINDOW_SIZE' should not be set for SESSION windows.")
        return WindowInfo(kind)
    if size is None:
        raise PropertyError(f"{kind} windows require 'WINDOW_SIZE' to be provided in the WITH "
                            "clause. For example: 'WINDOW_SIZE'='10 SECONDS'")
    try:
        return WindowInfo(kind, parse_duration_ms(str(size).strip()))
    except DurationError as error:
        raise PropertyError(f"Configuration WINDOW_SIZE is invalid: {error}") from error


def _check_delimiters(properties: Mapping[str, st.PropertyValue], key_format: str,
                      value_format: str) -> None:
    """A delimiter is one character, TAB or SPACE, for a DELIMITED side (ksqlDB's Delimiter and
    FormatFactory)."""
    for side, fmt in (("KEY", key_format), ("VALUE", value_format)):
        prop = f"{side}_DELIMITER"
        if prop not in properties:
            continue
        problem = ddl_rules.delimiter_problem(ddl_rules.with_clause_value(properties, prop) or "")
        if problem:
            raise PropertyError(f"Failed to prepare statement: Configuration {prop} is invalid: "
                                f"{problem}")
        if fmt != "DELIMITED":
            raise PropertyError(f"{fmt} does not support the following configs: [delimiter]")


def _check_sink_formats(statement: st.CreateAsSelect, key_format: str, value_format: str
                        ) -> None:
    """The sink's formats and the properties the WITH clause gives them (ksqlDB's Analyzer
    builds them with FormatFactory.of, as a CREATE's): the protobuf-only properties, then each
    side's properties (a schema id aside: a C*AS registers its sink's schema)."""
    ddl_rules.check_protobuf_properties(statement.properties, key_format, value_format)
    for side, fmt in (("KEY", key_format), ("VALUE", value_format)):
        given = ddl_rules.format_properties(side, fmt, statement.properties, statement.name)
        given.pop("schemaId", None)
        ddl_rules.check_format(side, fmt, given)


def _default_wrapping(properties: Mapping[str, st.PropertyValue], columns: list[Column],
                      value_format: str, config: ConfigOverrides
                      ) -> Mapping[str, st.PropertyValue]:
    """``properties`` with the configured ``WRAP_SINGLE_VALUE`` when the statement sets none,
    the value is a single column and the format supports that wrapping (as ksqlDB's
    SerdeFeaturesFactory: otherwise the setting is silently not applied)."""
    wrapped = config.wrap_single_values
    if wrapped is None or "WRAP_SINGLE_VALUE" in properties:
        return properties
    if sum(c.role is st.ColumnRole.VALUE for c in columns) != 1:
        return properties
    fmt = formats.lookup(value_format)
    if fmt is None or not (fmt.wraps if wrapped else fmt.unwraps):
        return properties
    return {**properties, "WRAP_SINGLE_VALUE": wrapped}


def _persistence(columns: list[Column], key: bool, features: str) -> str:
    shown = ", ".join(ty.field_text(c.name, c.type) + (" KEY" if key else "")
                      for c in columns)
    return f"Persistence{{columns=[{shown}], features={features}}}"


def _serde_features(fmt: formats.Format, columns: list[Column], key: bool,
                    properties: Mapping[str, st.PropertyValue]) -> str:
    """ksqlDB's SerdeFeaturesFactory, as a persistence schema shows them: a single key column
    is unwrapped when its format could do either; a single value column as WRAP_SINGLE_VALUE
    (the statement's, else the configured default) says."""
    if len(columns) != 1:
        return "[]"
    if key:
        return "[UNWRAP_SINGLES]" if fmt.wraps and fmt.unwraps else "[]"
    wrapping = ddl_rules.with_clause_value(properties, "WRAP_SINGLE_VALUE")
    if wrapping is None:
        return "[]"
    return "[WRAP_SINGLES]" if wrapping.lower() == "true" else "[UNWRAP_SINGLES]"


def _check_formats(columns: list[Column], key_format: str, value_format: str,
                   properties: Mapping[str, st.PropertyValue]) -> None:
    """CreateSourceFactory.validateSerdesCanHandleSchemas: the key serde (no maps, then the
    format), then the value serde; a format's refusal is wrapped as GenericSerdeFactory does."""
    key_columns = [c for c in columns if c.is_key]
    value_columns = [c for c in columns if c.role is st.ColumnRole.VALUE]
    for column in key_columns:
        if ty.contains_map(column.type):
            raise SchemaError(
                "Map keys, including types that contain maps, are not supported as they may lead "
                "to unexpected behavior due to inconsistent serialization. Key column name: "
                f"`{column.name}`. Column type: {ty.backticked(column.type)}. "
                "See https://github.com/confluentinc/ksql/issues/6621 for more.", column.name)
    for target, name, chosen, is_key in (("Key", key_format, key_columns, True),
                                         ("Value", value_format, value_columns, False)):
        fmt = formats.lookup(name)
        assert fmt is not None
        if name == "NONE" and chosen:  # ksqlDB's NoneFormat, when it builds the serde
            problem: str | None = ("The 'NONE' format can only be used when no columns are "
                                   f"defined. Got: [{upgrades.schema_text(chosen)}]")
        else:
            problem = formats.schema_problem(fmt, [(c.name, c.type) for c in chosen], key=is_key)
        if problem:
            schema = _persistence(chosen, is_key, _serde_features(fmt, chosen, is_key, properties))
            raise FormatError(f"{target} format does not support schema.\nformat: {name}\n"
                              f"schema: {schema}\nreason: {problem}")


def _timestamp_column(properties: Mapping[str, st.PropertyValue], columns: Sequence[Column]
                      ) -> str | None:
    return ddl_rules.timestamp_column(properties, [(c.name, c.type) for c in columns])


def _inherited_delimiters(properties: Mapping[str, st.PropertyValue],
                          source: DataSource) -> dict[str, st.PropertyValue]:
    """The delimiters a sink takes from the source it reads, for each format it inherits."""
    inherited: dict[str, st.PropertyValue] = {}
    for side, format_keys in (("KEY", ("KEY_FORMAT", "FORMAT")),
                              ("VALUE", ("VALUE_FORMAT", "FORMAT"))):
        delimiter = source.property(f"{side}_DELIMITER")
        if delimiter is not None and not any(key in properties for key in format_keys):
            inherited[f"{side}_DELIMITER"] = delimiter
    return inherited


def _positive_int(properties: Mapping[str, st.PropertyValue], name: str) -> int | None:
    if name not in properties:
        return None
    value = properties[name]
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())  # ksqlDB's ConfigDef reads a number's text as the number
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PropertyError(f"Invalid {name} value: {value}. It must be a positive whole number.")
    return value


def _pass_through(properties: Mapping[str, st.PropertyValue]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((key, str(ddl_rules.property_text(properties[key])))
                        for key in PASS_THROUGH if key in properties))


def _stored_text(query: st.Query) -> str:
    """A persistent query's text as the log keeps it: its SELECT, and EMIT FINAL, which the
    runtime needs (EMIT CHANGES is a persistent query's default and is left out)."""
    return f"{query.text} EMIT FINAL" if query.emit_final else query.text


def _query_of(command: cmd.Command, image: Image, offset: int) -> PersistentQuery | None:
    """The query a CREATE ... AS SELECT or INSERT INTO ... SELECT command at ``offset`` made in
    ``image``; None for other commands."""
    if isinstance(command, cmd.CreateAsSelectCommand):
        sink = image.source(command.source.name)
        return image.queries.get(sink.query_id or "") if sink else None
    if isinstance(command, cmd.InsertQueryCommand):
        return image.queries.get(command.id_at(offset))
    return None
