"""Validate statements against a snapshot of the image plus facts about Kafka topics.

A :class:`Validator` works on a private delta of the snapshot: each accepted statement's command is
executed on it, so the next statement of the same request sees its effects. Nothing is written
here; the outcome says what to write (:class:`Write`), what to skip with a warning
(:class:`Skip`), or that the statement only reads (:class:`Read`). Validation runs before a record
is written, never at replay.

Besides the catalog's rules, a validator may be given the check of the runtime that will run
persistent queries (a :class:`RuntimeCheck`, such as
:func:`metastore.queries.support.check_runtime`); it gets the query's one analysis.

A validator may also be given the request's ksqlDB configuration overrides
(:class:`~metastore.catalog.overrides.ConfigOverrides`; a ``SET`` statement of the request
changes them for the statements after it). They are resolved into the commands: default formats
become the command's explicit formats, ``ksql.persistence.wrap.single.values`` the source's
``WRAP_SINGLE_VALUE``, a persistent query's settings (``ksql.functions.collect_list.limit``)
its command's ``config``. Replay reads the commands only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from metastore.catalog import commands as cmd
from metastore.catalog import formats, overrides, topics
from metastore.catalog.analysis import Analysis, analyse
from metastore.catalog.exceptions import (
    DependentsExistError,
    FormatError,
    IncompatibleSourceKindError,
    PropertyError,
    QueryError,
    SchemaError,
    SourceExistsError,
    SourceNotFoundError,
    StatementError,
    TopicError,
    TypeExistsError,
    TypeNotFoundError,
    UnknownQueryError,
    UnsupportedStatementError,
)
from metastore.catalog.image import Delta, Image
from metastore.catalog.model import Column, DataSource, WindowInfo
from metastore.catalog.overrides import NO_OVERRIDES, ConfigOverrides
from metastore.limits import MAX_NAME_LENGTH, MAX_REPLICAS, MAX_TYPE_DEPTH, RequestLimits
from metastore.sql import statements as st
from metastore.sql import types as ty
from metastore.sql.durations import DurationError, parse_duration_ms

CREATE_PROPERTIES = frozenset({
    "KAFKA_TOPIC", "VALUE_FORMAT", "KEY_FORMAT", "FORMAT", "PARTITIONS", "REPLICAS", "TIMESTAMP",
    "TIMESTAMP_FORMAT", "VALUE_DELIMITER", "KEY_DELIMITER", "WRAP_SINGLE_VALUE", "WINDOW_TYPE",
    "WINDOW_SIZE", "RETENTION_MS", "KEY_SCHEMA_ID", "VALUE_SCHEMA_ID", "KEY_SCHEMA_FULL_NAME",
    "VALUE_SCHEMA_FULL_NAME", "VALUE_AVRO_SCHEMA_FULL_NAME", "KEY_PROTOBUF_NULLABLE_REPRESENTATION",
    "VALUE_PROTOBUF_NULLABLE_REPRESENTATION", "SOURCE_CONNECTOR",
})
AS_SELECT_PROPERTIES = CREATE_PROPERTIES - {"WINDOW_TYPE", "WINDOW_SIZE"}
PASS_THROUGH = ("TIMESTAMP_FORMAT", "VALUE_DELIMITER", "KEY_DELIMITER", "WRAP_SINGLE_VALUE",
                "RETENTION_MS", "REPLICAS")
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


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replicas: int | None


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
class Read:
    statement: st.Statement


Outcome = Write | Skip | Read


class Validator:
    """Validates a request's statements in order on one snapshot.

    With a ``runtime_check``, a persistent query it refuses is refused; without one, only the
    catalog's rules apply. ``config`` is the request's configuration overrides."""

    def __init__(self, snapshot: Image, facts: TopicFacts, first_offset: int | None = None,
                 runtime_check: RuntimeCheck | None = None,
                 limits: RequestLimits | None = None,
                 config: ConfigOverrides | None = None) -> None:
        self._delta = Delta(snapshot)
        self._config = config or NO_OVERRIDES
        self._runtime_check = runtime_check
        self._facts = facts
        self._limits = limits or RequestLimits()
        self._next_offset = first_offset if first_offset is not None else snapshot.offset + 1
        self._planned_topics: dict[str, int] = {}

    @property
    def image(self) -> Image:
        return self._delta.apply()

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
            self._delta.execute(outcome.command, self._next_offset)
            self._next_offset += 1
        return outcome

    def _validate(self, statement: st.Statement) -> Outcome:
        if isinstance(statement, st.CreateSource):
            return self._create_source(statement)
        if isinstance(statement, st.CreateAsSelect):
            return self._create_as_select(statement)
        if isinstance(statement, st.InsertInto):
            return self._insert_into(statement)
        if isinstance(statement, st.DropSource):
            return self._drop_source(statement)
        if isinstance(statement, st.Terminate):
            return self._terminate(statement)
        if isinstance(statement, st.AlterSource):
            return self._alter(statement)
        if isinstance(statement, st.CreateType):
            return self._create_type(statement)
        if isinstance(statement, st.DropType):
            return self._drop_type(statement)
        if isinstance(statement, st.InsertValues):
            self._insert_values(statement)
            return Read(statement)
        if isinstance(statement, st.SelectStatement):
            analyse(statement.query, self._delta.sources, self._delta.types, transient=True)
            return Read(statement)
        if isinstance(statement, st.Describe):
            if statement.name not in self._delta.sources:
                raise SourceNotFoundError(
                    f"Could not find STREAM/TABLE '{statement.name}' in the Metastore",
                    statement.name)
            return Read(statement)
        if isinstance(statement, st.SetProperty):
            self._config = self._config.set(statement.name, statement.value)
            return Read(statement)
        if isinstance(statement, st.ListObjects):
            return Read(statement)
        raise UnsupportedStatementError(f"Unsupported statement: {statement.text}")

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
        if topic in self._planned_topics:
            return self._planned_topics[topic]
        return self._facts.partitions(topic)

    # -- CREATE STREAM / TABLE ---------------------------------------------------------------
    def _create_source(self, statement: st.CreateSource) -> Outcome:
        kind, name = statement.kind, statement.name
        _check_column_roles(statement.kind, statement.columns)
        existing = self._delta.sources.get(name)
        if statement.or_replace and (statement.is_source or (existing and existing.is_source)):
            raise SourceExistsError(
                f"Cannot add {kind.label} '{name}': CREATE OR REPLACE is not supported on "
                f"source {kind.label}s.", name)
        if existing is not None:
            if statement.if_not_exists:
                return Skip(statement, _exists_warning(kind, name))
            if not statement.or_replace or existing.kind is not kind:
                raise SourceExistsError(
                    f"Cannot add {kind.label} '{name}': A {existing.kind.label} with the same "
                    "name already exists", name)
        properties: Mapping[str, st.PropertyValue] = statement.properties
        _check_known(properties, CREATE_PROPERTIES)
        key_format, value_format = _formats(properties, defaults=None, config=self._config)
        if "KAFKA_TOPIC" not in properties:
            raise PropertyError('Failed to prepare statement: Missing required property "KAFKA_TOPIC" '
                                "which has no default value.")
        topic = str(properties["KAFKA_TOPIC"])
        topics.check_readable(topic)
        _check_schema_ids(statement, key_format, value_format)
        window = _window_properties(properties)
        _check_delimiters(properties, key_format, value_format)
        _check_wrapping(properties, value_format)
        columns = self._resolve_columns(statement.columns)
        columns.sort(key=lambda column: not column.is_key)  # key columns first, as ksqlDB does
        if not columns:
            fmt = formats.lookup(value_format)
            if fmt is not None and fmt.infers_schema:
                raise SchemaError(f"Schema Registry is not available to infer the columns of "
                                  f"'{name}' from its {value_format} value schema; declare the "
                                  "columns in the statement.", name)
            raise SchemaError("The statement does not define any columns.", name)
        if kind is st.SourceKind.TABLE and not any(c.is_key for c in columns):
            raise SchemaError("Tables require a PRIMARY KEY. Please define the PRIMARY KEY.", name)
        properties = _default_wrapping(properties, columns, value_format, self._config)
        _check_formats(columns, key_format, value_format, properties)
        timestamp = _timestamp_column(properties, columns)
        partitions, topics_to_create = self._ensure_topic(topic, properties)
        if existing is not None and statement.or_replace:
            _check_replacement(existing, columns)
        source = DataSource(
            name=name, kind=kind, columns=tuple(columns), topic=topic, key_format=key_format,
            value_format=value_format, partitions=partitions, statement=statement.text,
            is_source=statement.is_source, window=window, timestamp_column=timestamp,
            properties=_pass_through(properties))
        return Write(statement, cmd.CreateSourceCommand(source, replace=existing is not None),
                     topics_to_create)

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
                      create_with: int | None = None) -> tuple[int | None, tuple[TopicSpec, ...]]:
        """The topic's partitions, and the topic to create: PARTITIONS, else ``create_with``."""
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
        return partitions, (TopicSpec(topic, partitions, replicas),)

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
        if existing is not None and not statement.or_replace:
            if statement.if_not_exists:
                return Skip(statement, _exists_warning(kind, name))
            raise SourceExistsError(f"Cannot add {kind.label} '{name}': A {existing.kind.label} "
                                    "with the same name already exists", name)
        if existing is not None and (existing.kind is not kind or existing.is_source):
            raise SourceExistsError(f"Cannot add {kind.label} '{name}': A {existing.kind.label} "
                                    "with the same name already exists", name)
        _check_known(statement.properties, AS_SELECT_PROPERTIES)
        analysis = analyse(statement.query, self._delta.sources, self._delta.types, name)
        if analysis.kind is not kind:
            other = analysis.kind.value
            raise QueryError(f"Invalid result type. Your SELECT query produces a {other}. Please "
                             f"use CREATE {other} AS SELECT statement instead.", name)
        if name in analysis.sources:
            raise QueryError(f"Cannot create {kind.label} '{name}' from itself.", name)
        first = self._delta.sources[analysis.sources[0]]
        key_format, value_format = _formats(statement.properties,
                                            defaults=(first.key_format, first.value_format))
        if key_format == "NONE" and analysis.key_columns:  # ksqlDB: the default key format
            key_format = self._config.default_key_format
        _check_delimiters(statement.properties, key_format, value_format)
        _check_wrapping(statement.properties, value_format)
        columns = list(analysis.columns)
        if kind is st.SourceKind.TABLE and not analysis.key_columns:
            raise SchemaError("Tables require a PRIMARY KEY. Please define the PRIMARY KEY.", name)
        properties = _default_wrapping(statement.properties, columns, value_format, self._config)
        _check_formats(columns, key_format, value_format, properties)
        topic = str(properties.get("KAFKA_TOPIC", name))
        topics.check_writable(topic)
        partitions, created = self._ensure_topic(topic, properties,
                                                 create_with=first.partitions or 1)
        if existing is not None:
            _check_replacement(existing, columns)
        source = DataSource(
            name=name, kind=kind, columns=tuple(columns), topic=topic, key_format=key_format,
            value_format=value_format, partitions=partitions, statement=statement.text,
            window=analysis.window, timestamp_column=_timestamp_column(properties, columns),
            properties=_pass_through({**_inherited_delimiters(properties, first),
                                      **properties}))
        if self._runtime_check is not None:
            self._runtime_check(analysis, source)
        query_kind = "CSAS" if kind is st.SourceKind.STREAM else "CTAS"
        return Write(statement, cmd.CreateAsSelectCommand(
            source, query_kind, analysis.sources, statement.query.text,
            replace=existing is not None, config=self._config.query_config()), created)

    def _insert_into(self, statement: st.InsertInto) -> Outcome:
        target = self._delta.sources.get(statement.target)
        if target is None:
            raise SourceNotFoundError(f"{statement.target} does not exist.", statement.target)
        if target.kind is st.SourceKind.TABLE:
            raise QueryError(f"INSERT INTO can only be used to insert into a stream. "
                             f"{target.name} is a table.", target.name)
        if target.is_source:
            raise QueryError(f"Cannot insert into read-only stream: {target.name}", target.name)
        topics.check_writable(target.topic)
        analysis = analyse(statement.query, self._delta.sources, self._delta.types, target.name)
        if analysis.kind is not st.SourceKind.STREAM:
            raise QueryError("INSERT INTO can only be used with a query that produces a stream.")
        result = [(c.name, c.type, c.is_key) for c in analysis.columns]
        sink = [(c.name, c.type, c.is_key) for c in target.columns if c.role in (
            st.ColumnRole.KEY, st.ColumnRole.VALUE)]
        if result != sink:
            raise QueryError(
                "Incompatible schema between results and sink.\n"
                f"Result schema is {_schema_text(analysis.columns)}\n"
                f"Sink schema is {_schema_text(target.columns)}", target.name)
        if self._runtime_check is not None:
            self._runtime_check(analysis, target)
        return Write(statement, cmd.InsertQueryCommand(target.name, analysis.sources,
                                                       statement.query.text,
                                                       config=self._config.query_config()))

    def _insert_values(self, statement: st.InsertValues) -> None:
        target = self._delta.sources.get(statement.target)
        if target is None:
            raise SourceNotFoundError(f"Cannot insert values into an unknown stream/table: "
                                      f"{statement.target}", statement.target)
        topics.check_writable(target.topic)
        names = statement.columns or tuple(c.name for c in target.columns
                                           if c.role in (st.ColumnRole.KEY, st.ColumnRole.VALUE,
                                                         st.ColumnRole.PRIMARY_KEY))
        if len(names) != len(statement.values):
            raise QueryError(f"Expected a value for each column. Expected Columns: {list(names)}. "
                             f"Got {[v.sql() for v in statement.values]}")
        for column_name in names:
            if target.column(column_name) is None and column_name not in ("ROWTIME",):
                raise QueryError(f"Column name {column_name} does not exist.")

    # -- DROP / TERMINATE / ALTER --------------------------------------------------------------
    def _drop_source(self, statement: st.DropSource) -> Outcome:
        name = statement.name
        source = self._delta.sources.get(name)
        if source is None:
            if statement.if_exists:
                return Skip(statement, f"Source `{name}` does not exist.")
            raise SourceNotFoundError(f"{statement.kind.label.capitalize()} {name} does not exist.",
                                      name)
        if source.kind is not statement.kind:
            raise IncompatibleSourceKindError(
                f"Incompatible data source type is {source.kind.label}, but statement was "
                f"DROP {statement.kind.value}", name)
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

    def _alter(self, statement: st.AlterSource) -> Outcome:
        name = statement.name
        source = self._delta.sources.get(name)
        if source is None:
            raise SourceNotFoundError(f"Source {name} does not exist.", name)
        if source.kind is not statement.kind:
            raise IncompatibleSourceKindError(
                f"Incompatible data source type is {source.kind.value}, but statement was "
                f"ALTER {statement.kind.value}", name)
        if source.is_source:
            raise UnsupportedStatementError(
                f"Cannot alter {source.kind.label} '{name}': ALTER operations are not supported "
                f"on source {source.kind.label}s.", name)
        if source.query_id is not None:
            raise UnsupportedStatementError(
                "ALTER command is not supported for CREATE ... AS statements.", name)
        added = self._resolve_columns(statement.columns)
        for column in added:
            if source.column(column.name) is not None:
                raise SchemaError(f"Cannot add column `{column.name}` to schema. A column with "
                                  "the same name already exists.", name)
        _check_formats([*source.columns, *added], source.key_format, source.value_format, {})
        return Write(statement, cmd.AlterSourceCommand(source.kind, name, tuple(added),
                                                       statement.text))

    # -- TYPES -------------------------------------------------------------------------------
    def _create_type(self, statement: st.CreateType) -> Outcome:
        existing = self._delta.types.get(statement.name)
        if existing is not None:
            message = (f"Cannot register custom type '{statement.name}' since it is already "
                       f"registered with type: {existing.sql()}")
            if statement.if_not_exists:
                return Skip(statement, f"{statement.name} is already registered with type "
                                       f"{existing.sql()}")
            raise TypeExistsError(message, statement.name)
        missing = ty.unresolved(statement.type, dict(self._delta.types))
        if missing is not None:
            raise TypeNotFoundError(f"Type '{missing}' does not exist.", missing)
        resolved = ty.resolve(statement.type, dict(self._delta.types))
        _check_type_depth(resolved, statement.name)
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


