"""ksqlDB's numeric error codes, assigned to metastore's typed errors at the edge only.

:data:`ERROR_CODES` is the one table from a typed error class to what an answer carries: the
HTTP status and ksqlDB's ``error_code``. :func:`classify` looks an error up along its class's
MRO, so a subclass not listed gets its nearest listed base's code (and every error at least
:class:`~metastore.core.exceptions.MetastoreError`'s: a server error). What the table cannot know
(a node that is DEGRADED answers a :class:`NotReadyError` as a server error, not as "catching
up") stays with the endpoint that knows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from metastore.catalog import exceptions as catalog
from metastore.checkpoint.exceptions import CheckpointError
from metastore.connect import exceptions as connect
from metastore.core.exceptions import MetastoreError, PropertyValueError
from metastore.dev import exceptions as local
from metastore.jvm.exceptions import JvmJarsError
from metastore.kafka import exceptions as kafka
from metastore.log import exceptions as log_errors
from metastore.log import record as records
from metastore.planner import exceptions as queries
from metastore.schema_registry import exceptions as schema_registry
from metastore.spark import exceptions as spark
from metastore.sql.exceptions import (
    ParseError,
    PrepareError,
    TooComplexError,
    TypeDefinitionError,
    VariableError,
)

BAD_REQUEST = 40000
BAD_STATEMENT = 40001
QUERY_ENDPOINT = 40002
MAX_PUSH_QUERIES_EXCEEDED = 40003
FORBIDDEN = 40300
FORBIDDEN_KAFKA_ACCESS = 40301
NOT_FOUND = 40400
CONFLICT = 40900
UNAUTHORIZED = 40100
REQUEST_TIMEOUT = 40800
PAYLOAD_TOO_LARGE = 41300
ASSERTION_FAILED = 41700
TOO_MANY_REQUESTS = 42900
SERVER_ERROR = 50000
SERVICE_UNAVAILABLE = 50300
COMMAND_QUEUE_CATCHUP_TIMEOUT = 50301
SERVER_NOT_READY = 50302


@dataclass(frozen=True)
class ErrorCode:
    """How an error is answered: the HTTP status and ksqlDB's ``error_code``."""

    http_status: int
    code: int


STATEMENT_ERROR = ErrorCode(400, BAD_STATEMENT)
"""The client's statement or query is at fault; sending it again changes nothing."""
SERVER_FAILURE = ErrorCode(500, SERVER_ERROR)
"""The node or Kafka failed (for a write: the statement was NOT written, or may have been)."""
CATCHUP_TIMEOUT = ErrorCode(503, COMMAND_QUEUE_CATCHUP_TIMEOUT)
"""The node did not reach the requested command sequence number in time."""
NOT_READY = ErrorCode(503, SERVER_NOT_READY)
"""The node cannot answer yet (catching up with the log, Spark not running); retry."""
ASSERTION = ErrorCode(417, ASSERTION_FAILED)
"""An ASSERT statement's expectation is not met (ksqlDB's 'expectation failed')."""

