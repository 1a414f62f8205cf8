"""A failed query's backoff and errors, as ksqlDB's ``ksql.query.retry.backoff.*`` and
``QueryError``: the waits double from the initial one up to the maximum, a micro-batch after a
restart starts them over, the errors kept are the last ones of the hour, typed USER when the
cause is the user's to fix, a failure's processing-log entry is ksqlDB's, and the settings
refuse values they cannot take."""

from __future__ import annotations

import json

import pytest

from metastore.runtime.processing_log import QueryFailure
from metastore.runtime.query_health import (
    ERRORS_KEPT,
    INITIAL_BACKOFF,
    MAX_BACKOFF,
    QueryHealth,
    RetrySettingError,
    RetrySettings,
    classify,
)


def test_waits_double_up_to_the_maximum_and_a_run_starts_them_over() -> None:
    health = QueryHealth(RetrySettings(initial_ms=1_000, max_ms=5_000))
    assert [health.failed("boom") for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert not health.may_start()
    health.ran()
    assert health.failed("boom again") == 1.0


def test_the_last_errors_are_kept_typed() -> None:
    health = QueryHealth(RetrySettings(errors_kept=2))
    for text in ("first", "org.apache.kafka.common.errors.RecordTooLargeException: too big",
                 "java.lang.IllegalStateException: lost"):
        health.failed(text)
    errors = health.reported_errors()
    assert [(e["type"], e["errorMessage"][:25]) for e in errors] == [
        ("USER", "org.apache.kafka.common.e"), ("UNKNOWN", "java.lang.IllegalStateExc")]
    assert all(isinstance(e["timestamp"], int) for e in errors)


@pytest.mark.parametrize("text", [
    "Caused by: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: gone",
    "org.apache.kafka.common.errors.TimeoutException: Topic out-1 not present in metadata "
    "after 60000 ms.",
    "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access "
    "topics: [out]",
    "io.confluent.kafka.schemaregistry.client.rest.exceptions.RestClientException: Subject "
    "'out-value' not found.; error code: 40401",
])
def test_causes_the_user_must_fix_are_user_errors(text: str) -> None:
    assert classify(text) == "USER"


def test_other_causes_are_unknown() -> None:
    assert classify("java.lang.OutOfMemoryError: Java heap space") == "UNKNOWN"


@pytest.mark.parametrize(("properties", "named"), [
    ({INITIAL_BACKOFF: "0"}, INITIAL_BACKOFF),
    ({MAX_BACKOFF: "soon"}, MAX_BACKOFF),
    ({INITIAL_BACKOFF: "20000", MAX_BACKOFF: "10000"}, MAX_BACKOFF),
    ({ERRORS_KEPT: "-1"}, ERRORS_KEPT),
])
def test_settings_refuse_what_they_cannot_take(properties: dict[str, str], named: str) -> None:
    with pytest.raises(RetrySettingError) as refused:
        RetrySettings.of(properties)
    assert refused.value.name == named


def test_ksqldbs_defaults() -> None:
    assert RetrySettings.of({}) == RetrySettings(15_000, 900_000, 10)


def test_a_failure_is_logged_as_ksqldbs_thread_error() -> None:
    entry = json.loads(QueryFailure("CSAS_A_1", ("java.io.IOException: disk",), 1_000).entry())
    assert entry["logger"] == "processing.CSAS_A_1.ksql.logger.thread.exception.uncaught"
    assert (entry["level"], entry["time"], entry["message"]["type"]) == ("ERROR", 1_000, 4)
    assert entry["message"]["deserializationError"] is None
    assert entry["message"]["kafkaStreamsThreadError"] == {
        "errorMessage": "Unhandled exception caught in streams thread",
        "threadName": "stream execution thread for CSAS_A_1",
        "cause": ["java.io.IOException: disk"]}