def _schema_text(columns: tuple[Column, ...]) -> str:
    return ", ".join(f"`{c.name}` {ty.backticked(c.type)}"
                     + (" KEY" if c.is_key else "") for c in columns)


def _check_known(properties: Mapping[str, st.PropertyValue], allowed: frozenset[str]) -> None:
    unknown = sorted(set(properties) - allowed)
    if unknown:
        raise PropertyError(f"Invalid config variable(s) in the WITH clause: {','.join(unknown)}")


def _formats(properties: Mapping[str, st.PropertyValue], defaults: tuple[str, str] | None,
             config: ConfigOverrides = NO_OVERRIDES) -> tuple[str, str]:
    """The key and value formats: the statement's, else ``defaults`` (a query's source's), else
    (a CREATE) the configured default formats, as ksqlDB's DefaultFormatInjector."""
    if "FORMAT" in properties:
        for specific in ("KEY_FORMAT", "VALUE_FORMAT"):
            if specific in properties:
                raise PropertyError(
                    f"Cannot supply both '{specific}' and 'FORMAT' properties, as 'FORMAT' sets "
                    "both key and value formats. Either use just 'FORMAT', or use 'KEY_FORMAT' "
                    "and 'VALUE_FORMAT'.")
        both = str(properties["FORMAT"]).upper()
        key, value = both, both
    else:
        key = str(properties.get("KEY_FORMAT", defaults[0] if defaults
                                 else config.default_key_format)).upper()
        if "VALUE_FORMAT" in properties:
            value = str(properties["VALUE_FORMAT"]).upper()
        elif defaults is not None:
            value = defaults[1]
        elif config.default_value_format is not None:
            value = config.default_value_format
        else:
            raise PropertyError(
                "Statement is missing the 'VALUE_FORMAT' property from the WITH clause. Either "
                "provide one or set a default via the 'ksql.persistence.default.format.value' "
                "config.")
    for name in (key, value):
        if formats.lookup(name) is None:
            raise FormatError(f"Unknown format: {name}")
    return key, value


