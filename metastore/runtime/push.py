"""Push queries (``SELECT ... EMIT CHANGES``) of one node: each runs as a Spark StreamingQuery
whose micro-batches are handed to the client's connection.

A push query is planned exactly as a persistent query is (:func:`metastore.planner.plan.
compile_push`, the same analysis, functions and views), reads its sources from the offset
``auto.offset.reset`` says (ksqlDB's default for a push query: ``latest``), and has a
checkpoint of its own, deleted when it stops. Between Spark's streaming thread and the
connection sits a bounded buffer of rows encoded once: when the client reads slowly, the query
waits, so what a push query holds in memory is bounded by ``max_buffered_bytes`` of encoded rows
(and ``max_buffered_batches`` micro-batches) plus the micro-batch being handed on, of at most
``max_records_per_batch`` source records. A query stops (its StreamingQuery stopped, its
checkpoint deleted) when its client has its LIMIT, disconnects, or calls ``/close-query``, or
when the node stops. The records a push query cannot read and the rows it cannot compute are
counted and logged as a persistent query's are, under its ``transient_...`` id.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metastore.catalog.image import Image
from metastore.catalog.model import Column
from metastore.engine.overrides import ConfigOverrides
from metastore.engine.pull_queries import check_select, limit_value
from metastore.planner.exceptions import PushQueryLimitError, UnknownPushQueryError
from metastore.planner.plan import compile_push
from metastore.planner.steps import QueryPlan
from metastore.runtime import job, progress_listener
from metastore.runtime.record_errors import RecordErrors
from metastore.runtime.skipped import SkippedRecords
from metastore.spark.exceptions import SparkUnavailableError
from metastore.spark.query import json_value
from metastore.spark.session import query_session
from metastore.sql.statements import SelectStatement

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)


LISTED_TEXT_CHARS = 2_000
"""The characters of a push query's statement its node lists for the service's other nodes."""


@dataclass(frozen=True)
class PushRow:
    """One row of a push query's result: its columns' values as a JSON array, encoded once on
    Spark's thread (what the buffer bound counts and the connection sends); ``tombstone``: the
    table's row for this key is gone."""

    columns: bytes
    tombstone: bool = False

    @staticmethod
    def of(values: Sequence[Any], tombstone: bool = False) -> PushRow:
        return PushRow(json.dumps([json_value(value) for value in values], separators=(",", ":"),
                                  ensure_ascii=False).encode(), tombstone)


@dataclass(frozen=True)
class PushSettings:
    max_queries: int = 20
    """Push queries one node runs at once (ksqlDB's ``ksql.max.push.queries``)."""
    max_queries_per_client: int = 5
    """Push queries one client (a user, or an address without authentication) runs at once on a
    node: no client holds every slot."""
    max_records_per_batch: int = 10_000
    """Source records one micro-batch of a push query reads, at most."""
    max_buffered_batches: int = 4
    """Micro-batches a push query holds for a slow client before its query waits."""
    max_buffered_bytes: int = 4 * 1024 * 1024
    """Bytes of encoded rows a push query holds for a slow client before its query waits (a
    micro-batch is taken whole when nothing is buffered, so one batch may exceed it)."""


