"""Run one ksqlDB query test on real Kafka and Spark, as a node would run its statements.

For each test:

1. its statements are parsed and validated exactly as a node validates them (the same
   :class:`~metastore.engine.validation.Validator`, with the Spark runtime check and the test's
   ``properties`` as the request's configuration overrides, names ksqlDB would not know ignored
   as its test driver does), on an empty catalog of its own; topics the test declares, or its
   CREATE statements name without ``PARTITIONS``, exist (ksqlDB's test driver creates them),
   others are created as a node would;
2. every Kafka topic is namespaced (``qtt-<run>-<n>-<topic>``), so tests never see each other;
3. the inputs are produced, in order, with their keys and values encoded in the formats of the
   source declared on their topic, their timestamps (0 when not given, as ksqlDB's driver does)
   and headers, through the Kafka producer of Spark's JVM (librdkafka cannot write timestamp 0),
   in the arrivals of :mod:`metastore.testing.arrivals` (one, for records in time order;
   one per record where a query reads a table's topic, which must see each of its changes);
4. after each arrival, each persistent query of the final catalog, in the order created,
   compiled into the plan a node runs, is run as a Spark streaming query that processes what
   its sources hold, then stops (its checkpoint kept for the next arrival);
5. every topic the test expects records on is read ``read_committed`` and compared
   (:mod:`metastore.testing.verdict`), and the catalog checked against the test's
   post-conditions (:mod:`metastore.testing.post`).

A statement refused at step 1 makes the test *refused*; a query Spark fails, a timeout or a Kafka
error makes it an *error*; a difference in records makes it *failed*.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException

from metastore.catalog import commands as cmd
from metastore.catalog.image import EMPTY_IMAGE, Image
from metastore.catalog.model import DataSource, PersistentQuery
from metastore.core.exceptions import MetastoreError
from metastore.engine import overrides
from metastore.engine.asserts import SchemaFacts
from metastore.engine.validation import Read, RecordEncoder, Validator, Write
from metastore.formats import written_schemas
from metastore.kafka import row_encoding
from metastore.kafka.admin import Admin
from metastore.kafka.consumer import DetailedRecord, EndOffsets, PartitionReader
from metastore.kafka.exceptions import KafkaUnavailableError
from metastore.kafka.settings import KafkaSettings
from metastore.planner.plan import plan_of, stored_plan
from metastore.planner.steps import QueryPlan
from metastore.planner.support import check_runtime
from metastore.runtime import job
from metastore.runtime.checkpoints import LocalDir
from metastore.schema_registry.client import SchemaRegistryClient
from metastore.spark.views import spark_kafka_options
from metastore.sql import statements as st
from metastore.sql.exceptions import ParseError
from metastore.sql.parser import parse
from metastore.testing import records, verdict
from metastore.testing.arrivals import arrivals, event_time, reads_changelog
from metastore.testing.cases import CaseRecord, DeclaredTopic, QueryTest
from metastore.testing.post import post_difference
from metastore.testing.registry_records import (
    RegistryCodec,
    RegistryRecordError,
    TestRegistry,
)
from metastore.testing.schema_numbering import statement_sides

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PASSED, FAILED, REFUSED, ERROR = "passed", "failed", "refused", "error"

READ_TIMEOUT_SECONDS = 60
"""How long reading a sink up to its end offsets may take."""

Rename = Callable[[str], str]
"""A test's topic name to the Kafka topic it is in this run."""


@dataclass(frozen=True)
class CaseResult:
    test_id: str
    name: str
    status: str
    reason: str = ""
    seconds: float = 0.0
    plans: tuple[str, ...] = ()
    """The plan documents its queries ran, in the order created, on topics named
    :data:`PLANNED_NAMESPACE` + the test's topic (what ``QueryTest.plans`` takes back)."""

    def to_json(self) -> dict[str, object]:
        return {"id": self.test_id, "name": self.name, "status": self.status,
                "reason": self.reason, "seconds": round(self.seconds, 2)}


_log = logging.getLogger(__name__)

DRIVER_PARTITIONS = 4
"""The partitions ksqlDB's test driver gives a topic it infers from a CREATE statement (its
``Topic.DEFAULT_PARTITIONS``; a topic the test declares without a count has 1): the count
validation sees, so co-partitioning rules judge a test as ksqlDB does. The topic itself is
created with one partition unless sized (:func:`physical_partitions`)."""