ERROR_CODES: Mapping[type[MetastoreError], ErrorCode] = MappingProxyType({
    MetastoreError: SERVER_FAILURE,
    PropertyValueError: ErrorCode(400, BAD_REQUEST),
    # the language
    ParseError: STATEMENT_ERROR,
    PrepareError: STATEMENT_ERROR,
    TypeDefinitionError: STATEMENT_ERROR,
    TooComplexError: STATEMENT_ERROR,
    VariableError: STATEMENT_ERROR,
    # the catalog: statements that cannot be executed against it
    catalog.StatementError: STATEMENT_ERROR,
    catalog.SourceExistsError: STATEMENT_ERROR,
    catalog.SourceNotFoundError: STATEMENT_ERROR,
    catalog.IncompatibleSourceKindError: STATEMENT_ERROR,
    catalog.DependentsExistError: STATEMENT_ERROR,
    catalog.UnknownQueryError: STATEMENT_ERROR,
    catalog.SchemaError: STATEMENT_ERROR,
    catalog.FormatError: STATEMENT_ERROR,
    catalog.PropertyError: STATEMENT_ERROR,
    catalog.TopicError: STATEMENT_ERROR,
    catalog.TopicDeletedError: STATEMENT_ERROR,
    catalog.UnknownTopicError: ErrorCode(400, BAD_REQUEST),
    catalog.TypeExistsError: STATEMENT_ERROR,
    catalog.TypeNotFoundError: STATEMENT_ERROR,
    catalog.QueryError: STATEMENT_ERROR,
    catalog.RequestIdReusedError: STATEMENT_ERROR,
    catalog.TooLargeError: STATEMENT_ERROR,
    catalog.UnsupportedStatementError: STATEMENT_ERROR,
    catalog.UpgradeError: STATEMENT_ERROR,
    catalog.AssertionFailedError: ASSERTION,
    catalog.TopicAuthorizationError: ErrorCode(403, FORBIDDEN_KAFKA_ACCESS),
    catalog.ConnectorAuthorizationError: ErrorCode(403, FORBIDDEN),
    # the command log
    log_errors.NotWrittenError: SERVER_FAILURE,
    log_errors.OutcomeUnknownError: SERVER_FAILURE,
    log_errors.NotReadyError: NOT_READY,
    log_errors.CatchUpTimeoutError: CATCHUP_TIMEOUT,
    log_errors.CommandTopicError: SERVER_FAILURE,
    log_errors.RepairError: SERVER_FAILURE,
    log_errors.RewriteError: SERVER_FAILURE,
    records.RecordError: SERVER_FAILURE,
    records.IncompatibleRecordError: SERVER_FAILURE,
    records.CorruptRecordError: SERVER_FAILURE,
    records.UnappliableRecordError: SERVER_FAILURE,
    # checkpoints
    CheckpointError: SERVER_FAILURE,
    # the Kafka client
    kafka.KafkaClientError: SERVER_FAILURE,
    kafka.ProducerFencedError: SERVER_FAILURE,
    kafka.TransactionAbortedError: SERVER_FAILURE,
    kafka.KafkaUnavailableError: SERVER_FAILURE,
    kafka.CommitOutcomeUnknownError: SERVER_FAILURE,
    kafka.KafkaTopicError: SERVER_FAILURE,
    kafka.MissingSourceTopicError: SERVER_FAILURE,
    # persistent queries
    queries.UnsupportedByRuntimeError: STATEMENT_ERROR,
    queries.QueryRuntimeError: SERVER_FAILURE,
    queries.RealTimeSlotsError: SERVER_FAILURE,
    queries.PushQueryLimitError: ErrorCode(400, MAX_PUSH_QUERIES_EXCEEDED),
    queries.UnknownPushQueryError: ErrorCode(400, BAD_REQUEST),
    queries.AssignmentError: SERVER_FAILURE,
    # Spark
    spark.SparkError: SERVER_FAILURE,
    spark.SparkUnavailableError: NOT_READY,
    spark.UnsupportedQueryError: STATEMENT_ERROR,
    spark.SparkQueryError: STATEMENT_ERROR,
    spark.AnswerTooLargeError: STATEMENT_ERROR,  # asking again gets the same answer
    spark.PullQueryTimeoutError: ErrorCode(408, REQUEST_TIMEOUT),
    # the Schema Registry
    schema_registry.SchemaRegistryError: STATEMENT_ERROR,  # the registry refused what it was sent
    schema_registry.SchemaRegistryUnavailableError: ErrorCode(503, SERVICE_UNAVAILABLE),
    schema_registry.SchemaRegistryAccessError: SERVER_FAILURE,
    # Kafka Connect: what it refused is the statement's error, as is a Connect that is down
    connect.ConnectError: STATEMENT_ERROR,
    connect.ConnectorExistsError: ErrorCode(409, CONFLICT),
    connect.ConnectorNotFoundError: ErrorCode(404, NOT_FOUND),
    connect.ConnectorValidationError: ErrorCode(400, BAD_REQUEST),
    connect.ConnectUnavailableError: STATEMENT_ERROR,
    # local development infrastructure
    JvmJarsError: SERVER_FAILURE,
    local.LocalInfraError: SERVER_FAILURE,
    local.ToolMissingError: SERVER_FAILURE,
    local.JarResolutionError: SERVER_FAILURE,
    local.JavaBuildError: SERVER_FAILURE,
    local.BrokerStartError: SERVER_FAILURE,
})


def classify(error: MetastoreError) -> ErrorCode:
    """The answer to ``error``: its class's entry, else its nearest listed base's."""
    for cls in type(error).__mro__:
        if issubclass(cls, MetastoreError) and cls in ERROR_CODES:
            return ERROR_CODES[cls]
    return ERROR_CODES[MetastoreError]


def error_code(error: MetastoreError) -> int:
    """ksqlDB's ``error_code`` for ``error``."""
    return classify(error).code


__all__ = ["BAD_REQUEST", "BAD_STATEMENT", "CATCHUP_TIMEOUT", "COMMAND_QUEUE_CATCHUP_TIMEOUT",
           "ERROR_CODES", "NOT_FOUND", "NOT_READY", "PAYLOAD_TOO_LARGE", "QUERY_ENDPOINT",
           "REQUEST_TIMEOUT", "SERVER_ERROR", "SERVER_FAILURE", "SERVER_NOT_READY",
           "STATEMENT_ERROR", "TOO_MANY_REQUESTS", "UNAUTHORIZED", "ErrorCode", "classify",
           "error_code"]
