"""The decisions that shape a query's Spark job, taken once from its analysis.

A :class:`Strategy` names each choice the planner (:mod:`metastore.planner.plan`) makes before it
writes a step: how each source is read (a streaming read, a table's keyed state, a batch read of
every version of a table's rows), which stateful stage an aggregation needs (keyed groups,
keyed sessions, keyed EMIT FINAL windows, or a batch stage that replays), and how joins are run
(Spark's stream-stream join, an outer join at once, a table join as keyed state). The planner
then only follows these decisions; each is a field with the reason it is taken.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from metastore.engine import overrides
from metastore.engine.analysis import Analysis
from metastore.planner.exceptions import QueryRuntimeError
from metastore.planner.final_windows import final_window
from metastore.planner.outer_at_once import AtOnceJoin, at_once_join, stream_join_windows
from metastore.sql.statements import JoinWindow, SourceKind, WindowSpec


@dataclass(frozen=True)
class Strategy:
    """How the runtime runs one analysed query."""

    changelog: bool
    """It reads one table's changelog (a table's query without joins)."""
    table_join: bool
    """It joins tables (its first source is a table)."""
    window: WindowSpec | None
    """Its aggregation's window, if it aggregates into windows."""
    session: WindowSpec | None
    """That window, if it is a SESSION window (with no grace, for EMIT FINAL)."""
    final: WindowSpec | None
    """That window, if the query emits a TUMBLING or HOPPING window's final result."""
    join_windows: Mapping[int, JoinWindow]
    """Its stream-stream joins' windows, by the index of the stream each joins."""
    at_once: AtOnceJoin | None
    """Its outer stream-stream join without GRACE PERIOD, written as a UNION ALL."""
    outer_joins: frozenset[int]
    """The outer stream-stream joins whose unmatched records Spark writes, by index."""
    sessions_keyed: bool
    """Its sessions are keyed state over the stream (EMIT FINAL's by source partition: a
    session closes by stream time, which records of other keys move)."""
    keys_tables: bool
    """A stream's joins with tables are keyed state (:mod:`metastore.planner.table_state`)."""
    keyed_rows: bool
    """A table-table join whose sides are keyed state."""
    aggregated_join: bool
    """An aggregation of a table-table join, which aggregates the join's rows as a changelog."""
    tables_after: bool
    """Tables joined after stream-stream joins join those rows as keyed state."""
    tables_before: bool
    """Tables joined between the first stream and the streams it joins are keyed state over
    the first stream's records, whose joined records then join the other streams."""
    split_streams: bool
    """The stream-stream join's rows are a view of their own, read by the rest of the query."""
    joined_reads: int
    """How many sources the stream-stream join half of a split query joins: the leading
    streams, or every source where its tables are read in batch."""
    groups_keyed: bool
    """A table aggregation's rows and groups are keyed state: not where it starts at the
    table's end (the state would lack the rows before it, which the batch stage reads), nor for
    a push query (from the end by default)."""
    fail_on_error: bool
    """The query fails on a record it cannot read rather than skip it."""
    stream_state: bool
    """SESSION and EMIT FINAL windows and outer joins' unmatched records may be keyed state."""