class PreexistingTopics:
    """The topics that exist before a test's statements run, as ksqlDB's test driver makes them.

    The driver creates them itself and runs no topic-creation step for a CREATE (its executor
    has no ``TopicCreateInjector``), so a CREATE's PARTITIONS is never compared with a topic the
    test declares: validation sees the count the CREATE gives. The topic is still created with
    the declared count, else one (:func:`physical_partitions`), as the driver creates it."""

    def __init__(self, test: QueryTest, statements: Iterable[st.Statement]) -> None:
        declared = {topic.name for topic in test.topics}
        self._existing = {topic.name: topic.partitions or 1 for topic in test.topics}
        claimed: set[str] = set()
        for statement in statements:
            if isinstance(statement, st.CreateSource):
                topic = str(statement.properties.get("KAFKA_TOPIC", statement.name))
                requested = statement.properties.get("PARTITIONS")
                if requested is None:
                    self._existing.setdefault(topic, DRIVER_PARTITIONS)
                elif topic in declared and topic not in claimed and _whole(requested):
                    self._existing[topic] = int(str(requested).strip())
                    claimed.add(topic)

    def partitions(self, topic: str) -> int | None:
        return self._existing.get(topic)

    def broker_count(self) -> int | None:
        return None


def case_validator(test: QueryTest, statements: Sequence[st.Statement],
                   config: overrides.ConfigOverrides, physical: Rename, *,
                   schemas: SchemaFacts | None = None, encoder: RecordEncoder | None = None
                   ) -> Validator:
    """The validator of a test's statements, on an empty catalog of their own, as a node
    validates them: the Spark runtime check, the test's properties as the request's, its
    queries planned on the topics ``physical`` names."""
    def planner(query: PersistentQuery, image: Image, replacing: str | None = None) -> str:
        return stored_plan(query, _in_topics(image, physical), replacing)

    return Validator(EMPTY_IMAGE, PreexistingTopics(test, statements), runtime_check=check_runtime,
                     config=config, encoder=encoder, schemas=schemas, planner=planner)


def physical_partitions(test: QueryTest, image: Image) -> dict[str, int]:
    """The partitions each topic of a test is created with: the count the test declares (one when
    it declares none), else the count a statement's PARTITIONS gives, else one. ksqlDB's driver
    processes every partition of a topic as one ordered input; one partition keeps that order on
    a real broker, where the records of several partitions would reach a query in no defined
    order."""
    wanted = {topic.name: topic.partitions or 1 for topic in test.topics}
    sized = {statement.name for statement in parse(test.script)
             if isinstance(statement, st.CreateSource | st.CreateAsSelect)
             and "PARTITIONS" in statement.properties}
    for source in image.sources.values():
        explicit = source.name in sized and source.partitions
        wanted.setdefault(source.topic, explicit or 1)
    for record in (*test.inputs, *test.outputs):
        wanted.setdefault(record.topic, 1)
    return wanted


def _log_failed_deletions(deletions: Sequence[Future[None]]) -> None:
    """Log the topic deletions that failed (a topic that never existed is no failure)."""
    for deletion in deletions:
        if not deletion.done():
            continue
        error = deletion.exception()
        code = error.args[0].code() if isinstance(error, KafkaException) and error.args and \
            isinstance(error.args[0], KafkaError) else None
        if error is not None and code != KafkaError.UNKNOWN_TOPIC_OR_PART:
            _log.warning("a test topic was not deleted: %s", error)


def _whole(value: st.PropertyValue) -> bool:
    """A PARTITIONS value validation would take as a positive count (it refuses any other)."""
    text = str(value).strip()
    return not isinstance(value, bool) and text.isdigit() and int(text) > 0


