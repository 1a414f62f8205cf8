"""A transactional producer whose errors are classified for the single-writer protocol.

``init()`` bumps the epoch of the transactional.id and fences every older producer with the same
id. A producer that is still the newest epoch may run any number of transactions; a fenced one
raises :class:`ProducerFencedError` and must be closed and replaced.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from metastore.kafka.exceptions import (
    CommitOutcomeUnknownError,
    KafkaClientError,
    KafkaUnavailableError,
    ProducerFencedError,
    TransactionAbortedError,
)
from metastore.kafka.settings import KafkaSettings

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


class TransactionalProducer:
    """One transactional.id, one producer instance, transactions run one after another."""

    def __init__(self, settings: KafkaSettings, transactional_id: str,
                 timeout_ms: int = 10_000) -> None:
        self.transactional_id = transactional_id
        self._timeout = timeout_ms / 1000
        self._producer = Producer(settings.config(
            transactional_id=transactional_id, enable_idempotence=True, acks="all",
            linger_ms=0, transaction_timeout_ms=max(timeout_ms * 3, 10_000),
            message_timeout_ms=timeout_ms))
        self._delivery_error: KafkaError | None = None
        self._delivered: list[int] = []
        self.in_transaction = False

    def _call(self, action: str, fn: Callable[..., object], *args: object) -> None:
        try:
            fn(*args)
        except KafkaException as exc:
            raise classify(exc.args[0], action) from exc

    def _within(self, timeout: float | None) -> float:
        return self._timeout if timeout is None else max(min(timeout, self._timeout), 0.1)

    def init(self, timeout: float | None = None) -> None:
        self._call("init_transactions", self._producer.init_transactions, self._within(timeout))

    def begin(self) -> None:
        self._delivery_error = None
        self._delivered = []
        self._call("begin_transaction", self._producer.begin_transaction)
        self.in_transaction = True

    def produce(self, topic: str, key: bytes, value: bytes) -> None:
        try:
            self._producer.produce(topic, value=value, key=key, on_delivery=self._on_delivery)
        except KafkaException as exc:
            raise classify(exc.args[0], "produce") from exc
        except BufferError as exc:
            raise KafkaClientError(f"produce failed: {exc}", retriable=True) from exc

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            if self._delivery_error is None:
                self._delivery_error = error
            return
        offset = message.offset()
        if offset is not None:
            self._delivered.append(offset)

    def commit(self, timeout: float | None = None) -> list[int]:
        """Commit and return the offsets of the records produced in this transaction, in order.

        On failure the transaction is aborted (if the producer still can) and the error raised.
        ``timeout`` bounds the flush and the commit together (the producer's own by default).
        """
        deadline = time.monotonic() + self._within(timeout)
        try:
            try:
                remaining = self._producer.flush(self._within(deadline - time.monotonic()))
            except KafkaException as exc:
                raise classify(exc.args[0], "flush") from exc
            except SystemError as exc:
                # A fatal error (a fenced producer) surfaces while delivery reports are served.
                if self._delivery_error is not None:
                    raise classify(self._delivery_error, "produce") from exc
                raise ProducerFencedError(f"flush failed: {exc}") from exc
            if self._delivery_error is not None:
                raise classify(self._delivery_error, "produce")
            if remaining:
                raise TransactionAbortedError(f"{remaining} record(s) not delivered in time")
            try:
                self._call("commit_transaction", self._producer.commit_transaction,
                           self._within(deadline - time.monotonic()))
            except KafkaUnavailableError as error:
                raise CommitOutcomeUnknownError(error.message) from error
            return sorted(self._delivered)
        except TransactionAbortedError:
            self.abort()
            raise
        finally:
            self.in_transaction = False

    def flush(self) -> None:
        """Deliver produced records to the log without ending the transaction."""
        with contextlib.suppress(KafkaException):
            self._producer.flush(self._timeout)

    def abort(self) -> None:
        self.in_transaction = False
        # A fenced or failed producer has nothing left to abort.
        with contextlib.suppress(KafkaException):
            self._producer.abort_transaction(self._timeout)

    def close(self) -> None:
        if self.in_transaction:
            self.abort()
        with contextlib.suppress(KafkaException):
            self._producer.flush(0)
