"""Why a statement was rejected: typed errors with the object they concern.

Messages follow ksqlDB's wording; ``code`` is the machine-readable reason. Each is answered as
ksqlDB's 40001 (bad statement) by the table of :mod:`metastore.server.http.error_codes`. Not to be
confused with the Kafka client's errors: :class:`TopicError` is a statement naming a topic it
may not use or create, :class:`metastore.kafka.exceptions.KafkaTopicError` is Kafka failing an
operation on a topic.
"""

from __future__ import annotations

from metastore.core.exceptions import MetastoreError


class StatementError(MetastoreError):
    """A statement that cannot be executed against the current catalog.

    ``location`` is where in the script the offending node starts (line, column; both from 1),
    for the errors ksqlDB reports with their node's location: the message then starts with
    ksqlDB's ``Line: L, Col: C: `` and ``line`` and ``column`` carry it too. ``stage`` is the
    text ksqlDB puts before an error of the stage that found it (:data:`PREPARING`)."""

    code = "statement_error"

    def __init__(self, message: str, name: str | None = None, *,
                 location: tuple[int, int] | None = None, stage: str = "") -> None:
        if location is not None:
            message = f"Line: {location[0]}, Col: {location[1]}: {message}"
        super().__init__(stage + message)
        self.name = name
        self.line: int | None = location[0] if location is not None else None
        self.column: int | None = location[1] if location is not None else None


PREPARING = "Exception while preparing statement: "
"""How ksqlDB words an error found while it resolves a statement's sources and columns before
analysing it (its AstSanitizer: unknown sources, ambiguous columns, INSERT INTO's target)."""


class SourceExistsError(StatementError):
    code = "source_exists"


class SourceNotFoundError(StatementError):
    code = "source_not_found"


class IncompatibleSourceKindError(StatementError):
    code = "incompatible_source_kind"


class DependentsExistError(StatementError):
    code = "dependents_exist"


class UnknownQueryError(StatementError):
    code = "unknown_query"


class SchemaError(StatementError):
    """Columns, keys or types that ksqlDB's rules do not allow."""

    code = "schema_error"


class FormatError(StatementError):
    code = "format_error"


class PropertyError(StatementError):
    """A WITH-clause property that is missing, unknown, or has an invalid value."""

    code = "property_error"


class TopicError(StatementError):
    code = "topic_error"


class TopicDeletedError(TopicError):
    """A statement uses a topic that an earlier statement of the same transaction deletes (DROP
    ... DELETE TOPIC): Kafka deletes it only once the transaction is committed, so the statement
    would stand over a topic about to vanish. ``name``: the topic. The writer writes a request
    whose topic another request of the batch deletes in the next transaction."""

    code = "topic_deleted"

    def __init__(self, topic: str) -> None:
        super().__init__(f"Topic '{topic}' is deleted by an earlier DROP ... DELETE TOPIC of this "
                         f"request; use it in a later request, once the topic is gone.", topic)


class UnknownTopicError(TopicError):
    """PRINT names a topic the cluster does not have (ksqlDB answers it as a bad request)."""

    code = "unknown_topic"


class TypeExistsError(StatementError):
    code = "type_exists"


class TypeNotFoundError(StatementError):
    code = "type_not_found"


class QueryError(StatementError):
    """A SELECT that cannot be analysed: unknown columns, wrong result type, missing key."""

    code = "query_error"


class RequestIdReusedError(StatementError):
    """A request id already names another request (ids bind to their content)."""

    code = "request_id_reused"


class TooLargeError(StatementError):
    """A statement, record or response beyond the bounds of metastore.core.limits."""

    code = "too_large"


class UnsupportedStatementError(StatementError):
    code = "unsupported"


class UpgradeError(StatementError):
    """A CREATE OR REPLACE (or ALTER) whose new source or query cannot replace the existing one
    (ksqlDB's upgrade rules, :mod:`metastore.engine.upgrades`)."""

    code = "not_upgradeable"


class AssertionFailedError(StatementError):
    """An ASSERT statement whose expectation the catalog (or Kafka) does not meet."""

    code = "assertion_failed"


class ConnectorAuthorizationError(StatementError):
    """The requesting user may not create or drop the connectors ``names``."""

    code = "connector_authorization"

    def __init__(self, names: list[str]) -> None:
        super().__init__(f"Authorization denied to create or drop connector(s): "
                         f"[{', '.join(names)}]")
        self.names = tuple(names)


class TopicAuthorizationError(StatementError):
    """The requesting user may not do ``operation`` (Read, Write, Create or Delete) on
    ``topics``: ksqlDB's KsqlTopicAuthorizationException."""

    code = "topic_authorization"

    def __init__(self, operation: str, topics: list[str]) -> None:
        super().__init__(f"Authorization denied to {operation} on topic(s): "
                         f"[{', '.join(topics)}]")
        self.operation = operation
        self.topics = tuple(topics)
