"""The micro-batches in which `metastore test` feeds a test's input records.

ksqlDB's test driver processes each input record as it is piped, before the next one exists.
A micro-batch processes the records it reads in their time order (per key, per join, per
window), which is the piped order while the records come in time order. Where they do not,
the piped order is information the records alone do not carry: a record earlier than one
piped before it (a late record, which a join or a window may have closed on), or a record at
the time of one piped before it on another topic (which of a join's two records came first).
Times are event times, as the query reads them (a source's TIMESTAMP column). So the records
are fed in *arrivals*: the longest runs of piped records whose time order is
their piped order; each arrival is produced, then processed by every query before the next is
produced, as records arriving over time would be.

A table's sink gets one record per key (and window) per micro-batch, where ksqlDB's driver,
its record cache off (``cache.max.bytes.buffering`` 0 in ksqlDB's ``TestExecutor``), writes
every change of the table, and pipes each into the queries that read its topic
(``TestExecutor.pipeRecordsFromKafka``). A query reading a table's topic (a stream declared
over a CTAS's sink) would miss the changes a micro-batch folds together, so in a test where
one does, every record is an arrival of its own (:func:`reads_changelog`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from metastore.catalog.image import Image
from metastore.catalog.model import DataSource
from metastore.sql import types as ty
from metastore.sql.statements import SourceKind
from metastore.testing.cases import CaseRecord


def record_time(record: CaseRecord) -> int:
    """A record's timestamp; 0 without one, as the driver pipes it."""
    return record.timestamp or 0


def arrivals(records: Sequence[CaseRecord], time: Callable[[CaseRecord], int] = record_time,
             *, singly: bool = False) -> list[list[CaseRecord]]:
    """``records`` split, in order, into the runs a micro-batch processes as they were piped:
    a run ends before a record whose ``time`` (the event time its query reads) is before its
    newest, or equal to the time of one of its records on another topic; ``singly``: each
    record is a run of its own."""
    if singly:
        return [[record] for record in records]
    runs: list[list[CaseRecord]] = []
    run: list[CaseRecord] = []
    newest = 0
    times: dict[int, set[str]] = {}  # the run's topics at each time
    for record in records:
        at = time(record)
        topics = times.get(at, set())
        if run and (at < newest or topics - {record.topic}):
            runs.append(run)
            run, times, topics = [], {}, set()
        run.append(record)
        newest = at if len(run) == 1 else max(newest, at)
        times[at] = topics | {record.topic}
    if run:
        runs.append(run)
    return runs


def event_time(source: DataSource | None) -> Callable[[CaseRecord], int]:
    """The event time of a record of ``source``'s topic: its TIMESTAMP column where that is a
    BIGINT the record's value holds (epoch milliseconds), else the record's timestamp."""
    column = source.column(source.timestamp_column) if source is not None and \
        source.timestamp_column else None
    if column is None or column.type != ty.BIGINT:
        return record_time

    def time(record: CaseRecord) -> int:
        value = record.value
        if isinstance(value, dict):
            held = next((v for k, v in value.items() if k.upper() == column.name.upper()), None)
            if isinstance(held, int) and not isinstance(held, bool):
                return held
        return record_time(record)
    return time


def reads_changelog(image: Image) -> bool:
    """Whether a query of ``image`` reads the topic another query writes a table to, so needs
    every change of that table, one micro-batch per input record."""
    tables = {sink.topic: query.query_id for query in image.queries.values()
              if (sink := image.source(query.sink)) is not None
              and sink.kind is SourceKind.TABLE}
    return any(tables.get(source.topic, query.query_id) != query.query_id
               for query in image.queries.values() for name in query.sources
               if (source := image.source(name)) is not None)
