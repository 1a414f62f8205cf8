"""What the catalog holds: sources (streams and tables), custom types and persistent queries."""

from __future__ import annotations

from dataclasses import dataclass

from metastore.sql.statements import ColumnRole, SourceKind
from metastore.sql.types import SqlType


@dataclass(frozen=True)
class Column:
    name: str
    type: SqlType
    role: ColumnRole = ColumnRole.VALUE
    header_key: str | None = None

    @property
    def is_key(self) -> bool:
        return self.role.is_key

    def describe(self) -> str:
        """The column as ksqlDB prints it in a schema: ``K INTEGER KEY``."""
        text = f"{self.name} {self.type.sql()}"
        if self.role is ColumnRole.HEADER:
            return f"{text} HEADER('{self.header_key}')"
        if self.role is not ColumnRole.VALUE:
            return f"{text} {self.role.value}"
        return text


@dataclass(frozen=True)
class WindowInfo:
    """The windowing of a windowed table's key (WINDOW_TYPE / WINDOW_SIZE, or a windowed query)."""

    kind: str
    size_ms: int | None = None


@dataclass(frozen=True)
class DataSource:
    name: str
    kind: SourceKind
    columns: tuple[Column, ...]
    topic: str
    key_format: str
    value_format: str
    partitions: int | None
    statement: str
    is_source: bool = False
    window: WindowInfo | None = None
    timestamp_column: str | None = None
    properties: tuple[tuple[str, str], ...] = ()
    query_id: str | None = None

    @property
    def key_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.is_key)

    @property
    def value_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.role is ColumnRole.VALUE)

    def column(self, name: str) -> Column | None:
        for column in self.columns:
            if column.name == name:
                return column
        return None

    def property(self, name: str) -> str | None:
        for key, value in self.properties:
            if key == name:
                return value
        return None

    def schema_text(self) -> str:
        """The schema as the catalog's JSON shows it, unquoted (``K INTEGER KEY, V STRING``);
        ksqlDB's messages quote theirs (:func:`metastore.engine.upgrades.schema_text`)."""
        return ", ".join(column.describe() for column in self.columns)


@dataclass(frozen=True)
class PersistentQuery:
    query_id: str
    kind: str  # CSAS, CTAS or INSERT
    sink: str
    sources: tuple[str, ...]
    sql: str
    offset: int
    config: tuple[tuple[str, str], ...] = ()
    """The ksqlDB settings the query runs with (``ksql.functions.collect_list.limit``), sorted."""
    paused: bool = False
    """PAUSEd: not running, its checkpoint kept, until RESUMEd."""
    plan: str = ""
    """Its plan, fixed when its command was written (:mod:`metastore.planner.plan_format`): what
    every node runs; '' for a query written before plans were kept, which runs what its SQL
    compiles to."""


@dataclass(frozen=True)
class RequestOutcome:
    """What one request wrote: the offsets and command ids of its records, in order."""

    offsets: tuple[int, ...]
    command_ids: tuple[str, ...]
    digest: str = ""
    """The request's digest ('' for records written before requests carried one)."""