def _check_schema_ids(statement: st.CreateSource, key_format: str, value_format: str) -> None:
    for side, fmt in (("KEY", key_format), ("VALUE", value_format)):
        prop = f"{side}_SCHEMA_ID"
        if prop not in statement.properties:
            continue
        found = formats.lookup(fmt)
        if found is None or not found.infers_schema:
            raise PropertyError(f"{side}_FORMAT should support schema inference when {prop} is "
                                f"provided. Current format is {fmt}.")
        has_columns = any(c.role.is_key == (side == "KEY") for c in statement.columns)
        if has_columns:
            raise SchemaError(f"Table elements and {prop} cannot both exist for create statement.")


def _check_column_roles(kind: st.SourceKind, columns: tuple[st.ColumnDef, ...]) -> None:
    seen: set[str] = set()
    headers = 0
    for column in columns:
        if column.name in seen:
            raise SchemaError(f"Failed to prepare statement: Duplicate column names: `{column.name}`",
                              column.name)
        seen.add(column.name)
        if kind is st.SourceKind.STREAM and column.role is st.ColumnRole.PRIMARY_KEY:
            raise SchemaError(
                f"Column `{column.name}` is a 'PRIMARY KEY' column: please use 'KEY' for streams."
                "\nTables have PRIMARY KEYs, which are unique and NON NULL.\nStreams have KEYs, "
                "which have no uniqueness or NON NULL constraints.", column.name)
        if kind is st.SourceKind.TABLE and column.role is st.ColumnRole.KEY:
            raise SchemaError(
                f"Column `{column.name}` is a 'KEY' column: please use 'PRIMARY KEY' for tables."
                "\nTables have PRIMARY KEYs, which are unique and NON NULL.\nStreams have KEYs, "
                "which have no uniqueness or NON NULL constraints.", column.name)
        if column.role is st.ColumnRole.HEADERS:
            headers += 1
            if headers > 1:
                raise SchemaError("Schema already contains a HEADERS column.", column.name)
            if column.type != ty.HEADERS_TYPE:
                raise SchemaError(
                    f"Invalid type for HEADERS column: expected {ty.HEADERS_TYPE.sql()}, got "
                    f"{column.type.sql()}", column.name)
        if column.role is st.ColumnRole.HEADER and column.type != ty.BYTES:
            raise SchemaError(f"Invalid type for HEADER('{column.header_key}') column: expected "
                              f"BYTES, got {column.type.sql()}", column.name)
    if headers and any(c.role is st.ColumnRole.HEADER for c in columns):
        raise SchemaError("Schema already contains a HEADERS column.")