class _RefusedError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class QueryTestRunner:
    """Runs tests one after another on one SparkSession and one Kafka cluster."""

    def __init__(self, spark: SparkSession, settings: KafkaSettings, work_dir: Path,
                 run_id: str, query_timeout: float = 120.0,
                 registry_url: str | None = None) -> None:
        self._spark = spark
        self._settings = settings
        self._work_dir = work_dir
        self._run_id = run_id
        self._query_timeout = query_timeout
        self._admin = Admin(settings, timeout=30)
        self._kafka_options = spark_kafka_options(settings)
        self._producer = _JvmProducer(spark, settings)
        self._registry = None if registry_url is None else RegistryCodec(spark, registry_url)
        self._registry_client = (None if registry_url is None
                                 else SchemaRegistryClient(registry_url, timeout=30))
        self._count = 0
        self._deletions: list[Future[None]] = []
        self._stable_ends = EndOffsets(settings, f"qtt-{run_id}-ends", committed=True)
        self._high_ends = EndOffsets(settings, f"qtt-{run_id}-ends", committed=False)
        self.plans_run: tuple[str, ...] = ()
        """The plans the last test's statements planned (what its queries ran, unless it
        carries stored plans), on :data:`PLANNED_NAMESPACE`'s topics."""

    def close(self) -> None:
        try:
            self._stable_ends.close()
            self._high_ends.close()
            self._producer.close()
            if self._registry_client is not None:
                self._registry_client.close()
        finally:
            self._await_deletions()

    def _await_deletions(self, timeout: float = 30.0) -> None:
        """Wait for the deletions of the tests' topics still in flight, so a run leaves none."""
        pending, self._deletions = self._deletions, []
        _done, not_done = futures.wait(pending, timeout=timeout)
        _log_failed_deletions(pending)
        if not_done:
            _log.warning("%d topic deletions did not complete in %.0f s; their topics are left",
                         len(not_done), timeout)

    def run(self, test: QueryTest) -> CaseResult:
        self._count += 1
        self.plans_run = ()
        started = time.monotonic()
        namespace = f"qtt-{self._run_id}-{self._count}-"
        try:
            status, reason = self._run(test, namespace)
        except Exception as error:  # one test's failure, whatever it is, is that test's result
            status, reason = ERROR, f"{type(error).__name__}: {_first_line(error)}"
        finally:
            shutil.rmtree(self._work_dir / namespace, ignore_errors=True)
        return CaseResult(test.test_id, test.name, status, reason, time.monotonic() - started,
                          self.plans_run)

    def _run(self, test: QueryTest, namespace: str) -> tuple[str, str]:
        def physical(topic: str) -> str:
            return namespace + topic
        try:
            image, inserted = self._validate(test, physical)
        except _RefusedError as refusal:
            if test.expected_error is not None:
                wanted = str(test.expected_error.get("message") or "")
                if wanted in refusal.reason:
                    return PASSED, ""
                return FAILED, f"expected the error {wanted!r}, got {refusal.reason!r}"
            return REFUSED, refusal.reason
        processing_error = _processing_error_expected(test)
        if test.expected_error is not None and not processing_error:
            return FAILED, "expected a statement to fail; every statement was accepted"
        queries = sorted(image.queries.values(), key=lambda q: q.offset)
        transactional = {query.query_id: job.transactional_id(namespace, query.query_id)
                         for query in queries if overrides.exactly_once(dict(query.config))}
        try:
            self._create_topics(test, image, physical)
            plans = _query_plans(test, queries, _in_topics(image, physical), namespace)
            self.plans_run = tuple(planned_text(query.plan, namespace) for query in queries)
            for rows, arrival in _feeds(test, image, inserted) or [((), [])]:
                self._produce(image, physical, arrival, test.topics, rows)
                for query_id, plan in plans:
                    failure = self._run_query(plan, self._work_dir / namespace / query_id,
                                              transactional.get(query_id))
                    if failure is not None:
                        return (PASSED, "") if processing_error else (
                            ERROR, f"{query_id}: {failure}")
            if processing_error:
                return FAILED, "expected a query to fail on the records; each one processed them"
            difference = self._compare(test, image, physical) or post_difference(test.post, image)
        finally:
            for transactional_id in transactional.values():
                job.close_transactional_sink(self._spark, transactional_id)
            self._delete_topics(test, image, physical)
        return (PASSED, "") if difference is None else (FAILED, difference)

    def _validate(self, test: QueryTest, physical: Rename) -> tuple[Image, list[_Inserted]]:
        """The image of the test's statements and the records of its INSERT VALUES, in
        statement order; CREATE statements infer their columns from the test's schemas."""
        try:
            statements = parse(test.script)
        except ParseError as error:
            raise _RefusedError(str(error)) from error
        try:
            config = overrides.resolve(test.properties, strict=False)
        except overrides.ConfigError as error:
            raise _RefusedError(f"properties: {error}") from error
        schemas = None if self._registry_client is None else TestRegistry(
            self._registry_client, test.topics, physical, statement_sides(statements, config),
            [record.topic for record in (*test.inputs, *test.outputs)])

        validator = case_validator(test, statements, config, physical, schemas=schemas,
                                   encoder=self._encode_record)
        inserted: list[_Inserted] = []
        for statement in statements:
            try:
                outcome = validator.validate(statement)
                if schemas is not None and isinstance(outcome, Write) and isinstance(
                        outcome.command, cmd.CreateSourceCommand):  # SchemaRegisterInjector
                    written_schemas.register(outcome.command.source, schemas, if_absent=True)
                if isinstance(outcome, Read) and outcome.record is not None:  # as the node does
                    record = outcome.record
                    inserted.append(_Inserted(record.topic, row_encoding.KafkaBytes(
                        record.key, record.value), record.timestamp_ms))
            except (MetastoreError, row_encoding.RowEncodingError) as error:
                raise _RefusedError(f"{statement.text.strip()[:120]}: {error}") from error
        return validator.image, inserted

    # -- Kafka ----------------------------------------------------------------------------------
    def _topics(self, test: QueryTest, image: Image) -> dict[str, int]:
        return physical_partitions(test, image)

    def _create_topics(self, test: QueryTest, image: Image, physical: Rename) -> None:
        for name, partitions in self._topics(test, image).items():
            self._admin.create(physical(name), partitions, config=KEEP_RECORDS)

    def _delete_topics(self, test: QueryTest, image: Image, physical: Rename) -> None:
        _log_failed_deletions([f for f in self._deletions if f.done()])
        self._deletions = [f for f in self._deletions if not f.done()]
        self._deletions += self._admin.start_deleting([physical(t)
                                                       for t in self._topics(test, image)])

    def _produce(self, image: Image, physical: Rename, inputs: Sequence[CaseRecord],
                 topics: Sequence[DeclaredTopic], inserted: Sequence[_Inserted] = ()) -> None:
        """The INSERT VALUES records first (ksqlDB's test driver runs them with the statements,
        before it pipes the inputs), then ``inputs``, records of the test's ``topics``."""
        for row in inserted:
            self._producer.send(physical(row.topic), row.encoded, row.timestamp_ms, ())
        declared = {topic.name: topic for topic in topics}
        for record in inputs:
            source = _input_source(image, record.topic)
            try:
                encoded = records.encode(record, source, self._registry_encoder(
                    source, declared.get(record.topic), physical(record.topic)))
            except (records.RecordCodecError, RegistryRecordError) as error:
                raise RunKafkaError(f"input record on {record.topic}: {error}") from error
            self._producer.send(physical(record.topic), encoded, record.timestamp or 0,
                                record.headers or ())
        self._producer.flush()

    def _encode_record(self, source: DataSource, row: Mapping[str, Any]
                       ) -> tuple[bytes | None, bytes | None]:
        return row_encoding.encode_record(source, row, self._registry_client)

    def _registry_encoder(self, source: DataSource | None, declared: DeclaredTopic | None,
                          topic: str) -> records.RegistryEncoder | None:
        registry = self._registry
        if registry is None or source is None:
            return None
        return lambda value, is_key: registry.encode(value, source, declared, topic, is_key)

    def _run_query(self, plan: QueryPlan, checkpoint: Path,
                   transactional_id: str | None) -> str | None:
        try:
            handle = job.start(self._spark, plan, LocalDir(checkpoint), self._kafka_options,
                               available_now=True, transactional_id=transactional_id)
        except Exception as error:  # Spark's analysis of the plan: the test's error, not the run's
            return _first_line(error)
        try:
            finished = handle.awaitTermination(max(1, round(self._query_timeout)))
        except Exception:  # Spark raises the query's failure here; job.failure says what it was
            finished = not handle.isActive
        if not finished:
            handle.stop()
            return f"did not finish within {self._query_timeout:.0f} s"
        return job.failure(handle)

    def _compare(self, test: QueryTest, image: Image, physical: Rename) -> str | None:
        problems = []
        expected_topics = list(dict.fromkeys(record.topic for record in test.outputs))
        for topic in expected_topics:
            sink = _sink_source(image, topic)
            expected = [r for r in test.outputs if r.topic == topic]
            actual = self._read(physical(topic), topic, sink,
                                transactional=_written_in_transactions(image, topic))
            if sink is not None and sink.kind is st.SourceKind.TABLE:
                difference = verdict.table_difference(expected, actual)
            else:
                difference = verdict.stream_difference(expected, actual)
            if difference is not None:
                problems.append(f"{topic}: {difference}")
        return "\n".join(problems) if problems else None

    def _read(self, topic: str, shown: str, sink: DataSource | None,
              transactional: bool = False) -> list[verdict.ActualRecord]:
        """The sink's records up to its end offsets, in (partition, offset) order
        (``transactional``: once its transactions' markers are written)."""
        described = self._admin.describe(topic)
        decoder = None if self._registry is None else self._registry.decode
        found: list[verdict.ActualRecord] = []
        for partition in range(described.partitions if described is not None else 0):
            if transactional:
                self._await_markers(topic, partition)
            reader = PartitionReader(self._settings, topic, partition, group_id=f"{topic}-check",
                                     details=True)
            try:
                for batch in reader.read_to_end(timeout=READ_TIMEOUT_SECONDS):
                    for record in batch:
                        assert isinstance(record, DetailedRecord), "a details reader"
                        key = records.decode_key(record.key, sink, decoder)
                        found.append(verdict.ActualRecord(
                            shown, key.key, records.decode_value(record.value, sink, decoder),
                            record.timestamp_ms or 0, record.headers, key.window, partition,
                            record.offset))
            except KafkaUnavailableError as error:
                raise RunKafkaError(f"reading {shown} failed: {error}") from error
            finally:
                reader.close()
        return found


    def _await_markers(self, topic: str, partition: int) -> None:
        """Wait (up to :data:`READ_TIMEOUT_SECONDS`) until a read_committed reader sees the whole
        partition: an exactly-once query's transaction is committed when its producer's commit
        returns, and the markers that make its records visible follow a moment later."""
        deadline = time.monotonic() + READ_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            try:
                stable = self._stable_ends.end_offset(topic, partition)
                if stable >= self._high_ends.end_offset(topic, partition):
                    return
            except KafkaUnavailableError as error:
                raise RunKafkaError(f"reading the end of {topic} failed: {error}") from error
            time.sleep(0.01)
        raise RunKafkaError(f"a transaction on {topic} stayed open for {READ_TIMEOUT_SECONDS} s "
                            "after the test's queries finished")