def choose(analysis: Analysis, config: Mapping[str, object], *, transient: bool,
           table_state: bool, stream_state: bool) -> Strategy:
    """The strategy of ``analysis``; ``table_state``, ``stream_state``: whether the query's
    checkpoint may hold keyed table and stream state (false for checkpoints that predate it)."""
    first_is_table = analysis.reads[0].source.kind is SourceKind.TABLE
    table_join = first_is_table and bool(analysis.joins)
    if table_join and analysis.aggregate and not table_state:
        raise QueryRuntimeError("an aggregation of a table-table join needs keyed table state")
    window = analysis.windowing if analysis.windowed else None
    session, final = _session_and_final(analysis, window)
    windows = stream_join_windows(analysis)
    at_once = at_once_join(analysis, windows)
    tables_after = _tables_after_stream_joins(analysis, windows, table_state) and (
        session is None and final is None)
    keyed_rows = table_join and table_state
    streams = _leading_streams(analysis) if windows else 0
    tables_before = table_state and at_once is None and _tables_before_stream_joins(
        analysis, windows)
    return Strategy(
        changelog=first_is_table and not analysis.joins, table_join=table_join, window=window,
        session=session, final=final, join_windows=windows, at_once=at_once,
        outer_joins=frozenset() if at_once is not None else _outer_joins(analysis, windows),
        sessions_keyed=session is not None and stream_state,
        keys_tables=table_state and _joins_keyed_state(analysis) and (
            final is None or stream_state),
        keyed_rows=keyed_rows, aggregated_join=keyed_rows and analysis.aggregate,
        tables_after=tables_after, tables_before=tables_before,
        split_streams=(bool(windows) and analysis.aggregate) or tables_after,
        joined_reads=streams if tables_after else len(analysis.reads),
        groups_keyed=table_state and not transient and overrides.offset_reset(config) != "latest",
        fail_on_error=overrides.fails_on_deserialization_error(config),
        stream_state=stream_state)


def _session_and_final(analysis: Analysis, window: WindowSpec | None
                       ) -> tuple[WindowSpec | None, WindowSpec | None]:
    """The query's SESSION window, and its TUMBLING or HOPPING window under EMIT FINAL."""
    if window is None:
        return None, None
    if window.kind == "SESSION":
        return (final_window(window) if analysis.query.emit_final else window), None
    return None, window if analysis.query.emit_final else None


def _tables_after_stream_joins(analysis: Analysis, windows: Mapping[int, JoinWindow],
                               table_state: bool) -> bool:
    """Whether every source after the leading streams of a stream-stream join is a table, and
    those tables may be joined to the join's rows as keyed state."""
    streams = _leading_streams(analysis)
    return bool(windows) and table_state and all(
        read.source.kind is SourceKind.TABLE for read in analysis.reads[streams:]) and (
        streams < len(analysis.reads)) and not (analysis.aggregate and analysis.windowed)


def _tables_before_stream_joins(analysis: Analysis, windows: Mapping[int, JoinWindow]
                                ) -> bool:
    """Whether the query joins its first stream with tables, then those joined records with
    streams (``s1 JOIN t ... JOIN s2 WITHIN ...``), and nothing after them, without
    aggregating: its tables are then keyed state over the first stream's records."""
    kinds = [read.source.kind for read in analysis.reads]
    later_stream = next((i for i, kind in enumerate(kinds[1:], start=1)
                         if kind is SourceKind.STREAM), len(kinds))
    return (bool(windows) and not analysis.aggregate and _leading_streams(analysis) == 1
            and later_stream > 1
            and all(kind is SourceKind.STREAM for kind in kinds[later_stream:]))


def _leading_streams(analysis: Analysis) -> int:
    """How many of the query's sources, from the first, are streams."""
    kinds = [read.source.kind for read in analysis.reads]
    return next((i for i, kind in enumerate(kinds) if kind is not SourceKind.STREAM), len(kinds))


def _joins_keyed_state(analysis: Analysis) -> bool:
    """Whether the query's joins are a stream's joins with tables whose sides are keyed state
    (:mod:`metastore.planner.table_state`): so they are when every source but the first stream
    is a table (an EMIT FINAL's state then reads the joined records; SESSION windows over a
    join are refused); a query that also joins streams joins its tables as of the record's
    time."""
    reads = analysis.reads
    return (bool(analysis.joins) and reads[0].source.kind is SourceKind.STREAM
            and all(read.source.kind is SourceKind.TABLE for read in reads[1:]))


def _outer_joins(analysis: Analysis, windows: Mapping[int, JoinWindow]) -> frozenset[int]:
    """The outer (LEFT, RIGHT, FULL) joins among the stream-stream joins ``windows``, by the
    index of the stream each joins in ``analysis.reads``."""
    return frozenset(index for index in windows
                     if (analysis.joins[index - 1].side or "").upper() in ("LEFT", "RIGHT", "FULL"))
