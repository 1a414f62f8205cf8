"""Parsed statements: one immutable dataclass per kind of ksqlDB statement.

Names are already normalised (unquoted upper-cased, quoted kept as written). Every statement keeps
its source text and where it starts, for error messages and for the command record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from sqlglot import exp

from metastore.sql.types import SqlType

PropertyValue = str | int | float | bool


class SourceKind(StrEnum):
    STREAM = "STREAM"
    TABLE = "TABLE"

    @property
    def label(self) -> str:
        return self.value.lower()


class ColumnRole(StrEnum):
    VALUE = "VALUE"
    KEY = "KEY"
    PRIMARY_KEY = "PRIMARY KEY"
    HEADERS = "HEADERS"
    HEADER = "HEADER"

    @property
    def is_key(self) -> bool:
        return self in (ColumnRole.KEY, ColumnRole.PRIMARY_KEY)


@dataclass(frozen=True)
class Location:
    line: int
    column: int


@dataclass(frozen=True)
class ColumnDef:
    name: str
    type: SqlType
    role: ColumnRole = ColumnRole.VALUE
    header_key: str | None = None
    location: Location | None = field(default=None, compare=False)
    """Where the definition starts in the script (ksqlDB reports some errors there)."""


@dataclass(frozen=True)
class Statement:
    text: str
    location: Location

    @property
    def writes_log(self) -> bool:
        return True

    @property
    def has_entity(self) -> bool:
        """Whether ksqlDB answers the statement with an entity (SET, UNSET, DEFINE and UNDEFINE
        of a defined variable are answered with none: ksqlDB's handled-without-entity)."""
        return True


@dataclass(frozen=True)
class WindowSpec:
    """A ksqlDB WINDOW clause: TUMBLING / HOPPING / SESSION with durations in milliseconds."""

    kind: str
    size_ms: int | None = None
    advance_ms: int | None = None
    gap_ms: int | None = None
    retention_ms: int | None = None
    grace_ms: int | None = None


@dataclass(frozen=True)
class JoinWindow:
    """A stream-stream join's WITHIN: it joins the other side's records from ``before_ms``
    before to ``after_ms`` after a record; ``grace_ms`` its GRACE PERIOD (None: not given)."""

    join: int
    """The JOIN it belongs to: its index among the query's joins, in the order written."""
    before_ms: int
    after_ms: int
    grace_ms: int | None = None


@dataclass(frozen=True)
class Query:
    """A ksqlDB SELECT: the sqlglot tree plus the clauses sqlglot has no place for."""

    select: exp.Expr
    window: WindowSpec | None = None
    partition_by: tuple[exp.Expr, ...] = ()
    emit_changes: bool = False
    emit_final: bool = False
    within_ms: int | None = None
    join_windows: tuple[JoinWindow, ...] = ()
    """The WITHIN of each stream-stream join, in the order written."""
    text: str = ""

    @property
    def read_tables(self) -> list[exp.Table]:
        """The sources its FROM and JOINs name, in order (a sub-query is none)."""
        select = self.select
        from_ = select.args.get("from_") or select.args.get("from")
        tables = [from_.this if from_ is not None else None,
                  *(join.this for join in select.args.get("joins") or [])]
        return [table for table in tables if isinstance(table, exp.Table)]


@dataclass(frozen=True)
class CreateSource(Statement):
    kind: SourceKind
    name: str
    columns: tuple[ColumnDef, ...]
    properties: dict[str, PropertyValue] = field(hash=False)
    or_replace: bool = False
    if_not_exists: bool = False
    is_source: bool = False


@dataclass(frozen=True)
class CreateAsSelect(Statement):
    kind: SourceKind
    name: str
    query: Query
    properties: dict[str, PropertyValue] = field(hash=False)
    or_replace: bool = False
    if_not_exists: bool = False


@dataclass(frozen=True)
class InsertInto(Statement):
    target: str
    query: Query
    properties: dict[str, PropertyValue] = field(hash=False, default_factory=dict)


@dataclass(frozen=True)
class InsertValues(Statement):
    """INSERT INTO ... VALUES: data, not metadata; its record goes to the source's topic, never
    to the log. ksqlDB answers it with no entity (its executor handles it without one)."""

    target: str
    columns: tuple[str, ...]
    values: tuple[exp.Expr, ...]

    @property
    def writes_log(self) -> bool:
        return False

    @property
    def has_entity(self) -> bool:
        return False


@dataclass(frozen=True)
class DropSource(Statement):
    kind: SourceKind
    name: str
    if_exists: bool = False
    delete_topic: bool = False


@dataclass(frozen=True)
class Terminate(Statement):
    query_id: str | None  # None means ALL


@dataclass(frozen=True)
class PrintTopic(Statement):
    """PRINT a topic's records (answered by /query, never written to the log)."""

    topic: str
    from_beginning: bool = False
    interval: int | None = None
    limit: int | None = None

    @property
    def writes_log(self) -> bool:
        return False


@dataclass(frozen=True)
class Explain(Statement):
    """EXPLAIN of a running query (``query_id``) or of a statement that runs one (``explained``:
    a SELECT, CREATE ... AS SELECT or INSERT INTO ... SELECT, checked but never run)."""

    query_id: str | None
    explained: Statement | None

    @property
    def writes_log(self) -> bool:
        return False


@dataclass(frozen=True)
class PauseResume(Statement):
    """PAUSE or RESUME of a persistent query (or ALL of them)."""

    query_id: str | None  # None means ALL
    pause: bool


@dataclass(frozen=True)
class AlterSource(Statement):
    kind: SourceKind
    name: str
    columns: tuple[ColumnDef, ...]


@dataclass(frozen=True)
class CreateType(Statement):
    name: str
    type: SqlType
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropType(Statement):
    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class ListObjects(Statement):
    """SHOW / LIST STREAMS | TABLES | QUERIES | [ALL] TOPICS | TYPES | PROPERTIES | FUNCTIONS
    [EXTENDED]; ``show_all``: SHOW ALL TOPICS (internal topics too)."""

    what: str
    extended: bool = False
    show_all: bool = False

    @property
    def writes_log(self) -> bool:
        return False


@dataclass(frozen=True)
class Describe(Statement):
    name: str
    extended: bool = False

    @property
    def writes_log(self) -> bool:
        return False


@dataclass(frozen=True)
class SelectStatement(Statement):
    """A transient query; answered by /query, never written to the log."""

    query: Query

    @property
    def writes_log(self) -> bool:
        return False


@dataclass(frozen=True)
class SetProperty(Statement):
    """SET / UNSET 'name' [= 'value']: a session property, never written to the log."""

    name: str
    value: str | None

    @property
    def writes_log(self) -> bool:
        return False

    @property
    def has_entity(self) -> bool:
        return False


@dataclass(frozen=True)
class DescribeFunction(Statement):
    """DESCRIBE FUNCTION name (ksqlDB's DescribeFunction): the registry's declaration."""

    name: str

    @property
    def writes_log(self) -> bool:
        return False


# -- connectors (ksqlDB's CreateConnector, DropConnector, ListConnectors, DescribeConnector,
# ListConnectorPlugins): executed against Kafka Connect, never written to the log ---------------
class ConnectorKind(StrEnum):
    SOURCE = "SOURCE"
    SINK = "SINK"


@dataclass(frozen=True)
class ConnectorStatement(Statement):
    """A statement Kafka Connect answers; its ``text`` is masked where it holds a config
    (every value but ``connector.class``, as ksqlDB's QueryMask), so that no answer, error or
    log line shows a connector's credentials."""

    @property
    def writes_log(self) -> bool:
        return False


@dataclass(frozen=True)
class CreateConnector(ConnectorStatement):
    """CREATE SOURCE|SINK CONNECTOR [IF NOT EXISTS] name WITH (...): ``config`` holds the
    properties as the Connect strings ksqlDB makes of them, and ``name``."""

    kind: ConnectorKind
    name: str
    config: dict[str, str] = field(hash=False, repr=False)
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropConnector(ConnectorStatement):
    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class DescribeConnector(ConnectorStatement):
    name: str


@dataclass(frozen=True)
class ListConnectors(ConnectorStatement):
    """SHOW | LIST [SOURCE | SINK] CONNECTORS; ``kind`` None: both."""

    kind: ConnectorKind | None = None


@dataclass(frozen=True)
class ListConnectorPlugins(ConnectorStatement):
    """SHOW | LIST CONNECTOR PLUGINS."""


# -- session variables (ksqlDB's DefineVariable, UndefineVariable, ListVariables) ----------------
@dataclass(frozen=True)
class DefineVariable(Statement):
    """DEFINE name = 'value': a variable of the request, substituted as ``${name}`` in the
    statements after it (:mod:`metastore.sql.variables`); never written to the log."""

    name: str
    value: str

    @property
    def writes_log(self) -> bool:
        return False

    @property
    def has_entity(self) -> bool:
        return False


@dataclass(frozen=True)
class UndefineVariable(Statement):
    """UNDEFINE name; ``defined``: whether the variable was defined at that point of the request
    (filled in by :func:`metastore.sql.variables.parse_request`; ksqlDB warns when it was not)."""

    name: str
    defined: bool = True

    @property
    def writes_log(self) -> bool:
        return False

    @property
    def has_entity(self) -> bool:
        return not self.defined


@dataclass(frozen=True)
class ListVariables(Statement):
    """SHOW | LIST VARIABLES; ``variables``: (name, value) of those defined at that point of the
    request, in ksqlDB's order (case-insensitive), filled in by
    :func:`metastore.sql.variables.parse_request`."""

    variables: tuple[tuple[str, str], ...] = ()

    @property
    def writes_log(self) -> bool:
        return False


# -- ASSERT statements: checks that read the catalog (or Kafka) and never write the log ------------
@dataclass(frozen=True)
class AssertSource(Statement):
    """ASSERT STREAM | TABLE name (columns) WITH (...): the source is as declared, kind, schema,
    topic, formats, timestamp (ksqlDB's sql-test statement, its AssertExecutor)."""

    kind: SourceKind
    name: str
    columns: tuple[ColumnDef, ...]
    properties: dict[str, PropertyValue] = field(hash=False)

    @property
    def writes_log(self) -> bool:
        return False


@dataclass(frozen=True)
class AssertValues(Statement):
    """ASSERT VALUES name (columns) VALUES (...), or with ``tombstone`` ASSERT NULL VALUES name
    (key columns) KEY (...): the next record of the source's topic (ksqlDB's sql-test
    statements; they compare records, which the catalog does not hold)."""

    target: str
    columns: tuple[str, ...]
    values: tuple[exp.Expr, ...]
    tombstone: bool = False

    @property
    def writes_log(self) -> bool:
        return False


@dataclass(frozen=True)
class AssertTopic(Statement):
    """ASSERT [NOT EXISTS] TOPIC name [WITH (PARTITIONS=n, REPLICAS=m)] [TIMEOUT n unit]."""

    topic: str
    exists: bool = True
    properties: dict[str, PropertyValue] = field(hash=False, default_factory=dict)
    timeout_ms: int | None = None

    @property
    def writes_log(self) -> bool:
        return False


@dataclass(frozen=True)
class AssertSchema(Statement):
    """ASSERT [NOT EXISTS] SCHEMA [SUBJECT name] [ID n] [TIMEOUT n unit] (a Schema Registry's)."""

    subject: str | None
    schema_id: int | None
    exists: bool = True
    timeout_ms: int | None = None

    @property
    def writes_log(self) -> bool:
        return False