class RunKafkaError(MetastoreError):
    """Kafka refused or failed something a test run needs."""


PROCESSING_ERROR = "org.apache.kafka.streams.errors.StreamsException"
"""The error a test expects when its statements are accepted and a query fails on its records
(Kafka Streams' wrapper: "Exception caught in process"); the runtime's own message differs."""


def _processing_error_expected(test: QueryTest) -> bool:
    return test.expected_error is not None and (
        test.expected_error.get("type") == PROCESSING_ERROR)


def _first_line(error: BaseException) -> str:
    text = str(getattr(error, "desc", None) or error).strip()
    return text.splitlines()[0][:1000] if text else type(error).__name__


KEEP_RECORDS = {"retention.ms": "-1"}
"""A test's records carry the test's timestamps (often 0, 1970): a broker's time retention
would delete them at its next check."""


def _feeds(test: QueryTest, image: Image, inserted: Sequence[_Inserted]
           ) -> list[tuple[Sequence[_Inserted], Sequence[CaseRecord]]]:
    """The arrivals a test's records are produced in: the INSERT VALUES records first, an
    arrival of their own (ksqlDB's driver runs them with the statements, before it pipes the
    inputs), then the inputs'; one record an arrival where a query reads a table's changes."""
    singly = reads_changelog(image)
    sources = {r.topic: _input_source(image, r.topic) for r in test.inputs}
    times = {topic: event_time(source) for topic, source in sources.items()}
    rows = [[row] for row in inserted] if singly else [list(inserted)]
    feeds: list[tuple[Sequence[_Inserted], Sequence[CaseRecord]]] = [
        (run, []) for run in rows if run]
    return feeds + [((), arrival) for arrival in arrivals(
        test.inputs, lambda record: times[record.topic](record), singly=singly)]


