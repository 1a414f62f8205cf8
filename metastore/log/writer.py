"""The single-writer protocol: validate against a caught-up snapshot, then write in one transaction.

Requests queue on the node (:mod:`metastore.log.group_commit`); under the node's write lock a
batch of them, oldest first, is written as one:

1. become the writer: a transactional producer whose transactional.id is the service id. A
   producer that is still the newest epoch is reused; ``init_transactions`` (which fences every
   other node) runs only for a new producer;
2. begin a transaction;
3. read the last stable offset and wait until the replica has applied everything below it;
4. a request whose id is already in the image is answered with its first outcome (idempotent
   retry);
5. validate each request's statements in order on that snapshot, as the batch's earlier valid
   requests leave it (plus topic facts from Kafka); a request with a validation error is
   answered with it, writes nothing and leaves the others as if it had not been sent. A
   statement that only reads is answered as it is validated, on the catalog as the request's
   earlier statements left it, by the node's :data:`ReadAnswer` (so it gets the entity it gets
   in a request of its own). A request over a topic that an earlier request of the batch
   deletes (DROP ... DELETE TOPIC: Kafka deletes it after the commit) waits for the next
   transaction;
6. produce one record per write statement of the valid requests and commit;
7. apply the records to the replica (the bytes the log holds at the offsets the commit gave
   them, when the replica stands right before them; else wait, bounded, until it has read
   them), delete the topics the DROPs name (best effort: the statements are written), and
   answer each request with its own offsets; a failure after the commit is answered from the
   log. No verdict that may rest on an earlier
   request of the batch is given before the transaction is over (a retried request id is
   answered from the log at once).

Fenced, aborted or timed-out attempts discard the producer (a new ``init_transactions`` settles
the old transaction either way) and retry the batch with jittered exponential backoff; a
request whose deadline comes first leaves it with :class:`NotWrittenError`, which says it was
NOT written. When the last commit failed in a way that may hide a success, the log is asked
first: a written request gets its outcome, and when the log cannot tell yet
:class:`OutcomeUnknownError` says a retry with the same request id will. An error no retry can
change (missing authorization) fails the batch at once; a topic Kafka refuses to create fails
its request alone, and the others are validated again without it. The deadline covers the
whole request, the wait in the queue included, and every Kafka call is given only the time the
batch's earliest deadline leaves. Topics a failed request created are deleted once the settled
log shows it was not written and no source uses them (:mod:`metastore.log.unused_topics`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from metastore.catalog.exceptions import (
    RequestIdReusedError,
    TooLargeError,
    TopicDeletedError,
    TopicError,
)
from metastore.catalog.image import Image
from metastore.catalog.model import RequestOutcome
from metastore.core.exceptions import MetastoreError
from metastore.core.faults import NO_FAULTS, Faults
from metastore.core.limits import MAX_RECORD_BYTES, RequestLimits
from metastore.engine import access, ddl_rules, responses, topics
from metastore.engine.asserts import SchemaFacts
from metastore.engine.overrides import NO_OVERRIDES, ConfigOverrides
from metastore.engine.validation import (
    Outcome,
    QueryPlanner,
    Read,
    RuntimeCheck,
    Skip,
    TopicFacts,
    TopicSpec,
    Validator,
    Write,
)
from metastore.kafka.admin import Admin
from metastore.kafka.consumer import EndOffsetProbe, Record
from metastore.kafka.exceptions import KafkaClientError, KafkaTopicError, TransactionAbortedError
from metastore.kafka.producer import TransactionalProducer
from metastore.kafka.settings import KafkaSettings
from metastore.log.exceptions import (
    CatchUpTimeoutError,
    NotReadyError,
    NotWrittenError,
    OutcomeUnknownError,
)
from metastore.log.group_commit import Queued, QueueStats, WriteQueue
from metastore.log.reader import LogReplica, NodeState
from metastore.log.record import CommandRecord
from metastore.log.unused_topics import UnusedTopics
from metastore.sql.statements import CreateAsSelect, CreateSource, Statement

log = logging.getLogger(__name__)

Entity = dict[str, Any]
ReadAnswer = Callable[[Read, Image, ConfigOverrides], Entity]
"""The entity of a statement that only reads, validated on an image under a configuration."""


def catalog_answer(outcome: Read, image: Image, config: ConfigOverrides) -> Entity:
    """A read answered from the catalog alone (a node's reader also asks Spark and Kafka)."""
    return responses.read_entity(outcome.statement, image, config=config)


TOPIC_DELETION_PATIENCE_SECONDS = 20.0
"""How long the writer waits for Kafka to stop listing a DROP's topic before the next batch: a
CREATE over that topic validated while it is still listed creates nothing and is left over no
topic once Kafka deletes it. Kafka takes well under a second on a quiet cluster; on a loaded one
(two cores at load 8) it took more than the 5 s this was."""


@dataclass(frozen=True)
class WriterOptions:
    reuse_producer: bool = True
    """False gives ksqlDB's behaviour: a new producer and init_transactions for every request,
    each request in a transaction of its own."""
    request_timeout: float = 30.0
    apply_timeout: float = 10.0
    backoff_initial: float = 0.05
    backoff_max: float = 1.0
    transaction_timeout_ms: int = 10_000
    max_batch_requests: int = 64
    """Group commit: the most queued requests written in one transaction (1: one each)."""
    batch_linger_ms: float = 0.0
    """How long a writer that finds fewer queued requests waits for more (0: writes at once)."""


class KafkaTopicFacts:
    """Topic facts read from the cluster, each within what is left of ``deadline``
    (``time.monotonic()``; None: the admin client's own timeout). One instance answers one
    transaction attempt: a question asked again (the requests of a batch naming the same topic)
    is answered from the first metadata request, at most ``max_remembered`` topics."""

    def __init__(self, admin: Admin, deadline: float | None = None,
                 max_remembered: int = 1024) -> None:
        self._admin = admin
        self._deadline = deadline
        self._partitions: dict[str, int | None] = {}
        self._brokers: int | None = None
        self._max = max_remembered

    def _timeout(self) -> float | None:
        return None if self._deadline is None else _left(self._deadline)

    def partitions(self, topic: str) -> int | None:
        if topic in self._partitions:
            return self._partitions[topic]
        info = self._admin.describe(topic, self._timeout())
        partitions = None if info is None else info.partitions
        if len(self._partitions) < self._max:
            self._partitions[topic] = partitions
        return partitions

    def prefetch(self, topics: Sequence[str]) -> None:
        """Ask about ``topics`` now (validation will), each failure left for validation to meet."""
        for topic in topics:
            try:
                self.partitions(topic)
            except (KafkaClientError, MetastoreError):
                continue

    def broker_count(self) -> int | None:
        if self._brokers is None:
            self._brokers = self._admin.broker_count(self._timeout())
        return self._brokers


MAX_PREFETCHED_TOPICS = 16


def named_topics(statements: Sequence[Statement]) -> list[str]:
    """The user topics the statements name in ``WITH (KAFKA_TOPIC=...)``, which validation will
    ask Kafka about: asked ahead, while the log's end offset is read (at most
    :data:`MAX_PREFETCHED_TOPICS`)."""
    found: list[str] = []
    for statement in statements:
        topic = ddl_rules.with_clause_value(statement.properties, "KAFKA_TOPIC") if isinstance(
            statement, CreateSource | CreateAsSelect) else None
        if not topic or topic in found or topics.is_reserved(topic):
            continue
        try:
            topics.check_name(topic)
        except MetastoreError:
            continue
        found.append(topic)
        if len(found) == MAX_PREFETCHED_TOPICS:
            break
    return found


def _left(deadline: float, floor: float = 0.1) -> float:
    return max(deadline - time.monotonic(), floor)


Authorize = Callable[[list[access.Need]], None]
"""Raises :class:`~metastore.catalog.exceptions.TopicAuthorizationError` for needs its user may
not have."""


@dataclass
class _Request:
    """One request across its attempts."""

    request_id: str
    submitter: str
    digest: str
    deadline: float
    config: ConfigOverrides = NO_OVERRIDES
    """The request's ksqlDB configuration overrides (``streamsProperties``)."""
    schemas: SchemaFacts | None = None
    """The Schema Registry's answers the request's statements need, asked before it queued
    (:func:`metastore.engine.inference.prefetch`); None without a registry."""
    created: dict[str, TopicSpec] = field(default_factory=dict)
    """Topics an attempt created, by name (kept across attempts: only a request that fails
    removes them)."""
    maybe_committed: bool = False
    """An attempt's commit may have reached the coordinator, and no later attempt has yet seen
    the log without it."""
    command_ids: tuple[str, ...] = ()
    """The commands the request's last validation wrote (their records' keys)."""
    authorize: Authorize | None = None
    """Refuses what the requesting user may not touch (:mod:`metastore.engine.access`);
    None: every statement is the requester's to write."""


def _reason(error: BaseException) -> str:
    """What went wrong, without another request's instructions."""
    return error.reason if isinstance(error, OutcomeUnknownError) else str(error)


def _request_of(item: Queued) -> _Request:
    assert isinstance(item.payload, _Request)
    return item.payload


@dataclass
class _Validated:
    """A request of a batch, validated: what it writes and how it is answered."""

    item: Queued
    request: _Request
    outcomes: list[Outcome]
    answers: dict[int, Entity]
    """The entities of its statements that do not write, by position."""
    writes: list[Write]
    records: list[tuple[bytes, bytes]]
    image: Image
    """The image with its writes (and the batch's earlier requests')."""
    planned_topics: dict[str, int | None]
    """The topics it and the batch's earlier requests create (partitions) or delete (None)."""

    def entities(self, applied: Image, offsets: Sequence[int]) -> list[Entity]:
        """Its answer, once its ``offsets`` are applied in ``applied``."""
        offset_of = {id(write): offset for write, offset in zip(self.writes, offsets, strict=True)}
        return [responses.current_status(o.statement, o.command, applied, offset_of[id(o)])
                if isinstance(o, Write) else self.answers[i] for i, o in enumerate(self.outcomes)]


@dataclass
class _Batch:
    """The requests of one transaction as they are validated, each on the image the ones
    before it leave."""

    snapshot: Image
    next_offset: int
    planned: dict[str, int | None] = field(default_factory=dict)
    written: list[_Validated] = field(default_factory=list)
    reads_only: list[_Validated] = field(default_factory=list)
    rejected: list[tuple[Queued, BaseException]] = field(default_factory=list)

    def add(self, validated: _Validated) -> None:
        if not validated.records:
            self.reads_only.append(validated)
            return
        self.written.append(validated)
        validated.request.command_ids = tuple(key.decode() for key, _ in validated.records)
        self.snapshot, self.planned = validated.image, validated.planned_topics
        self.next_offset += len(validated.records)


def request_digest(statements: Sequence[Statement],
                   config: ConfigOverrides = NO_OVERRIDES) -> str:
    """What a request id is bound to: the request's statements, in order, and its configuration
    overrides when it has any (a request without is digested as before overrides existed)."""
    digest = hashlib.sha256()
    for statement in statements:
        digest.update(statement.text.encode())
        digest.update(b"\0")
    if config.values:
        digest.update(json.dumps(config.to_json(), sort_keys=True).encode())
    return digest.hexdigest()


@dataclass
class WriterStats:
    requests: int = 0
    transactions: int = 0
    fenced_retries: int = 0
    producers_created: int = 0
    applied_here: int = 0
    """Transactions whose records the writer applied to the replica itself."""


class CommandWriter:
    def __init__(self, settings: KafkaSettings, topic: str, service_id: str, node_id: str,
                 replica: LogReplica, admin: Admin, options: WriterOptions | None = None,
                 facts: TopicFacts | None = None, limits: RequestLimits | None = None,
                 faults: Faults = NO_FAULTS, answer_read: ReadAnswer = catalog_answer,
                 *, runtime_check: RuntimeCheck | None,
                 planner: QueryPlanner | None = None) -> None:
        """``runtime_check``: whether the query runtime can run a persistent query, asked at
        validation (the runtime's own rule, given by the node; None: the catalog's rules only);
        ``planner``: the plan a persistent query's command keeps (None: commands without)."""
        self._settings = settings
        self._runtime_check = runtime_check
        self._planner = planner
        self._topic = topic
        self._service_id = service_id
        self._node_id = node_id
        self._replica = replica
        self._admin = admin
        self._facts = facts
        self._limits = limits or RequestLimits()
        self.options = options or WriterOptions()
        self._probe = EndOffsetProbe(settings, topic, group_id=f"{service_id}-{node_id}-probe")
        self._high_watermark = EndOffsetProbe(settings, topic, committed=False,
                                              group_id=f"{service_id}-{node_id}-hw")
        self._producer: TransactionalProducer | None = None
        self._last_written: int | None = None
        self._queue = WriteQueue(  # ksqlDB's way, a producer per request, writes one at a time
            self.options.max_batch_requests if self.options.reuse_producer else 1,
            self.options.batch_linger_ms / 1000)
        self.stats = WriterStats()
        self._faults = faults
        self._answer_read = answer_read
        self._unused_topics = UnusedTopics(
            admin, lambda patience: self._is_settled(patience, quiet=False),
            lambda: self._replica.image, faults.before_deleting_unused_topics)
        self._prefetcher = ThreadPoolExecutor(1, thread_name_prefix="metastore-topic-facts")
        """Asks about a batch's topics while the writer reads the log's end offset."""

    def close(self) -> None:
        with self._queue.lock:
            self._discard_producer()
            self._probe.close()
            self._high_watermark.close()
            self._prefetcher.shutdown(wait=True)

    # -- public --------------------------------------------------------------------------------
    def submit(self, statements: Sequence[Statement], request_id: str, submitter: str = "",
               timeout: float | None = None,
               config: ConfigOverrides = NO_OVERRIDES,
               schemas: SchemaFacts | None = None,
               authorize: Authorize | None = None) -> list[Entity]:
        """Validate and write ``statements`` atomically; one entity per statement. ``config``:
        the request's configuration overrides; ``schemas``: the registry's answers its CREATE
        statements infer columns from; ``authorize``: refuses, at validation, a statement that
        needs a topic its user may not touch. Requests that queue meanwhile are written with it, in
        one transaction (:mod:`metastore.log.group_commit`)."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.options.request_timeout)
        request = _Request(request_id, submitter, request_digest(statements, config), deadline,
                           config, schemas, authorize=authorize)
        try:
            return self._queue.run(Queued(statements, request_id, deadline, payload=request),
                                   self._write_batch)
        except OutcomeUnknownError as error:
            raise error.with_commands(request.command_ids) from error.__cause__

    @property
    def queue_stats(self) -> QueueStats:
        return self._queue.stats

    @property
    def queued(self) -> int:
        """Requests waiting for the write lock, not yet taken into a batch."""
        return self._queue.waiting

    def _write_batch(self, batch: list[Queued]) -> None:
        """Write ``batch`` (under the write lock), retrying until each request's deadline, and
        answer every request in it."""
        self.stats.requests += len(batch)
        backoff = self.options.backoff_initial
        attempts = 0
        live = batch
        while live:
            failures: list[tuple[Queued, BaseException]] = []
            cause: BaseException | None = None
            pause = 0.0
            try:
                self.check_writable()
                attempts += 1
                failures = self._attempt(live)
            except KafkaClientError as error:
                self._discard_producer()
                cause = error
                if not error.retriable:
                    failures = [(item, NotWrittenError(f"The statement was NOT written to the "
                                                       f"command log: {error}")) for item in live]
                else:
                    self.stats.fenced_retries += 1
                    pause = random.uniform(0, backoff)
                    backoff = min(backoff * 2, self.options.backoff_max)
                    failures = [(item, NotWrittenError(
                        f"The statement was NOT written to the command log after {attempts} "
                        f"attempt(s): {error}")) for item in live
                        if time.monotonic() + pause >= item.deadline]
            except CatchUpTimeoutError as error:  # the earliest deadline bounded the wait
                now = time.monotonic()
                failures = [(item, error) for item in live if item.deadline <= now] or [
                    (item, error) for item in live]
            except Exception as error:  # not ready, or not a Kafka failure
                cause = error
                failures = [(item, error) for item in live]
            self._settle(failures, cause)
            live = [item for item in live if not item.finished]
            if live and pause:
                log.info("write attempt %d failed (%s); retrying", attempts, cause)
                time.sleep(pause)

    def _settle(self, failures: list[tuple[Queued, BaseException]],
                cause: BaseException | None = None) -> None:
        """Answer each failed request with its error, unless the log shows it was written (then
        with its outcome there); remove the topics the attempts of those not written created,
        before answering (a request answered NOT written leaves no topic behind)."""
        pending = [(item, error) for item, error in failures if not item.finished]
        if not pending:
            return
        unsure = any(_request_of(item).maybe_committed for item, _ in pending)
        settled = unsure and self._is_settled(patience=2.0)
        image = self._replica.image
        outcomes: list[tuple[Queued, list[Entity] | BaseException]] = []
        not_written: list[_Request] = []
        for item, given in pending:
            error = given
            request = _request_of(item)
            if request.maybe_committed and settled:
                written = image.requests.get(request.request_id)
                if written is not None:
                    try:
                        answer: list[Entity] | BaseException = self._replayed(
                            item.statements, written, image, request.config)
                    except Exception as failure:  # it is written; only its answer failed
                        answer = OutcomeUnknownError(
                            f"The request was written, but its answer could not be made "
                            f"({failure}).", request.request_id, request.command_ids)
                    outcomes.append((item, answer))
                    continue
                request.maybe_committed = False
                if isinstance(error, OutcomeUnknownError):  # the log settled it: not written
                    error = NotWrittenError(f"The statement was NOT written to the command log: "
                                            f"{error.reason}")
            if request.maybe_committed:
                outcomes.append((item, OutcomeUnknownError(
                    f"The request failed after its transaction was sent to commit "
                    f"({_reason(cause or error)}).", request.request_id, request.command_ids)))
                continue
            if request.created:
                not_written.append(request)
            outcomes.append((item, error))
        if not_written:
            self._unused_topics.remove([(request.request_id, request.created)
                                        for request in not_written])
        for item, outcome in outcomes:
            if isinstance(outcome, BaseException):
                item.fail(outcome)
            else:
                item.answer(outcome)

    # -- protocol ------------------------------------------------------------------------------
    def check_writable(self) -> None:
        """Refuse a write (NotReadyError) unless this node is READY."""
        state = self._replica.state
        if state is NodeState.DEGRADED:
            degradation = self._replica.degradation
            reason = degradation.describe() if degradation else "unknown"
            raise NotReadyError(f"This node is DEGRADED ({reason}); it refuses writes.")
        if state is not NodeState.READY:
            raise NotReadyError(f"This node is {state.value}; it accepts writes once READY.")

    def _caught_up_target(self, end: int) -> int:
        """The position the replica must reach before validating against its image.

        Normally the last stable offset. When this node wrote the last transaction and nothing
        followed it, the one offset the replica may not have passed yet is that transaction's own
        commit marker: the image already holds every record, so waiting for the marker is skipped.
        """
        last = self._last_written
        if last is not None and end == last + 2 and self._replica.position == last + 1:
            return last + 1
        return end

    def _await_open_transaction(self, patience: float = 0.2) -> None:
        """Give another node's committing transaction a moment before fencing it.

        The coordinator refuses a new epoch while the previous transaction's markers are being
        written (CONCURRENT_TRANSACTIONS), and librdkafka then retries only after 500 ms. While
        the last stable offset trails the high watermark a transaction is open; when it closes
        within ``patience`` the new producer initialises at once.
        """
        deadline = time.monotonic() + patience
        try:
            while time.monotonic() < deadline:
                if self._probe.end_offset(timeout=2) >= self._high_watermark.end_offset(timeout=2):
                    return
                time.sleep(0.005)
        except KafkaClientError:
            return

    def _producer_for_request(self, deadline: float) -> TransactionalProducer:
        if self._producer is None:
            if self.stats.producers_created:
                self._await_open_transaction()
            producer = TransactionalProducer(self._settings, self._service_id,
                                             timeout_ms=self.options.transaction_timeout_ms)
            self.stats.producers_created += 1
            try:
                producer.init(_left(deadline))
            except KafkaClientError:
                producer.close()
                raise
            self._producer = producer
        return self._producer

    def _discard_producer(self) -> None:
        self._last_written = None
        if self._producer is not None:
            self._producer.close()
            self._producer = None

    def _attempt(self, live: list[Queued]) -> list[tuple[Queued, BaseException]]:
        """One transaction for the requests of ``live``: each validated in order on the image
        the ones before it leave, the valid ones written together. Answers the requests it
        settles; returns those it rejects, to be failed once the transaction is over. A request
        whose topic Kafka refuses is rejected alone, and the others are left unanswered for
        another attempt (they were validated with it)."""
        deadline = min(item.deadline for item in live)
        producer = self._producer_for_request(deadline)
        producer.begin()
        committing = False
        batch: _Batch | None = None
        facts = self._facts or KafkaTopicFacts(self._admin, deadline)
        prefetched = self._prefetch(live, facts)
        try:
            image, end = self._caught_up_image(deadline, prefetched)
            batch = _Batch(image, end)
            for item in live:
                self._take(batch, item, image, facts)
            if not batch.written:
                producer.abort()
                self._answer_reads(batch, self._replica.image)
                return batch.rejected
            refused = self._create_topics_of(batch.written, deadline)
            if refused is not None:
                producer.abort()
                return [refused]
            for validated in batch.written:
                for key, value in validated.records:
                    producer.produce(self._topic, key, value)
            if self._faults.before_commit is not None:
                self._faults.before_commit(producer)
            committing = True
            offsets = producer.commit(_left(deadline, floor=1.0))
            self._last_written = offsets[-1] if offsets else None
            self.stats.transactions += 1
        except BaseException as error:
            if producer.in_transaction:
                producer.abort()
            if committing and batch is not None and not isinstance(error,
                                                                   TransactionAbortedError):
                for validated in batch.written:  # the commit may have reached the coordinator
                    validated.request.maybe_committed = True
            raise
        finally:
            if not self.options.reuse_producer:
                self._discard_producer()
        return self._settle_committed(batch, offsets, image)

    def _prefetch(self, live: list[Queued], facts: TopicFacts) -> Future[Any] | None:
        """Kafka's answers about the topics the requests name, asked while the node catches
        up (both round trips overlap; validation reads the answers)."""
        named = list(dict.fromkeys(topic for item in live
                                   for topic in named_topics(item.statements)))
        if not named or not isinstance(facts, KafkaTopicFacts):
            return None
        return self._prefetcher.submit(facts.prefetch, named[:MAX_PREFETCHED_TOPICS])

    def _caught_up_image(self, deadline: float, prefetched: Future[Any] | None
                         ) -> tuple[Image, int]:
        """The image once this node has applied the log up to its end offset, which the batch
        is validated against, and that offset."""
        end = self._caught_up_target(self._probe.end_offset(timeout=_left(deadline)))
        if prefetched is not None:
            prefetched.result()
        if not self._replica.wait_for_position(end, max(deadline - time.monotonic(), 0)):
            self.check_writable()
            raise CatchUpTimeoutError(
                f"Timed out waiting for this node to apply the command log up to offset {end}",
                end)
        return self._replica.image, end

    def _take(self, batch: _Batch, item: Queued, image: Image, facts: TopicFacts) -> None:
        """Validate one request into the batch: written, read only, answered from the log (a
        request id seen before), rejected, or left unanswered for the next transaction."""
        request = _request_of(item)
        prior = image.requests.get(request.request_id) if request.request_id else None
        if prior is not None:
            if prior.digest and prior.digest != request.digest:
                batch.rejected.append((item, RequestIdReusedError(
                    f"The request id {request.request_id} was already used for another "
                    f"request (at offset {prior.offsets[0]}); use a new id for a new "
                    f"request.")))
            else:
                item.answer(self._replayed(item.statements, prior, image, request.config))
            return
        request.maybe_committed = False  # a new epoch settled earlier attempts
        try:
            validated = self._validate(item, batch.snapshot, facts, batch.next_offset,
                                       batch.planned)
        except KafkaClientError as error:
            if error.retriable:
                raise
            batch.rejected.append((item, NotWrittenError(  # about this request's topic alone
                f"The statement was NOT written to the command log: {error}")))
            return
        except TopicDeletedError as error:
            if not any(error.name in write.topics_to_delete
                       for earlier in batch.written for write in earlier.writes):
                batch.rejected.append((item, error))  # its own DROP deletes the topic
            # else left unanswered: the next transaction writes it, after the DROP
            return
        except Exception as error:  # this request is invalid; the others go on
            batch.rejected.append((item, error))
            return
        batch.add(validated)

    def _create_topics_of(self, written: list[_Validated], deadline: float
                          ) -> tuple[Queued, BaseException] | None:
        """Create the topics the written requests create; the request Kafka refuses one of."""
        for validated in written:
            request = validated.request
            try:
                for write in validated.writes:
                    for topic in write.topics_to_create:
                        if self._create_topic(topic, deadline):
                            request.created[topic.name] = topic
            except TopicError as error:
                return validated.item, error
        return None

    def _settle_committed(self, batch: _Batch, offsets: list[int], image: Image
                          ) -> list[tuple[Queued, BaseException]]:
        """Apply and answer a committed batch: whatever fails from here on, each request's
        outcome is in the log."""
        written = batch.written
        try:
            self._apply_committed(written, offsets, image)
        except Exception as failure:
            for validated in written:
                validated.request.maybe_committed = True
            self._settle([(validated.item, failure) for validated in written], failure)
            self._answer_reads(batch, self._replica.image)
            return batch.rejected  # a request left for the next transaction stays in the batch
        self._delete_topics(written)
        applied = self._replica.image
        taken = 0
        for validated in written:
            count = len(validated.records)
            validated.item.answer(validated.entities(applied, offsets[taken:taken + count]))
            taken += count
        self._answer_reads(batch, applied)
        return batch.rejected

    @staticmethod
    def _answer_reads(batch: _Batch, image: Image) -> None:
        for validated in batch.reads_only:
            validated.item.answer(validated.entities(image, []))

    def _apply_committed(self, written: list[_Validated], offsets: list[int],
                         image: Image) -> None:
        """Apply the committed records to the replica at once when it stands where the batch was
        validated (else wait, bounded, until it has read them)."""
        expected = sum(len(validated.records) for validated in written)
        if len(offsets) != expected:
            raise OutcomeUnknownError(
                f"The commit reported {len(offsets)} records where {expected} were sent.",
                written[0].request.request_id,
                [command for validated in written for command in validated.request.command_ids])
        committed = [Record(offset, key, value) for (key, value), offset in zip(
            (record for validated in written for record in validated.records), offsets,
            strict=True)]
        if self._replica.apply_written(committed, image):
            self.stats.applied_here += 1
        else:
            self._replica.wait_for_position(offsets[-1] + 1, self.options.apply_timeout)

    def _delete_topics(self, written: list[_Validated],
                       patience: float = TOPIC_DELETION_PATIENCE_SECONDS) -> None:
        """Delete the topics of the batch's DROP ... DELETE TOPIC statements, which are written,
        and wait (at most ``patience`` seconds) until Kafka's metadata no longer shows them, so a
        request validated next does not find them there. A topic Kafka does not delete is left,
        with a warning, and fails no request."""
        deadline = time.monotonic() + patience
        for validated in written:
            for write in validated.writes:
                for topic_name in write.topics_to_delete:
                    try:
                        if not self._admin.delete_until_gone(topic_name, _left(deadline, 0.5)):
                            log.warning("topic %s is still listed after its deletion",
                                        topic_name)
                    except Exception as error:  # the statement is in the log all the same
                        log.warning("deleting topic %s failed: %s", topic_name, error)

    def _validate(self, item: Queued, snapshot: Image, facts: TopicFacts, first_offset: int,
                  earlier_topics: dict[str, int | None]) -> _Validated:
        """Validate one request on ``snapshot`` (the image with the batch's earlier requests),
        its records to be written from ``first_offset``."""
        request = _request_of(item)
        validator = Validator(snapshot, facts, first_offset=first_offset, limits=self._limits,
                              runtime_check=self._runtime_check, config=request.config,
                              earlier_topics=earlier_topics, schemas=request.schemas,
                              schemas_checked=True, planner=self._planner)
        outcomes: list[Outcome] = []
        answers: dict[int, Entity] = {}  # of the statements that do not write
        for statement in item.statements:
            stopped = None if request.authorize is None else access.queries_before(
                statement, validator.image)
            outcome = validator.validate(statement)
            if isinstance(outcome, Write) and request.authorize is not None:
                request.authorize(access.of_write(outcome, validator.image, stopped))
            if not isinstance(outcome, Write):  # now: the image views the delta
                answers[len(outcomes)] = self._answer(outcome, validator.image, validator.config)
            outcomes.append(outcome)
        writes = [o for o in outcomes if isinstance(o, Write)]
        records = [self._encode(write, request.request_id, request.submitter, request.digest)
                   for write in writes]
        return _Validated(item, request, outcomes, answers, writes, records,
                          validator.image if writes else snapshot, validator.planned_topics)

    def _encode(self, write: Write, request_id: str, submitter: str,
                digest: str) -> tuple[bytes, bytes]:
        record = CommandRecord(write.command, write.statement.text, request_id, self._node_id,
                               submitter, digest)
        key, value = record.encode()
        if len(key) + len(value) > MAX_RECORD_BYTES:
            raise TooLargeError(f"The command record of this statement would be "
                                f"{len(key) + len(value)} bytes; the limit is {MAX_RECORD_BYTES}."
                                f" Split the statement or the request.")
        return key, value

    def _create_topic(self, topic: TopicSpec, deadline: float) -> bool:
        """Create a topic a statement needs; whether this call created it."""
        try:
            return self._admin.create(topic.name, topic.partitions, topic.replicas,
                                      config=dict(topic.config),
                                      timeout=_left(deadline, floor=1.0))
        except KafkaTopicError as error:
            if error.retriable:
                raise
            raise TopicError(error.message, topic.name) from error

    def _is_settled(self, patience: float, *, quiet: bool = True) -> bool:
        """The replica has applied the whole committed log, every transaction of an earlier
        epoch settled. A producer of a new epoch is made first: its ``init_transactions``
        completes or aborts every transaction an earlier producer of the service left, so a
        commit still in flight from a discarded producer cannot land after this answer.
        ``quiet``: also no transaction open at all (one open now is of a newer epoch, begun
        after this producer's)."""
        try:
            self._discard_producer()
            self._producer_for_request(time.monotonic() + patience)
            end = self._probe.end_offset(timeout=patience)
            if quiet and end < self._high_watermark.end_offset(timeout=patience):
                return False
        except KafkaClientError:
            return False
        return self._replica.wait_for_position(end, patience)

    def _answer(self, outcome: Skip | Read, image: Image, config: ConfigOverrides) -> Entity:
        if isinstance(outcome, Skip):
            return responses.warning(outcome.statement, outcome.message)
        return self._answer_read(outcome, image, config)

    def _replayed(self, statements: Sequence[Statement], prior: RequestOutcome,
                  image: Image, config: ConfigOverrides) -> list[Entity]:
        """The answer to a retried request whose records are already in the log. Its
        statements that do not write are answered again, in order, on the image that holds the
        whole request (one that no longer applies there answers a warning)."""
        entities: list[Entity] = []
        offsets = iter(zip(prior.offsets, prior.command_ids, strict=True))
        reads = Validator(image, self._facts or KafkaTopicFacts(self._admin), limits=self._limits,
                          config=config, schemas_checked=True)
        for statement in statements:
            if not statement.writes_log:
                try:
                    outcome = reads.validate(statement)
                    assert not isinstance(outcome, Write)
                    entities.append(self._answer(outcome, image, reads.config))
                except MetastoreError as error:
                    entities.append(responses.warning(statement, f"Not answered again on this "
                                                                 f"retry: {error.message}"))
                continue
            found = next(offsets, None)
            if found is None:
                entities.append(responses.warning(statement, "Already applied by an earlier "
                                                             "attempt of this request."))
                continue
            offset, command_id = found
            entities.append(responses.already_written(statement, command_id, offset))
        return entities