def _window_properties(properties: Mapping[str, st.PropertyValue]) -> WindowInfo | None:
    window_type = properties.get("WINDOW_TYPE")
    size = properties.get("WINDOW_SIZE")
    if window_type is None:
        if size is not None:
            raise PropertyError("'WINDOW_SIZE' should not be set without 'WINDOW_TYPE'.")
        return None
    kind = str(window_type).upper()
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
        return WindowInfo(kind, parse_duration_ms(str(size)))
    except DurationError as error:
        raise PropertyError(f"Configuration WINDOW_SIZE is invalid: {error}") from error


def _check_delimiters(properties: Mapping[str, st.PropertyValue], key_format: str,
                      value_format: str) -> None:
    for side, fmt in (("KEY", key_format), ("VALUE", value_format)):
        prop = f"{side}_DELIMITER"
        if prop not in properties:
            continue
        value = str(properties[prop])
        if not value.strip():
            raise PropertyError(
                f"Failed to prepare statement: Configuration {prop} is invalid: Delimiter cannot "
                "be empty, if you meant to have a tab or space for delimiter, please use the "
                "special values 'TAB' or 'SPACE'\nExample valid value: ';'")
        if len(value) != 1 and value.upper() not in ("TAB", "SPACE"):
            raise PropertyError(
                f"Failed to prepare statement: Configuration {prop} is invalid: Invalid delimiter "
                f"value: '{value}'. Delimiter must be a single character or TAB or SPACE\n"
                "Example valid value: ';'")
        if fmt != "DELIMITED":
            raise PropertyError(f"Delimiter only supported with DELIMITED format ({prop} was set "
                                f"with format {fmt})")