def _in_topics(image: Image, physical: Rename) -> Image:
    """The image with every source on its topic of this run, so a plan reads, writes and
    registers schemas (under the topic's subject) where the test's records are."""
    return replace(image, sources={name: replace(source, topic=physical(source.topic))
                                   for name, source in image.sources.items()})


PLANNED_NAMESPACE = "qtt-planned-"
"""What a stored plan of a test (``QueryTest.plans``) puts before the test's topic names: a run
puts its own namespace there."""


def planned_text(plan: str, namespace: str) -> str:
    """A plan a run wrote on its ``namespace``'s topics, on :data:`PLANNED_NAMESPACE`'s."""
    return plan.replace(namespace, PLANNED_NAMESPACE)


def _query_plans(test: QueryTest, queries: Sequence[PersistentQuery], image: Image,
                 namespace: str) -> list[tuple[str, QueryPlan]]:
    """What runs each query: the plan its command keeps, or the test's stored plan for it, on
    this run's topics, as a node reads a plan from its command."""
    stored = test.plans
    if stored is not None and len(stored) != len(queries):
        raise StoredPlansError(f"the test keeps {len(stored)} plans; its statements create "
                               f"{len(queries)} queries")
    if stored is not None:
        queries = [replace(query, plan=text.replace(PLANNED_NAMESPACE, namespace))
                   for query, text in zip(queries, stored, strict=True)]
    return [(query.query_id, _namespaced(plan_of(query, image))) for query in queries]