class PushQuery:
    """A running push query; its rows are taken with :meth:`take`, from any thread."""

    def __init__(self, query_id: str, columns: tuple[Column, ...], limit: int | None,
                 settings: PushSettings, checkpoint: Path,
                 on_close: Callable[[PushQuery], None], owner: str | None = None,
                 client: str = "", statement_text: str = "") -> None:
        self.query_id = query_id
        self.statement_text = statement_text
        """The SELECT it runs, as its client sent it (what SHOW QUERIES lists)."""
        self.columns = columns
        self.limit = limit
        self.owner = owner
        """The authenticated user who started it (None without authentication)."""
        self.client = client
        """Whose share of the node's push queries it takes (:func:`~metastore.server.http.concurrency.
        client_of`)."""
        self._settings = settings
        self._checkpoint = checkpoint
        self._on_close = on_close
        self._batches: deque[list[PushRow]] = deque()
        self._buffered_bytes = 0
        self._lock = threading.Condition()
        self._closed = False
        self._listener: Callable[[], None] | None = None
        self._handle: StreamingQuery | None = None
        self._release: Callable[[], None] | None = None

    def attach(self, handle: StreamingQuery, release: Callable[[], None] | None = None) -> None:
        """The StreamingQuery that runs this query (stopped at once if it closed meanwhile),
        and what to ``release`` once it stopped."""
        with self._lock:
            closed = self._closed
            if not closed:
                self._handle, self._release = handle, release
        if closed:
            handle.stop()
            if release is not None:
                release()

    def listen(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (from Spark's thread) whenever rows arrive or the query ends."""
        with self._lock:
            self._listener = listener

    def take(self) -> list[PushRow] | None:
        """The rows that arrived since the last call, oldest first (empty when none), or None
        once the query has stopped and every row was taken."""
        with self._lock:
            if self._batches:
                rows = [row for batch in self._batches for row in batch]
                self._batches.clear()
                self._buffered_bytes = 0
                self._lock.notify_all()
                return rows
            return None if self._closed else []

    def failure(self) -> str | None:
        """Why the query's StreamingQuery stopped, if it failed."""
        handle = self._handle
        if handle is None or handle.isActive:
            return None
        return job.failure(handle) or "the query stopped"

    @property
    def closed(self) -> bool:
        return self._closed

    def deliver(self, rows: list[Row]) -> None:
        """Hand a micro-batch's rows on; waits while the client is behind (Spark's thread)."""
        converted = [PushRow.of(row[:-1], bool(row[-1])) for row in rows]
        if not converted:
            return
        size = sum(len(row.columns) for row in converted)
        with self._lock:
            while self._batches and not self._closed and (
                    len(self._batches) >= self._settings.max_buffered_batches
                    or self._buffered_bytes + size > self._settings.max_buffered_bytes):
                self._lock.wait(0.5)
            if self._closed:
                return
            self._batches.append(converted)
            self._buffered_bytes += size
            listener = self._listener
        if listener is not None:
            listener()

    def close(self) -> None:
        """Stop the query and free what it holds; idempotent, blocks until Spark stopped it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._batches.clear()
            self._buffered_bytes = 0
            self._lock.notify_all()
            listener, handle, self._handle = self._listener, self._handle, None
            release, self._release = self._release, None
        if listener is not None:
            listener()
        try:
            if handle is not None:
                handle.stop()
        except Exception as error:  # Spark already gone: nothing left to stop
            log.warning("push query %s: stopping it failed: %s", self.query_id, error)
        finally:
            self._release_counting(release)
            shutil.rmtree(self._checkpoint, ignore_errors=True)
            self._on_close(self)

    def _release_counting(self, release: Callable[[], None] | None) -> None:
        """Stop counting the query's records and rows (its listener gone from a lost Spark's
        session, what was counted of it still forgotten)."""
        try:
            if release is not None:
                release()
        except Exception as error:
            log.warning("push query %s: removing its listener failed: %s", self.query_id, error)


class PushQueries:
    """The push queries of one node: started from a SELECT, found by id, all stopped at once."""

    def __init__(self, spark: Callable[[], SparkSession | None], kafka_options: Mapping[str, str],
                 checkpoint_root: Path, settings: PushSettings | None = None,
                 skipped: SkippedRecords | None = None,
                 record_errors: RecordErrors | None = None) -> None:
        self._spark = spark
        self._skipped = skipped
        """Where the records its queries cannot read are counted (None: not counted)."""
        self._record_errors = record_errors
        """Where the rows its queries cannot compute are counted (None: not counted)."""
        self._kafka_options = dict(kafka_options)
        self._root = checkpoint_root
        self._settings = settings or PushSettings()
        self._lock = threading.Lock()
        self._running: dict[str, PushQuery] = {}
        shutil.rmtree(checkpoint_root, ignore_errors=True)  # of a node that did not stop cleanly

    @property
    def running(self) -> int:
        with self._lock:
            return len(self._running)

    def listing(self) -> dict[str, dict[str, Any]]:
        """The running push queries by id, with their statement as SHOW QUERIES shows it (cut
        at :data:`LISTED_TEXT_CHARS`: the listing travels in the node's heartbeats)."""
        with self._lock:
            running = list(self._running.values())
        return {query.query_id: {"queryString": query.statement_text[:LISTED_TEXT_CHARS]}
                for query in running if not query.closed}

    def active_spark_queries(self) -> int:
        """How many StreamingQueries the node's Spark runs, in all its sessions (-1 without
        Spark): Spark's shared state lists every active one."""
        spark = self._spark()
        if spark is None:
            return -1
        try:
            shared = spark._jsparkSession.sharedState()  # no public API spans sessions
            return int(shared.activeStreamingQueries().size())
        except Exception as error:  # Spark is dying: the liveness watch will find out
            log.warning("counting Spark's streaming queries: %s", error)
            return -1

    def start(self, statement: SelectStatement, image: Image,
              config: ConfigOverrides, owner: str | None = None, client: str = "") -> PushQuery:
        """Check ``statement`` as ksqlDB does a transient query, plan it and start it.
        ``owner``: the authenticated user who asked (None without authentication); ``client``:
        whose share of the node's push queries it takes."""
        analysis = check_select(statement, image.sources, image.types, image.queries, config)
        columns = analysis.columns
        limit = limit_value(statement.query)
        first = analysis.sources[0] if analysis.sources else "QUERY"
        query_id = f"transient_{first}_{uuid.uuid4().int % 10 ** 19}"
        plan = compile_push(query_id, analysis, dict(config.values))
        spark = self._spark()
        if spark is None:
            raise SparkUnavailableError("Spark is not available on this node; push queries "
                                        "need it")
        checkpoint = self._root / query_id
        query = PushQuery(query_id, columns, limit, self._settings, checkpoint, self._forget,
                          owner, client, statement.text)
        with self._lock:
            if len(self._running) >= self._settings.max_queries:
                raise PushQueryLimitError("Maximum number of push queries exceeded")
            if sum(q.client == client for q in self._running.values()) >= (
                    self._settings.max_queries_per_client):
                raise PushQueryLimitError(
                    f"Maximum number of push queries of one client exceeded: "
                    f"{self._settings.max_queries_per_client} run for it already")
            self._running[query_id] = query
        release = None
        try:
            session = query_session(spark)
            release = self._count_failures(session, query_id, plan)
            record_errors = self._record_errors
            query.attach(job.start_transient(
                session, plan, checkpoint, self._kafka_options, query.deliver,
                max_records_per_batch=self._settings.max_records_per_batch,
                stage_observed=partial(record_errors.count, query_id)
                if record_errors is not None else None), release)
        except BaseException:
            query.close()
            if release is not None:
                release()
            raise
        log.info("push query %s started", query_id)
        return query

    def _count_failures(self, session: SparkSession, query_id: str, plan: QueryPlan
                        ) -> Callable[[], None] | None:
        """Count the records the push query ``query_id`` (of ``plan``, in ``session``) skips
        and the rows it cannot compute, from before it starts; returns what stops counting (its
        listener removed, or the session would keep it for good)."""
        skipped, record_errors = self._skipped, self._record_errors
        if skipped is None and record_errors is None:
            return None
        hearers: list[progress_listener.Hearer] = []
        if skipped is not None:
            skipped.started(query_id, plan.earliest)
            hearers.append(lambda progress: skipped.hear(progress, transient=True))
        if record_errors is not None:
            record_errors.started(query_id, plan)
            hearers.append(record_errors.hear)
        listener = progress_listener.listener(*hearers)
        session.streams.addListener(listener)

        def release() -> None:
            if skipped is not None:
                skipped.stopped(query_id)
            if record_errors is not None:
                record_errors.stopped(query_id)
            session.streams.removeListener(listener)

        return release

    def close(self, query_id: str, requester: str | None = None) -> None:
        """Stop the push query ``query_id`` (ksqlDB's ``/close-query``) for ``requester``: a
        query started by an authenticated user is that user's to close; to anyone else it is
        unknown (its id is not confirmed either)."""
        with self._lock:
            query = self._running.get(query_id)
        if query is None or (query.owner is not None and requester != query.owner):
            raise UnknownPushQueryError(f"No query with id {query_id}")
        query.close()

    def stop(self) -> None:
        """Stop every push query (the node is stopping, or its Spark died)."""
        with self._lock:
            queries = list(self._running.values())
        for query in queries:
            query.close()

    def _forget(self, query: PushQuery) -> None:
        with self._lock:
            self._running.pop(query.query_id, None)
        log.info("push query %s stopped", query.query_id)