def _check_wrapping(properties: Mapping[str, st.PropertyValue], value_format: str) -> None:
    if "WRAP_SINGLE_VALUE" not in properties:
        return
    value = properties["WRAP_SINGLE_VALUE"]
    fmt = formats.lookup(value_format)
    wrapped = value is True or str(value).lower() == "true"
    if fmt is not None and not (fmt.wraps if wrapped else fmt.unwraps):
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        raise FormatError(f"Format '{value_format}' does not support 'WRAP_SINGLE_VALUE' set to "
                          f"'{shown}'.")


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


def _persistence(columns: list[Column], key: bool, wrapped: bool) -> str:
    shown = ", ".join(f"`{c.name}` {ty.backticked(c.type)}" + (" KEY" if key else "")
                      for c in columns)
    features = "[UNWRAP_SINGLES]" if not wrapped and len(columns) == 1 and not key else "[]"
    return f"Persistence{{columns=[{shown}], features={features}}}"


def _check_formats(columns: list[Column], key_format: str, value_format: str,
                   properties: Mapping[str, st.PropertyValue]) -> None:
    key_columns = [c for c in columns if c.is_key]
    value_columns = [c for c in columns if c.role is st.ColumnRole.VALUE]
    for column in key_columns:
        if ty.contains_map(column.type):
            raise SchemaError(
                "Map keys, including types that contain maps, are not supported as they may lead "
                "to unexpected behavior due to inconsistent serialization. Key column name: "
                f"`{column.name}`. Column type: {column.type.sql()}. "
                "See https://github.com/confluentinc/ksql/issues/6621 for more.", column.name)
    key_fmt = formats.lookup(key_format)
    value_fmt = formats.lookup(value_format)
    assert key_fmt is not None and value_fmt is not None
    if key_format == "NONE" and key_columns:
        raise FormatError("The 'NONE' format can only be used when no columns are defined. Got: "
                          f"{[c.name for c in key_columns]}")
    problem = formats.schema_problem(key_fmt, [(c.name, c.type) for c in key_columns], key=True)
    if problem:
        raise FormatError(f"Key format does not support schema.\nformat: {key_format}\nschema: "
                          f"{_persistence(key_columns, True, True)}\nreason: {problem}")
    problem = formats.schema_problem(value_fmt, [(c.name, c.type) for c in value_columns])
    wrapped = properties.get("WRAP_SINGLE_VALUE") is not False
    if problem:
        raise FormatError(f"Value format does not support schema.\nformat: {value_format}\n"
                          f"schema: {_persistence(value_columns, False, wrapped)}\nreason: {problem}")