class StoredPlansError(MetastoreError):
    """A test's stored plans do not match the queries its statements create."""


def _namespaced(plan: QueryPlan) -> QueryPlan:
    return replace(plan, query_id=re.sub(r"\W", "_", plan.query_id))


def _written_in_transactions(image: Image, topic: str) -> bool:
    """Whether an exactly-once query of the test writes ``topic`` (a test's topic name)."""
    return any(overrides.exactly_once(dict(query.config)) for query in image.queries.values()
               if (sink := image.source(query.sink)) is not None and sink.topic == topic)


def _input_source(image: Image, topic: str) -> DataSource | None:
    """The source whose formats a topic's inputs are written in: one declared on it first."""
    candidates = [s for s in image.sources.values() if s.topic == topic]
    declared = [s for s in candidates if s.query_id is None]
    chosen = declared or candidates
    return chosen[0] if chosen else None


def _sink_source(image: Image, topic: str) -> DataSource | None:
    """The source whose formats a topic's records are read in: a query's sink first."""
    candidates = [s for s in image.sources.values() if s.topic == topic]
    sinks = [s for s in candidates if s.query_id is not None]
    chosen = sinks or candidates
    return chosen[0] if chosen else None


@dataclass(frozen=True)
class _Inserted:
    """The record of one INSERT VALUES statement of a test."""

    topic: str
    encoded: row_encoding.KafkaBytes
    timestamp_ms: int


class _JvmProducer:
    """A Kafka producer in Spark's JVM: it writes any timestamp, 0 included."""

    def __init__(self, spark: SparkSession, settings: KafkaSettings) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None, "a running SparkSession has a JVM"
        self._jvm = jvm
        properties = jvm.java.util.Properties()
        for key, value in settings.java_config().items():
            properties.put(key, value)
        properties.put("enable.idempotence", "true")
        properties.put("acks", "all")
        properties.put("linger.ms", "0")
        serializer = jvm.org.apache.kafka.common.serialization.ByteArraySerializer
        self._producer = jvm.org.apache.kafka.clients.producer.KafkaProducer(
            properties, serializer(), serializer())
        self._pending: list[object] = []

    def send(self, topic: str, encoded: row_encoding.KafkaBytes, timestamp: int,
             headers: Iterable[tuple[str, bytes | None]]) -> None:
        jvm = self._jvm
        record_headers = jvm.org.apache.kafka.common.header.internals.RecordHeaders()
        for key, value in headers:
            record_headers.add(key, None if value is None else bytearray(value))
        record = jvm.org.apache.kafka.clients.producer.ProducerRecord(
            topic, None, jvm.java.lang.Long(timestamp),
            None if encoded.key is None else bytearray(encoded.key),
            None if encoded.value is None else bytearray(encoded.value), record_headers)
        self._pending.append(self._producer.send(record))

    def flush(self) -> None:
        self._producer.flush()
        pending, self._pending = self._pending, []
        for future in pending:
            try:
                future.get()  # type: ignore[attr-defined]
            except Exception as error:  # the JVM's delivery failure, as the test's error
                raise RunKafkaError(f"producing an input record failed: {error}") from error

    def close(self) -> None:
        self._producer.close()
