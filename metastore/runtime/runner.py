"""Keep the Spark queries running on this node equal to the image's queries this node owns.

:class:`QueryRunner` is an image consumer of the node's
:class:`~metastore.catalog.image_worker.ImageWorker`, like the Spark catalog projection: it takes the
newest image (once the replica is caught up) and reconciles on the worker's thread, so Spark
never blocks the command log; every tick it also checks its queries and measures their lag. A
pass compares *wanted* (every query of the image whose
assignment partition this node owns) with *running* (the StreamingQuery objects it started):

- a query no longer in the image (TERMINATE, or DROP of its sink) is stopped and its checkpoint
  deleted: it can never run again, its id is never reused;
- a query whose partition was revoked is stopped, synchronously, from the assignment's revoke
  callback; its checkpoint stays for the next owner;
- a wanted query not running is compiled and started from its checkpoint
  (``<checkpoint root>/<service id>/<command topic id>/<query id>``: query ids derive from
  offsets, so they repeat in another service or a re-created command log); one whose SQL
  changed (CREATE OR REPLACE) is restarted on the same checkpoint;
- a query that failed is reported ERROR with Spark's reason and ksqlDB's query errors, and
  started again after a backoff (:mod:`metastore.runtime.query_health`);
- a PAUSEd query is stopped and reported PAUSED, its checkpoint kept, its lag measured from
  where it stopped: RESUME starts it again from there.

It also deletes checkpoints left by queries that were terminated while nobody owned them.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from metastore.catalog.image import Image
from metastore.catalog.image_worker import ImageChange
from metastore.catalog.model import PersistentQuery
from metastore.core.exceptions import MetastoreError
from metastore.engine import overrides
from metastore.kafka.admin import Admin
from metastore.kafka.consumer import EndOffsets
from metastore.kafka.exceptions import KafkaUnavailableError, MissingSourceTopicError
from metastore.kafka.settings import KafkaSettings
from metastore.planner.plan import plan_of
from metastore.planner.steps import streaming_topics
from metastore.runtime import job, progress_listener
from metastore.runtime.assignment import Partitions, QueryAssignment, partition_of
from metastore.runtime.checkpoints import CheckpointDir, CheckpointRoot
from metastore.runtime.error_types import ErrorClassifier
from metastore.runtime.processing_log import QueryFailure
from metastore.runtime.query_health import QueryHealth, RetrySettings
from metastore.runtime.real_time_slots import RealTimeSlots, task_slots
from metastore.runtime.record_errors import RecordErrors
from metastore.runtime.skipped import SkippedRecords
from metastore.runtime.statistics import QueryStatistics

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from metastore.planner.steps import QueryPlan

log = logging.getLogger(__name__)

PENDING, RUNNING, ERROR, PAUSED = "PENDING", "RUNNING", "ERROR", "PAUSED"
PRODUCER_BATCH_BYTES = "16384"
"""Kafka's producers' default ``batch.size``."""
HEARTBEAT_ERRORS, HEARTBEAT_ERROR_CHARS = 3, 500
"""The errors of a query its owner's heartbeat carries, each cut to so many characters: a
heartbeat stays far below Kafka's record size however many queries fail."""
_ID_OFFSET = re.compile(r"_(\d+)$")


@dataclass
class QueryState:
    """One query this node owns: its state, Spark's failure reason, and its lag."""

    query_id: str
    state: str
    message: str | None = None
    lag: int | None = None
    since_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    skipped: dict[str, int] = field(default_factory=dict)
    """Records it skipped on this node because it cannot read them, by source."""
    skipped_ms: dict[str, int] = field(default_factory=dict)
    """When it last skipped one, by source (epoch ms, its micro-batch's start)."""
    record_errors: int = 0
    """Rows it could not process on this node (ksqlDB's record processing errors)."""
    statistics: dict[str, Any] | None = None
    """What it did on this node (:meth:`QueryFigures.to_json`), once a micro-batch ran."""
    offsets: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    """Where it is in each source: topic, partition, [log start, consumer, log end]."""
    errors: list[dict[str, Any]] = field(default_factory=list)
    """ksqlDB's ``QueryError``s of its recent failures on this node."""
    failures: int = 0
    """Its failures in a row (0 once it completes a micro-batch)."""

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "message": self.message, "lag": self.lag,
                "sinceMs": self.since_ms, "skipped": dict(self.skipped),
                "skippedMs": dict(self.skipped_ms),
                "recordErrors": self.record_errors,
                "statistics": self.statistics, "offsets": self.offsets,
                "errors": list(self.errors), "failures": self.failures}


