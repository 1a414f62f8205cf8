"""The parts a query plan is made of: :class:`Step` s (views over Kafka reads or SELECTs), the
per-micro-batch :class:`BatchStage`, the :class:`QueryPlan` a job starts, the names of the hidden
columns the plan's views carry, and how a query reads its sources (:func:`stream_steps`,
:func:`table_select`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from metastore.catalog.model import DataSource
from metastore.functions import library as functions
from metastore.functions.registry import Call
from metastore.planner import observed_reads
from metastore.spark.types import quote
from metastore.spark.views import decode_select
from metastore.sql import types as ty
from metastore.sql.statements import WindowSpec

TS = "__MS_TS"
WINDOW = "__MS_WINDOW"
SOURCE = "__MS_SOURCE"
WINDOW_START = "__MS_WINDOWSTART"
ROWTIME = "__MS_ROWTIME"
NULL_VALUE = "__MS_NULL_VALUE"
HEADERS = "__MS_HEADERS"
HEADERS_TYPE = "ARRAY<STRUCT<key: STRING, value: BINARY>>"
"""The type of a record's headers in a query's views (a table's rows carry none: NULL)."""
NULL_KEY = "__MS_NULL_KEY"
TABLE_FUNCTION = "__MS_TF"
RAW_KEY = "__MS_RAW_KEY"
SENTINEL = "__MS_SENTINEL"
WINDOW_END = "__MS_WINDOWEND"
TOUCHED = "__MS_TOUCHED"
SESSION = "__MS_SESSION"
KAFKA_TIMESTAMP = "__MS_KAFKA_TS"
ORDER = "__MS_ORDER"
"""The time a stream-stream join's records are written in order of."""


@dataclass(frozen=True)
class TableSideJoin:
    """A stream-table join whose table side is keyed state (see
    :mod:`metastore.planner.table_state`): ``stream_view``'s records joined with the changelog
    in ``table_view``, whose ``table_columns`` are the table's; ``left``: a LEFT join."""

    stream_view: str
    table_view: str
    table_columns: tuple[str, ...]
    left: bool


@dataclass(frozen=True)
class TableJoin:
    """A primary-key join of tables whose sides are keyed state (see
    :mod:`metastore.planner.table_state`): one row per key a micro-batch changed, with every
    table's current row; ``table_views`` hold the tables' changelogs, whose ``table_columns``
    are each table's."""

    table_views: tuple[str, ...]
    table_columns: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class ForeignKeyTableJoin:
    """A foreign-key join of two tables whose sides are keyed state (see
    :mod:`metastore.planner.table_state`): one row per left key a micro-batch touched, with the
    left row and the right row its foreign key names; ``left_view`` and ``right_view`` hold the
    tables' changelogs (the left's with its foreign key), whose ``*_columns`` are each table's."""

    left_view: str
    right_view: str
    left_columns: tuple[str, ...]
    right_columns: tuple[str, ...]


@dataclass(frozen=True)
class RowVersions:
    """A table aggregation's input as keyed state (see :mod:`metastore.planner.table_groups`):
    the changes of the rows of the table changelog in ``changelog_view``."""

    changelog_view: str


@dataclass(frozen=True)
class GroupMembers:
    """A table aggregation's groups as keyed state (see :mod:`metastore.planner.table_groups`):
    the rows of each group the changes in ``changes_view`` touched."""

    changes_view: str


@dataclass(frozen=True)
class StreamTime:
    """A SESSION aggregation's stream time as keyed state (see
    :mod:`metastore.planner.session_state`): the records in ``records_view`` with the stream
    time of their partition each met."""

    records_view: str


@dataclass(frozen=True)
class SessionMembers:
    """A SESSION aggregation's sessions as keyed state (see
    :mod:`metastore.planner.session_state`): the records of the sessions the records in
    ``timed_view`` changed, a window of ``gap_ms`` with ``grace_ms`` and ``retention_ms``."""

    timed_view: str
    gap_ms: int
    grace_ms: int
    retention_ms: int


@dataclass(frozen=True)
class FinalSessions:
    """An EMIT FINAL SESSION aggregation's sessions as keyed state (see
    :func:`metastore.planner.session_state.keyed_final_sessions`): the records of the sessions
    the records in ``grouped_view`` close, a window of ``gap_ms`` with ``grace_ms`` and
    ``retention_ms``."""

    grouped_view: str
    gap_ms: int
    grace_ms: int
    retention_ms: int


@dataclass(frozen=True)
class FinalWindows:
    """An EMIT FINAL time-windowed aggregation's open windows as keyed state (see
    :func:`metastore.planner.final_windows.keyed_final`): the records of the windows the
    records in ``windowed_view`` close, with ``grace_ms`` and ``retention_ms``."""

    windowed_view: str
    grace_ms: int
    retention_ms: int


@dataclass(frozen=True)
class UnmatchedRecords:
    """The outer side of a stream-stream join without GRACE PERIOD as keyed state (see
    :mod:`metastore.planner.outer_at_once`): the outer stream's records in ``records_view``
    that no record of the other stream matches within ``lookback_ms`` before them; the other
    stream's times are kept ``retention_ms``. Its view ``<view>_other`` has no rows and the
    columns of the other stream's ``other_view``."""

    records_view: str
    other_view: str
    lookback_ms: int
    retention_ms: int


KeyedOperator = (TableSideJoin | TableJoin | ForeignKeyTableJoin | RowVersions | GroupMembers
                 | StreamTime | SessionMembers | FinalSessions | FinalWindows | UnmatchedRecords)
"""A keyed stateful operator of the project's JVM classes, run by ``transformWithState``."""


Observed = tuple[str, tuple[str, ...]]
"""An observation of a view's rows: its name and its measures (Spark SQL aggregates)."""


@dataclass(frozen=True)
class Step:
    """Register ``view``: a Kafka read of ``topic`` (streaming or batch), a SELECT, or a keyed
    stateful operator."""

    view: str
    sql: str | None = None
    topic: str | None = None
    streaming: bool = True
    watermark_ms: int | None = None
    keyed: KeyedOperator | None = None
    from_start: bool = False
    """A streaming read from the topic's first offset, whatever the query's offset reset."""
    observed: Observed | None = None
    """A name and SQL aggregates the view's rows are observed with, per micro-batch
    (:mod:`metastore.planner.observed_reads`)."""


@dataclass(frozen=True)
class BatchStage:
    """A query that runs once per micro-batch as batch SQL: the rows of the streaming
    ``source_sql`` a micro-batch brings are registered as ``view``, then ``steps`` and the plan's
    ``sql`` run over them and the result is written to the sink."""

    source_sql: str
    view: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class RecordCheck:
    """A condition under which ksqlDB's evaluation of a row throws where Spark's gives NULL: a
    record processing error of the processing log (:mod:`metastore.planner.record_checks`)."""

    logger: str
    """The step of ksqlDB's logger name: ``Project``, ``WhereFilter``, ``Aggregate.GroupBy``."""
    message: str
    condition: str
    """Spark SQL over the checked view's columns."""
    cause: str
    """Spark SQL of the exception's message, a STRING."""
    record: str | None = None
    """Spark SQL of the record its entries print, where it is not the checked row's (see
    :attr:`CheckedRows.record`): a PARTITION BY's over key columns only, ksqlDB's over the key
    alone, prints the key's values."""


@dataclass(frozen=True)
class CheckedRows:
    """The checks of a query's stream rows (each micro-batch counts the rows that fail one, by
    an observation of ``view``); ``reads``: the steps that make ``view`` from a read of
    ``topic``, which the processing log runs again over a micro-batch's offsets to log each
    failing row; ``record``: Spark SQL of the row as ksqlDB's log prints it."""

    view: str
    reads: tuple[str, ...]
    topic: str
    record: str
    checks: tuple[RecordCheck, ...]
    carried: int = 0
    """When ``view`` is a join's (which the processing log cannot make again from one topic's
    offsets), the most failing rows per check the observation carries itself, each its record
    and cause; 0: the processing log reads the micro-batch's offsets again."""


@dataclass(frozen=True)
class QueryPlan:
    query_id: str
    steps: tuple[Step, ...]
    sql: str
    output_mode: str
    topic: str
    source_topics: tuple[str, ...]
    batch: BatchStage | None = None
    earliest: bool = True
    """Whether a first start reads its sources from their first offsets (else their next)."""
    table_state: bool = False
    """Whether it keeps tables as keyed state (:mod:`metastore.planner.table_state`,
    :mod:`metastore.planner.table_groups`)."""
    stream_state: bool = False
    """Whether it keeps SESSION or EMIT FINAL windows, or an outer stream-stream join's
    unmatched records, as keyed state (:mod:`metastore.planner.session_state`,
    :func:`metastore.planner.final_windows.keyed_final`,
    :func:`metastore.planner.outer_at_once.keyed_unmatched`)."""
    window_key_bytes: int = 0
    """The bytes of the window its sink's keys end with (8, the start, for TUMBLING and
    HOPPING; 16, end and start, for SESSION; 0 unwindowed): its records go to the partition of
    the key without them, as Kafka Streams partitions a windowed sink."""
    checked: CheckedRows | None = None
    """Its stream rows' checks, when ksqlDB would log their failures (QueryPlan v2)."""
    aggregated: CheckedRows | None = None
    """An aggregation's checks of its aggregated rows, its HAVING's and its SELECT's outside its
    aggregate calls' arguments (QueryPlan v3)."""
    functions: tuple[str, ...] = ()
    """The project's Spark SQL functions its SQL calls (:data:`~metastore.jvm.classes.
    SQL_FUNCTIONS`, sorted; QueryPlan v4): a node of a release without them refuses the plan
    rather than failing the query in Spark."""


def streaming_topics(plan: QueryPlan) -> list[str]:
    """The topics ``plan`` reads as streams (its batch stage's too), in the order Spark numbers
    its sources."""
    steps = plan.steps + (plan.batch.steps if plan.batch is not None else ())
    return [step.topic for step in steps if step.topic is not None and step.streaming]


def stream_steps(source: DataSource, view: str, window: WindowSpec | None,
                 watermark_ms: int | None = None, from_start: bool = False,
                 fail_on_error: bool = False) -> list[Step]:
    """A stream's streaming read, decoded, with its pseudo columns and event time ``TS``;
    watermarked by ``window``'s grace, or by ``watermark_ms`` (a stream-stream join's). The
    records it cannot read are counted and dropped (with ``fail_on_error``, the query fails on
    one: :mod:`metastore.planner.observed_reads`)."""
    pseudo = ("partition AS ROWPARTITION", "offset AS ROWOFFSET",
              f"concat_ws('/', topic, CAST(partition AS STRING), CAST(offset AS STRING)) AS {SOURCE}",
              f"timestamp AS {KAFKA_TIMESTAMP}", f"value IS NULL AS {NULL_VALUE}",
              f"key IS NULL AS {NULL_KEY}", f"key AS {RAW_KEY}",
              f"headers AS {HEADERS}", *([WINDOW] if source.window is not None else []))
    read = f"{view}_read"
    decoded = observed_reads.kept(read, fail_on_error)
    event_time = KAFKA_TIMESTAMP
    column = source.column(source.timestamp_column) if source.timestamp_column else None
    if column is not None and column.type == ty.STRING:
        event_time = formatted_time(source, column.name, "PARSE_TIMESTAMP")
    elif column is not None:
        event_time = (f"timestamp_millis({quote(column.name)})" if column.type == ty.BIGINT
                      else quote(column.name))
    extracted = event_time  # before a join moves it
    grace = window.grace_ms if window is not None and window.grace_ms is not None \
        else watermark_ms
    rowtime = f"unix_millis({TS})"
    if window is None and watermark_ms is not None:
        # Spark's stream-stream join drops a row at or before the watermark, which starts at
        # the epoch: a record of time 0 would never join. A joined stream's event time runs a
        # millisecond ahead (both sides alike, so the join's time range is unchanged).
        event_time = f"{event_time} + INTERVAL '1' MILLISECOND"
        rowtime = f"{rowtime} - 1"
    bounds, hopping = window_columns(window)
    timed = f"SELECT *, {event_time} AS {TS} FROM ({decoded})"
    if column is not None:  # Kafka Streams skips a record whose timestamp extractor fails or
        # gives a negative time: a NULL column, text the TIMESTAMP_FORMAT does not parse, a
        # time before the epoch (a tombstone has no column and passes)
        timed = (f"SELECT * FROM (SELECT *, {extracted} AS __MS_EXTRACTED FROM ({decoded})) "
                 f"WHERE {NULL_VALUE} OR unix_millis(__MS_EXTRACTED) >= 0")
        timed = f"SELECT * EXCEPT (__MS_EXTRACTED), {event_time} AS {TS} FROM ({timed})"
    observed = (observed_reads.observation(source.name, source.topic, view),
                observed_reads.observed_metrics("ROWPARTITION", "ROWOFFSET"))
    steps = [Step(f"{view}_raw", topic=source.topic, from_start=from_start),
             Step(read, decode_select(source, quote(f"{view}_raw"), extra=pseudo,
                                      readable_as=observed_reads.READABLE), observed=observed),
             Step(f"{view}_decoded", timed, watermark_ms=grace)]
    if hopping:  # a record is a row per window it falls into: its rows, once, are checked here
        return [*steps, Step(f"{view}_timed", f"SELECT *, {rowtime} AS ROWTIME FROM "
                                              f"{quote(view + '_decoded')}"),
                Step(view, f"SELECT * FROM (SELECT *{bounds} FROM "
                           f"{quote(view + '_timed')}){hopping}")]
    return [*steps, Step(view, f"SELECT * FROM (SELECT *, {rowtime} AS ROWTIME{bounds} FROM "
                               f"{quote(view + '_decoded')}){hopping}")]


def formatted_time(source: DataSource, column: str, parse: str) -> str:
    """The time in ``source``'s STRING TIMESTAMP column ``column``, parsed with its
    TIMESTAMP_FORMAT by ksqlDB's function ``parse`` (PARSE_TIMESTAMP for a TIMESTAMP,
    STRINGTOTIMESTAMP for epoch milliseconds), as the function registry translates it: NULL
    where the text does not match."""
    pattern = source.property("TIMESTAMP_FORMAT")
    spec = functions.lookup(parse)
    assert pattern is not None and spec is not None and spec.spark is not None, \
        "validation gives a STRING TIMESTAMP column a TIMESTAMP_FORMAT"
    returns = ty.TIMESTAMP if parse == "PARSE_TIMESTAMP" else ty.BIGINT
    call = Call(parse, (exp.column(column, quoted=True), exp.Literal.string(pattern)),
                (ty.STRING, ty.STRING), returns)
    return spec.spark(call).sql(dialect="spark", identify=True)


def window_columns(window: WindowSpec | None) -> tuple[str, str]:
    """What gives a record of event time ``__MS_TS`` the time window it falls into: the SELECT
    item (``, window(...) AS __MS_WINDOW``) and the filter of the records it selects (Kafka
    Streams' hopping windows start at the epoch or later); none for no window or a SESSION."""
    if window is None or window.size_ms is None:
        return "", ""
    hopping = f" WHERE unix_millis({WINDOW}.start) >= 0" if window.advance_ms else ""
    return f", {window_call(window, TS)} AS {WINDOW}", hopping


def window_call(window: WindowSpec, time_sql: str) -> str:
    """Spark's ``window()`` of the time window ``window`` (TUMBLING or HOPPING) that the time
    ``time_sql`` falls into (a HOPPING window's record falls into several)."""
    size = f"'{window.size_ms} milliseconds'"
    slide = f", '{window.advance_ms} milliseconds'" if window.advance_ms else ""
    return f"window({time_sql}, {size}{slide})"


VALID_FROM = "__MS_VALID_FROM"
VALID_UNTIL = "__MS_VALID_UNTIL"


def table_versions_select(source: DataSource, raw_table: str) -> str:
    """Every version of a table's rows, from a batch read of its topic: each row with the time
    it took effect (``__MS_VALID_FROM``, its ROWTIME) and the time the next version of its key
    replaced or deleted it (``__MS_VALID_UNTIL``, NULL for the current one), in offset order;
    deletions end a version and are not versions themselves."""
    pseudo = ("partition AS ROWPARTITION", "offset AS ROWOFFSET",
              "unix_millis(timestamp) AS ROWTIME", "value IS NULL AS __MS_TOMBSTONE",
              "key AS __MS_RAW_KEY")
    names = ", ".join(quote(c.name) for c in source.columns)
    return (f"SELECT {names}, ROWTIME, ROWPARTITION, ROWOFFSET, ROWTIME AS {VALID_FROM}, "
            f"{VALID_UNTIL} FROM (SELECT *, lead(ROWTIME) OVER (PARTITION BY __MS_RAW_KEY ORDER "
            f"BY ROWPARTITION, ROWOFFSET) AS {VALID_UNTIL} FROM "
            f"({decode_select(source, raw_table, extra=pseudo)}) WHERE __MS_RAW_KEY IS NOT NULL) "
            "WHERE NOT __MS_TOMBSTONE")


def table_select(source: DataSource, raw_table: str) -> str:
    """A table's latest row per key (tombstones removed) with its pseudo columns, from a batch
    read of its topic."""
    pseudo = ("partition AS ROWPARTITION", "offset AS ROWOFFSET",
              "unix_millis(timestamp) AS ROWTIME", "value IS NULL AS __MS_TOMBSTONE",
              "key AS __MS_RAW_KEY")
    names = ", ".join(quote(c.name) for c in source.columns)
    return (f"SELECT {names}, ROWTIME, ROWPARTITION, ROWOFFSET FROM (SELECT *, row_number() OVER "
            "(PARTITION BY __MS_RAW_KEY ORDER BY ROWPARTITION DESC, ROWOFFSET DESC) AS __latest "
            f"FROM ({decode_select(source, raw_table, extra=pseudo)})) "
            "WHERE __latest = 1 AND NOT __MS_TOMBSTONE")
