"""Producers whose errors are typed: a plain one and a transactional one for the single writer.

:class:`RecordProducer` queues records and, on :meth:`~RecordProducer.deliver`, waits for them
and reports where they landed or why they did not. :class:`TransactionalProducer` adds the
transactions of the single-writer protocol: ``init()`` bumps the epoch of the transactional.id
and fences every older producer with the same id. A producer that is still the newest epoch may
run any number of transactions; a fenced one raises :class:`ProducerFencedError` and must be
closed and replaced.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from metastore.kafka.exceptions import (
    CommitOutcomeUnknownError,
    KafkaClientError,
    KafkaUnavailableError,
    ProducerFencedError,
    TransactionAbortedError,
)
from metastore.kafka.settings import KafkaSettings, create_client

_FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                           KafkaError.INVALID_PRODUCER_EPOCH})
PERMANENT_CODES = frozenset({
    KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._AUTHENTICATION,
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError.RECORD_LIST_TOO_LARGE, KafkaError.INVALID_RECORD, KafkaError.POLICY_VIOLATION,
    KafkaError.TOPIC_EXCEPTION, KafkaError.INVALID_CONFIG, KafkaError._INVALID_ARG})
"""Errors no retry can change: they fail a request at once (every other error is retried)."""

Headers = Sequence[tuple[str, bytes | None]]

warnings.filterwarnings("ignore", "Producer abort_transaction failed during close",
                        RuntimeWarning)  # a fenced producer's close: nothing is left to abort


def classify(error: KafkaError, action: str) -> KafkaClientError:
    """The typed error for a librdkafka error raised during ``action``."""
    text = f"{action} failed: {error.str()}"
    if error.code() in PERMANENT_CODES:
        return KafkaClientError(text, retriable=False)
    if error.code() in _FENCED_CODES or (error.fatal() and "fenced" in error.str().lower()):
        return ProducerFencedError(text)
    if error.txn_requires_abort():
        return TransactionAbortedError(text)
    if error.code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
                        KafkaError._ALL_BROKERS_DOWN):
        return KafkaUnavailableError(text)
    return KafkaClientError(text, retriable=True)


def call(action: str, fn: Callable[..., object], *args: object) -> None:
    """``fn(*args)``, a librdkafka error raised as its typed error."""
    try:
        fn(*args)
    except KafkaException as exc:
        raise classify(exc.args[0], action) from exc


class RecordProducer:
    """One producer instance; ``timeout_ms`` bounds delivery and every wait.

    ``config`` is passed to librdkafka after the defaults (``linger_ms=0``, the message timeout).
    """

    _fatal_error: type[KafkaClientError] = KafkaClientError
    """What a fatal error without a failed delivery behind it is raised as."""
    _undelivered_error: type[KafkaClientError] = KafkaUnavailableError
    """What records still undelivered when :meth:`deliver` gives up are raised as."""

    def __init__(self, settings: KafkaSettings, timeout_ms: int = 10_000, **config: Any) -> None:
        self._timeout = timeout_ms / 1000
        self._producer = create_client(Producer, settings.config(
            **{"linger_ms": 0, "message_timeout_ms": timeout_ms, **config}))
        self._delivery_error: KafkaError | None = None
        self._delivered: list[int] = []
        self._closed = False

    def _within(self, timeout: float | None) -> float:
        return self._timeout if timeout is None else max(min(timeout, self._timeout), 0.1)

    def produce(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers = (),
                timestamp_ms: int | None = None) -> None:
        """Queue a record; :meth:`deliver` reports where it landed. A full queue is waited on."""
        self._queue(topic, key, value, headers, timestamp_ms, self._on_delivery)

    def send(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        """Queue a record nobody waits for (a heartbeat): its delivery is not reported."""
        self._queue(topic, key, value, (), None, None)
        self._producer.poll(0)

    def _queue(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers,
               timestamp_ms: int | None,
               on_delivery: Callable[[KafkaError | None, Message], None] | None) -> None:
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, headers=list(headers),
                                       timestamp=0 if timestamp_ms is None else timestamp_ms,
                                       on_delivery=on_delivery)
                return
            except KafkaException as exc:
                raise classify(exc.args[0], "produce") from exc
            except BufferError as exc:  # the local queue is full: make room, for a while
                if time.monotonic() >= deadline:
                    raise KafkaClientError(f"produce failed: {exc}", retriable=True) from exc
                self._producer.poll(0.1)

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            if self._delivery_error is None:
                self._delivery_error = error
            return
        offset = message.offset()
        if offset is not None:
            self._delivered.append(offset)

    def deliver(self, timeout: float | None = None) -> list[int]:
        """Wait for every queued record: the offsets of those :meth:`produce` queued since the
        last call, in order. The first record that failed is raised as its typed error; records
        still undelivered after ``timeout`` (the producer's own by default) as unavailable."""
        try:
            remaining = self._producer.flush(self._within(timeout))
        except KafkaException as exc:
            raise classify(exc.args[0], "flush") from exc
        except SystemError as exc:
            # A fatal error (a fenced producer) surfaces while delivery reports are served.
            if self._delivery_error is not None:
                raise classify(self._delivery_error, "produce") from exc
            raise self._fatal_error(f"flush failed: {exc}") from exc
        failed, self._delivery_error = self._delivery_error, None
        if failed is not None:
            raise classify(failed, "produce")
        if remaining:
            raise self._undelivered_error(f"{remaining} record(s) not delivered in time")
        delivered, self._delivered = sorted(self._delivered), []
        return delivered

    def close(self, timeout: float = 0) -> None:
        """Give queued records ``timeout`` seconds to leave, drop the rest and release the
        client: its threads and connections end now, not whenever the garbage collector comes by
        (a writer fenced on every write would otherwise gather producers). Nothing is raised; a
        second call does nothing."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(KafkaException, RuntimeError):
            self._producer.flush(timeout)
        with contextlib.suppress(KafkaException, RuntimeError):
            self._producer.purge()
            self._producer.close()


class TransactionalProducer(RecordProducer):
    """One transactional.id, one producer instance, transactions run one after another."""

    _fatal_error = ProducerFencedError
    _undelivered_error = TransactionAbortedError  # commit() then aborts the transaction

    def __init__(self, settings: KafkaSettings, transactional_id: str,
                 timeout_ms: int = 10_000, linger_ms: int = 0,
                 transaction_timeout_ms: int | None = None) -> None:
        super().__init__(
            settings, timeout_ms, transactional_id=transactional_id, enable_idempotence=True,
            acks="all", linger_ms=linger_ms,
            transaction_timeout_ms=transaction_timeout_ms or max(timeout_ms * 3, 10_000))
        self.transactional_id = transactional_id
        self._transaction: list[int] = []
        self.in_transaction = False

    def init(self, timeout: float | None = None) -> None:
        call("init_transactions", self._producer.init_transactions, self._within(timeout))

    def begin(self) -> None:
        self._delivery_error = None
        self._delivered = []
        self._transaction = []
        call("begin_transaction", self._producer.begin_transaction)
        self.in_transaction = True

    def deliver(self, timeout: float | None = None) -> list[int]:
        delivered = super().deliver(timeout)
        self._transaction.extend(delivered)
        return delivered

    def commit(self, timeout: float | None = None) -> list[int]:
        """Commit and return the offsets of the records produced in this transaction, in order.

        On failure the transaction is aborted (if the producer still can) and the error raised.
        ``timeout`` bounds the flush and the commit together (the producer's own by default).
        """
        deadline = time.monotonic() + self._within(timeout)
        try:
            self.deliver(deadline - time.monotonic())
            try:
                call("commit_transaction", self._producer.commit_transaction,
                     self._within(deadline - time.monotonic()))
            except KafkaUnavailableError as error:
                raise CommitOutcomeUnknownError(error.message) from error
            return sorted(self._transaction)
        except TransactionAbortedError:
            self.abort()
            raise
        finally:
            self.in_transaction = False

    def flush(self) -> None:
        """Deliver produced records to the log without ending the transaction."""
        with contextlib.suppress(KafkaException):
            self._producer.flush(self._timeout)

    def rollback(self, timeout: float | None = None) -> None:
        """Abort the open transaction; a refusal is raised as its typed error."""
        self.in_transaction = False
        call("abort_transaction", self._producer.abort_transaction, self._within(timeout))

    def abort(self) -> None:
        # A fenced or failed producer has nothing left to abort.
        with contextlib.suppress(KafkaClientError):
            self.rollback()

    def close(self, timeout: float = 0) -> None:
        if self.in_transaction:
            self.abort()
        super().close(timeout)