@dataclass
class _Entry:
    query: PersistentQuery
    state: QueryState
    health: QueryHealth
    handle: StreamingQuery | None = None
    reached: Mapping[tuple[str, int], int] = field(default_factory=dict)
    """The source offsets its last micro-batch on this node reached: while it is paused, its
    lag is measured from there (ksqlDB's consumer group keeps its offsets)."""


def _positions(reached: Mapping[tuple[str, int], int],
               marks: Mapping[tuple[str, int], tuple[int, int]]
               ) -> dict[str, dict[str, list[int]]]:
    """Topic, partition: [log start, consumer, log end] offsets."""
    positions: dict[str, dict[str, list[int]]] = {}
    for (topic, partition), (low, high) in sorted(marks.items()):
        positions.setdefault(topic, {})[str(partition)] = [low, reached[topic, partition], high]
    return positions


def _reached(handle: StreamingQuery | None) -> Mapping[tuple[str, int], int]:
    """The source offsets a stopped query's last micro-batch reached (none before one, or
    when Spark is gone)."""
    try:
        reached = job.progress(handle) if handle is not None else None
    except Exception as error:  # Spark gone: the lag is unknown until the query runs again
        log.warning("the offsets of a stopped query: %s", error)
        return {}
    return reached.offsets if reached is not None else {}


def _source_topics(image: Image, query: PersistentQuery) -> frozenset[str]:
    return frozenset(source.topic for source in map(image.source, query.sources)
                     if source is not None)


def _heartbeat_errors(health: QueryHealth) -> list[dict[str, Any]]:
    return [{**error, "errorMessage": error["errorMessage"][:HEARTBEAT_ERROR_CHARS]}
            for error in health.reported_errors()[-HEARTBEAT_ERRORS:]]


def _lag(positions: Mapping[str, Mapping[str, list[int]]]) -> int:
    return sum(max(end - consumer, 0) for partitions in positions.values()
               for _start, consumer, end in partitions.values())