def _timestamp_column(properties: Mapping[str, st.PropertyValue], columns: list[Column]) -> str | None:
    if "TIMESTAMP" not in properties:
        return None
    name = str(properties["TIMESTAMP"])
    upper = name.upper()
    column = next((c for c in columns if c.name in (name, upper)), None)
    if column is None:
        raise PropertyError(f"The TIMESTAMP column set in the WITH clause does not exist in the "
                            f"schema: '{upper}'")
    allowed = {ty.BIGINT, ty.TIMESTAMP} | ({ty.STRING} if "TIMESTAMP_FORMAT" in properties else set())
    if column.type not in allowed:
        raise PropertyError(f"Timestamp column, `{column.name}`, should be LONG(INT64), TIMESTAMP, "
                            "or a String with a TIMESTAMP_FORMAT specified.")
    return column.name


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
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PropertyError(f"Invalid {name} value: {value}. It must be a positive whole number.")
    return value


def _pass_through(properties: Mapping[str, st.PropertyValue]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((key, str(properties[key]).lower() if isinstance(properties[key], bool)
                         else str(properties[key])) for key in PASS_THROUGH if key in properties))


def _check_replacement(existing: DataSource, columns: list[Column]) -> None:
    old = {(c.name, c.type, c.role) for c in existing.columns}
    new = {(c.name, c.type, c.role) for c in columns}
    old_keys = [c for c in existing.columns if c.is_key]
    new_keys = [c for c in columns if c.is_key]
    if old_keys != new_keys or not old.issubset(new):
        raise SchemaError(
            f"Cannot upgrade data source: {existing.name}: the new schema must keep every "
            f"existing column and the key.\nExisting schema: {existing.schema_text()}", existing.name)

