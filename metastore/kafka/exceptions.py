"""Errors of the Kafka client layer, classified the way the write protocol needs them."""

from __future__ import annotations

from metastore.core.exceptions import MetastoreError


class KafkaClientError(MetastoreError):
    """A Kafka operation failed; ``retriable`` says whether trying again may help."""

    code = "kafka_error"

    def __init__(self, message: str, retriable: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable


class ProducerFencedError(KafkaClientError):
    """Another producer with the same transactional.id initialised after this one."""

    code = "producer_fenced"

    def __init__(self, message: str) -> None:
        super().__init__(message, retriable=True)


class TransactionAbortedError(KafkaClientError):
    """The transaction had to be aborted; nothing of it is visible read_committed."""

    code = "transaction_aborted"

    def __init__(self, message: str) -> None:
        super().__init__(message, retriable=True)


class KafkaUnavailableError(KafkaClientError):
    """The cluster did not answer in time."""

    code = "kafka_unavailable"

    def __init__(self, message: str) -> None:
        super().__init__(message, retriable=True)


class CommitOutcomeUnknownError(KafkaUnavailableError):
    """``commit_transaction`` did not answer in time: the transaction may yet commit or abort.

    The next ``init_transactions`` on the same transactional.id settles it either way.
    """

    code = "commit_outcome_unknown"


class KafkaTopicError(KafkaClientError):
    """Kafka refused or failed an operation on a topic: it is missing, cannot be created or
    deleted, or has the wrong shape. (Not :class:`metastore.catalog.exceptions.TopicError`,
    a statement naming a topic it may not use.)"""

    code = "kafka_topic_error"

    def __init__(self, topic: str, message: str) -> None:
        super().__init__(message)
        self.topic = topic


class MissingSourceTopicError(KafkaTopicError):
    """A topic a query reads does not exist (ksqlDB's ``MissingSourceTopicException``: a USER
    error of the query)."""

    code = "missing_source_topic"
    user_error = True

    def __init__(self, topic: str) -> None:
        super().__init__(topic, f"Source topic {topic} does not exist.")