class QueryRunner:
    def __init__(self, node_id: str, spark: Callable[[], SparkSession | None],
                 kafka_options: Mapping[str, str], checkpoint_root: CheckpointRoot,
                 settings: KafkaSettings,
                 assignment: Callable[[Callable[[Partitions], None],
                                       Callable[[Partitions], None]], QueryAssignment],
                 retry: RetrySettings | None = None,
                 classifier: ErrorClassifier | None = None,
                 sink_producer: Mapping[str, str] | None = None,
                 service_id: str = "") -> None:
        self.node_id = node_id
        self._lag_group = f"{service_id}-{node_id}-query-lag" if service_id else (
            f"{node_id}-query-lag")
        self._service_id = service_id
        self._spark = spark
        self._kafka_options = dict(kafka_options)
        self.checkpoint_root = checkpoint_root
        self._settings = settings
        self._make_assignment = assignment
        self.assignment: QueryAssignment | None = None
        self._retry = retry or RetrySettings()
        self._classifier = classifier or ErrorClassifier()
        self._sink_producer = dict(sink_producer or {})
        self._latest: Image | None = None
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._offsets: EndOffsets | None = None
        self._admin: Admin | None = None
        self._health: dict[str, QueryHealth] = {}
        """Each owned query's failures: kept when Spark is lost (a query that brings Spark
        down waits its backoff after the restart too), dropped when the query leaves."""
        self._published: dict[str, QueryState] = {}
        self._queries_changed = True
        """Whether the image's queries changed since the last reconcile."""
        self.skipped = SkippedRecords()
        """Records this node's queries skipped (:mod:`metastore.runtime.skipped`)."""
        self.record_errors = RecordErrors()
        """Rows this node's queries could not process (:mod:`metastore.runtime.record_errors`)."""
        self.statistics = QueryStatistics()
        """What this node's queries did (:mod:`metastore.runtime.statistics`)."""
        self._real_time = RealTimeSlots()
        self._report_failure: Callable[[QueryFailure], None] | None = None
        self._reconciled: Partitions | None = None
        """The partitions of the last reconcile: the same again, with no query changed and every
        query running, is no work."""

    # -- lifecycle -------------------------------------------------------------------------------
    name = "the persistent-query runner"

    def scope(self, scope: str) -> None:
        """Keep this log's query checkpoints apart from any other's under a shared root
        (``scope``: the service and the command log's incarnation); call before the first image."""
        self.checkpoint_root = self.checkpoint_root.scoped(scope)

    def interrupt(self) -> None:
        """Start no more queries: the node is stopping (call before stopping the worker)."""
        self._stopping.set()

    def stop(self) -> None:
        """Stop this node's queries and leave the query group (after the worker stopped)."""
        self._stopping.set()
        self._leave()
        if self._offsets is not None:
            self._offsets.close()

    def spark_lost(self) -> None:
        """Spark died: leave the query group at once, so that this node's queries move to the
        others within a rebalance (their checkpoints stay), and forget their dead handles. The
        next tick with a new session joins the group again."""
        self._leave()

    def _leave(self) -> None:
        """Leave the query group (the revoke callback halts what the node owned) and halt
        every query left."""
        assignment, self.assignment = self.assignment, None
        if assignment is not None:
            assignment.stop()
        with self._lock:
            for entry in list(self._entries.values()):
                self._halt(entry)
            self._entries.clear()
            self._reconciled = None
            self._queries_changed = True
            self._publish()

    # -- an image consumer (the node's image worker calls these on its thread) --------------------
    def open(self) -> None:
        """Nothing to prepare: queries wait for the projection's SparkSession."""

    def consume(self, change: ImageChange) -> None:
        self._latest = change.image
        if change.queries or change.previous is None:
            self._queries_changed = True
        self.tick()

    def tick(self) -> None:
        """Join the query group once Spark runs, start and stop this node's queries, measure lag."""
        spark = self._spark()
        if spark is None:
            return
        if self.assignment is None:
            assignment = self._make_assignment(self._assigned, self._revoked)
            assignment.start()  # a failure is retried at the next tick, with a new member
            self.assignment = assignment
        self.reconcile(spark)
        self._measure_lag()

    def statuses(self) -> dict[str, QueryState]:
        """The queries this node owns, with their state, as last published: heartbeats and
        SHOW QUERIES never wait for a Spark query starting or stopping."""
        return self._published

    def _publish(self) -> None:
        """Replace the published states (call with the lock held)."""
        self._published = {qid: QueryState(**vars(e.state)) for qid, e in self._entries.items()}

    def checkpoint(self, query_id: str) -> CheckpointDir:
        return self.checkpoint_root.query(query_id)

    # -- assignment callbacks (the assignment's polling thread) ----------------------------------
    def _assigned(self, _owned: Partitions) -> None:
        """The next tick (within a second) starts what this node now owns."""

    def _revoked(self, partitions: Partitions) -> None:
        assignment = self.assignment
        count = assignment.partitions if assignment is not None else 1
        with self._lock:
            for query_id in [q for q in self._entries if partition_of(q, count) in partitions]:
                log.info("stopping %s: its partition moves to another node", query_id)
                self._halt(self._entries.pop(query_id))
                self._health.pop(query_id, None)
                self.statistics.forget(query_id)
            self._publish()

    # -- reconciling ----------------------------------------------------------------------------
    def reconcile(self, spark: SparkSession) -> None:
        image, assignment = self._latest, self.assignment
        if image is None or assignment is None:
            return
        owned = assignment.owned
        if not self._queries_changed and self._reconciled == owned and all(
                e.query.paused or (e.handle is not None and e.handle.isActive)
                for e in list(self._entries.values())):
            return  # same queries, same partitions, all running: nothing to start or stop
        with self._lock:
            wanted = {qid: q for qid, q in image.queries.items()
                      if partition_of(qid, assignment.partitions) in owned}
            for query_id in [q for q in self._entries if q not in wanted]:
                entry = self._entries.pop(query_id)
                self._halt(entry)
                if query_id not in image.queries:
                    log.info("%s was terminated: stopped, checkpoint deleted", query_id)
                    self._delete(query_id)
            for query_id, query in sorted(wanted.items()):
                if self._stopping.is_set():
                    break
                found = self._entries.get(query_id)
                if found is not None and (found.query.sql, found.query.config,
                                          found.query.plan) != (query.sql, query.config,
                                                                query.plan):
                    self._halt(found)  # CREATE OR REPLACE: same id and checkpoint, new plan
                    found = None
                entry = found or _Entry(query, QueryState(query_id, PENDING),
                                        self._health.setdefault(query_id, QueryHealth(
                                            self._retry, self._classifier)))
                self._entries[query_id] = entry
                entry.query = query
                if query.paused:
                    self._pause(entry)
                    continue
                if entry.state.state == PAUSED:
                    entry.state = QueryState(query_id, PENDING)
                self._check(entry)
                if entry.handle is None and entry.health.may_start():
                    self._launch(spark, entry, image)
            self._collect_orphans(image, owned, assignment.partitions)
            self._publish()
            self._reconciled = owned
            self._queries_changed = False

    def _launch(self, spark: SparkSession, entry: _Entry, image: Image) -> None:
        query_id = entry.query.query_id
        entry.health.source_topics = _source_topics(image, entry.query)
        try:
            checkpoint = self.checkpoint(query_id)
            plan = plan_of(entry.query, image, table_state=checkpoint.holds_table_state(),
                           stream_state=checkpoint.holds_stream_state())
            real_time_ms = overrides.real_time_batch_ms(dict(entry.query.config))
            if real_time_ms is not None:
                self._real_time.take(query_id, self._partitions(plan), task_slots(spark))
            self.skipped.started(query_id, plan.earliest)
            self.record_errors.started(query_id, plan)
            entry.handle = job.start(spark, plan, checkpoint, self._kafka_options,
                                     listener=progress_listener.listener(
                                         self.skipped.hear, self.record_errors.hear,
                                         self.statistics.hear),
                                     transactional_id=self._transactional_id(entry.query),
                                     producer_options=self._producer_options(plan.topic),
                                     real_time_ms=real_time_ms,
                                     stage_observed=partial(self.record_errors.count, query_id),
                                     wrote=partial(self.statistics.wrote, query_id))
            entry.state = QueryState(query_id, RUNNING)
            entry.health.started()
            log.info("started %s (checkpoint %s)", query_id, checkpoint.location)
        except Exception as error:  # compile or Spark start failure: ERROR, retried later
            self._real_time.give_back(query_id)
            self._failed(entry, job.failure_text(str(error)) or type(error).__name__,
                         "could not start", str(error)[:job.FAILURE_DETAIL_CHARS],
                         user=isinstance(error, MetastoreError) and error.user_error)

    def _partitions(self, plan: QueryPlan) -> int:
        """The partitions of the topics ``plan`` reads as streams: a real-time query's tasks."""
        total = 0
        for topic in streaming_topics(plan):
            found = self._kafka_admin().describe(topic)
            if found is None:
                raise MissingSourceTopicError(topic)
            total += found.partitions
        return total

    def _kafka_admin(self) -> Admin:
        """The node's admin client for the queries' topics, made when first needed."""
        if self._admin is None:
            self._admin = Admin(self._settings, timeout=5.0)
        return self._admin

    def _sink_topic(self, query: PersistentQuery) -> str:
        image = self._latest
        sink = image.source(query.sink) if image is not None else None
        return sink.topic if sink is not None else ""

    def _producer_options(self, topic: str) -> dict[str, str]:
        """The node's sink producer settings, with batches no larger than the sink topic
        takes: a producer whose batch holds records the topic refuses as too large splits it
        into the same batch again, forever (the query would hang), where batches of at most
        the topic's ``max.message.bytes`` fail with RecordTooLargeException, and the query
        with them."""
        options = dict(self._sink_producer)
        try:
            limit = int(self._kafka_admin().topic_config(topic).get("max.message.bytes", "0"))
        except Exception as error:  # Kafka slow or away: the producer's own batches, then
            log.warning("the size limit of topic %s is unknown: %s", topic, error)
            return options
        batch = str(options.get("kafka.batch.size")
                    or self._kafka_options.get("kafka.batch.size", PRODUCER_BATCH_BYTES))
        if not batch.strip().isdigit():  # the producer refuses it, with Kafka's reason
            return options
        return {**options, "kafka.batch.size": str(limit)} if 0 < limit < int(batch) else options

    def _pause(self, entry: _Entry) -> None:
        """Stop a PAUSEd query; its checkpoint stays, for RESUME to go on from."""
        if entry.state.state != PAUSED:
            handle = entry.handle
            self._halt(entry)
            entry.reached = _reached(handle) or entry.reached
            entry.state = QueryState(entry.query.query_id, PAUSED)
            entry.health.reset()
            log.info("%s paused: stopped, checkpoint kept", entry.query.query_id)

    def _check(self, entry: _Entry) -> None:
        handle = entry.handle
        if handle is None or handle.isActive:
            return
        reason = job.failure(handle) or "the Spark query stopped"
        detail = job.failure_detail(handle) or reason
        entry.handle = None
        self._release(entry.query)
        self._failed(entry, reason, "failed", detail)

    def report_failures_to(self, report: Callable[[QueryFailure], None]) -> None:
        """Hand each query's failure to ``report`` (the processing log)."""
        self._report_failure = report

    def _failed(self, entry: _Entry, reason: str, what: str, detail: str,
                user: bool = False) -> None:
        """``entry``'s query failed: ERROR, with its error (``reason``, one line; ``detail``,
        the whole text it is classified by; ``user``: a USER error whatever the text says)
        recorded and logged in the processing log, until its backoff ends."""
        if self._report_failure is not None:
            self._report_failure(QueryFailure(entry.query.query_id, (reason,),
                                              int(time.time() * 1000), detail,
                                              self._sink_topic(entry.query)))
        wait = entry.health.failed(reason, detail, user)
        entry.state = QueryState(entry.query.query_id, ERROR, reason,
                                 errors=_heartbeat_errors(entry.health),
                                 failures=entry.health.failures)
        log.warning("%s %s (failure %d in a row; starting again in %.0f s): %s",
                    entry.query.query_id, what, entry.health.failures, wait, reason[:300])

    def _halt(self, entry: _Entry) -> None:
        handle, entry.handle = entry.handle, None
        try:
            if handle is not None:
                handle.stop()
        except Exception as error:  # already stopped or Spark gone: nothing left to stop
            log.warning("stopping %s: %s", entry.query.query_id, error)
        finally:
            self._release(entry.query)

    def _release(self, query: PersistentQuery) -> None:
        """What a stopped query held on this node: its exactly-once producer, its real-time
        task slots."""
        self._close_producer(query)
        self._real_time.give_back(query.query_id)

    def _close_producer(self, query: PersistentQuery) -> None:
        """Close an exactly-once query's producer, if this node's JVM has one."""
        transactional_id = self._transactional_id(query)
        spark = self._spark() if transactional_id is not None else None
        if transactional_id is not None and spark is not None:
            try:
                job.close_transactional_sink(spark, transactional_id)
            except Exception as error:  # Spark gone: so is the producer
                log.warning("closing the producer of %s: %s", query.query_id, error)

    def _transactional_id(self, query: PersistentQuery) -> str | None:
        """The transactional id of an exactly-once query (None: at least once)."""
        if not overrides.exactly_once(dict(query.config)):
            return None
        return job.transactional_id(self._service_id, query.query_id)

    def _collect_orphans(self, image: Image, owned: Partitions, partitions: int) -> None:
        """Delete checkpoints of queries terminated while no node ran them."""
        try:
            query_ids = self.checkpoint_root.query_ids()
        except Exception as error:  # storage out of reach: the next reconcile tries again
            log.warning("listing the query checkpoints: %s", error)
            return
        for query_id in query_ids:
            match = _ID_OFFSET.search(query_id)
            if (match is None or query_id in image.queries or query_id in self._entries
                    or int(match.group(1)) > image.offset
                    or partition_of(query_id, partitions) not in owned):
                continue
            log.info("deleting the checkpoint of terminated query %s", query_id)
            self._delete(query_id)

    def _delete(self, query_id: str) -> None:
        self.statistics.forget(query_id)
        self._health.pop(query_id, None)
        try:
            self.checkpoint(query_id).delete()
        except Exception as error:  # storage out of reach: left for the orphan collection
            log.warning("deleting the checkpoint of %s: %s", query_id, error)

    # -- lag -------------------------------------------------------------------------------------
    def _measure_lag(self) -> None:
        """Lag per query: the sources' last stable offsets minus what its last batch reached;
        with its figures, published."""
        with self._lock:
            progress = {qid: job.progress(e.handle) for qid, e in self._entries.items()
                        if e.handle is not None}
            reached = {qid: p.offsets for qid, p in progress.items() if p is not None}
            for query_id, offsets in reached.items():
                self._entries[query_id].reached = offsets
            reached |= {qid: e.reached for qid, e in self._entries.items()
                        if e.handle is None and e.state.state == PAUSED}
        if self._offsets is None:
            self._offsets = EndOffsets(self._settings, group_id=self._lag_group)
        positions: dict[str, dict[str, dict[str, list[int]]] | None] = dict.fromkeys(progress)
        for query_id, offsets in reached.items():
            positions[query_id] = None
            if not offsets:
                continue
            try:
                marks = self._offsets.watermarks(offsets, timeout=5)
            except KafkaUnavailableError:
                continue
            positions[query_id] = _positions(offsets, marks)
        with self._lock:
            for query_id, position in positions.items():
                entry = self._entries.get(query_id)
                if entry is not None and progress.get(query_id) is not None:
                    entry.health.ran()
                if entry is not None and entry.state.state in (RUNNING, PAUSED):
                    entry.state.lag = _lag(position) if position is not None else None
                    entry.state.offsets = position or {}
            for query_id, entry in self._entries.items():
                entry.state.errors = _heartbeat_errors(entry.health)
                entry.state.failures = entry.health.failures
                entry.state.skipped = self.skipped.of(query_id)
                entry.state.skipped_ms = self.skipped.last_of(query_id)
                entry.state.record_errors = self.record_errors.of(query_id)
                figures = self.statistics.of(query_id)
                entry.state.statistics = figures.to_json() if figures is not None else None
            self._publish()
