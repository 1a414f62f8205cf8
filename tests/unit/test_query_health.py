"""A failed query's backoff and errors, as ksqlDB's ``ksql.query.retry.backoff.*`` and
``QueryError``: the waits double from the initial one up to the maximum, a micro-batch after a
restart starts them over, the errors kept are the last ones of the hour, typed
(tests/unit/test_error_types.py), a failure's processing-log entry is ksqlDB's, and the
settings refuse values they cannot take."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metastore.runtime.error_types import UNKNOWN, USER, ErrorClassifier
from metastore.runtime.processing_log import QueryFailure
from metastore.runtime.query_health import (
    ERRORS_KEPT,
    INITIAL_BACKOFF,
    MAX_BACKOFF,
    QueryHealth,
    RetrySettingError,
    RetrySettings,
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
    [entry] = map(json.loads, QueryFailure("CSAS_A_1", ("java.io.IOException: disk",),
                                           1_000).entries())
    assert entry["logger"] == "processing.CSAS_A_1.ksql.logger.thread.exception.uncaught"
    assert (entry["level"], entry["time"], entry["message"]["type"]) == ("ERROR", 1_000, 4)
    assert entry["message"]["deserializationError"] is None
    assert entry["message"]["kafkaStreamsThreadError"] == {
        "errorMessage": "Unhandled exception caught in streams thread",
        "threadName": "stream execution thread for CSAS_A_1",
        "cause": ["java.io.IOException: disk"]}


@pytest.mark.parametrize(("cause", "sent"), [
    ("Caused by: org.apache.kafka.common.errors.RecordTooLargeException: The request included "
     "a message larger than the max message size the server will accept.",
     "The request included a message larger than the max message size the server will accept."),
    ("Caused by: org.apache.kafka.common.errors.TimeoutException: Topic out not present in "
     "metadata after 10000 ms.", "Topic out not present in metadata after 10000 ms."),
    ("Caused by: org.apache.kafka.common.errors.TimeoutException: Expiring 3 record(s) for "
     "out-0:20001 ms has passed since batch creation",
     "Expiring 3 record(s) for out-0:20001 ms has passed since batch creation"),
    ("Caused by: org.apache.kafka.common.errors.TimeoutException: Topic in not present in "
     "metadata after 10000 ms.", None),  # the source's: no production error
    ("Caused by: org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized "
     "to access topics: [out]", None),  # fatal in Kafka Streams, never the handler's
    ("org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired before the "
     "position for partition in-0 could be determined", None),
    ("java.io.IOException: disk", None),
])
def test_a_failure_to_send_is_also_a_production_error(cause: str, sent: str | None) -> None:
    production = _sink_entry(cause)
    if sent is None:
        assert production is None
        return
    assert production is not None
    assert production["logger"] == "processing.CSAS_A_1"
    assert production["message"]["type"] == 3
    assert production["message"]["productionError"] == {"errorMessage": sent}
    assert production["message"]["deserializationError"] is None


_REFUSED = ("Caused by: java.lang.IllegalStateException: the Schema Registry answered 409 to "
            "POST /apis/ccompat/v7/subjects/{subject}/versions: {{\"error_code\":409,"
            "\"message\":\"Schema being registered is incompatible with an earlier schema\"}}")


@pytest.mark.parametrize(("subject", "target"), [
    ("out-value", "value"), ("out-key", "key"),
    ("other-value", None),  # not the sink's subject: no serializer of this query's
])
def test_a_registry_refusing_the_sinks_schema_is_a_serialization_error(
        subject: str, target: str | None) -> None:
    refused = _sink_entry(_REFUSED.format(subject=subject))
    if target is None:
        assert refused is None
        return
    assert refused is not None
    assert refused["logger"] == "processing.CSAS_A_1.OUTPUT.serializer"
    assert refused["message"]["type"] == 2
    error = refused["message"]["serializationError"]
    assert (error["target"], error["topic"], error["record"]) == (target, "out", None)
    assert error["errorMessage"].startswith("Error serializing message to topic: out. The "
                                            "Schema Registry refused the schema of subject out-")
    assert "incompatible with an earlier schema" in error["cause"][0]
    assert ErrorClassifier().classify(_REFUSED.format(subject=subject)) == USER


_UNWRITABLE = ("Caused by: org.apache.kafka.common.errors.SerializationException: Error "
               "serializing a record of subject {subject}: Out.Z: NULL for a non-optional \"int\"")


@pytest.mark.parametrize(("subject", "target"), [
    ("out-value", "value"), ("out-key", "key"), ("other-value", None)])
def test_a_record_the_sinks_schema_cannot_hold_is_a_serialization_error(
        subject: str, target: str | None) -> None:
    """ksqlDB's serializer logs it, then fails the query: a USER error."""
    detail = _UNWRITABLE.format(subject=subject)
    unwritable = _sink_entry(detail)
    assert ErrorClassifier().classify(detail) == USER
    if target is None:
        assert unwritable is None
        return
    assert unwritable is not None and unwritable["message"]["type"] == 2
    error = unwritable["message"]["serializationError"]
    assert (error["target"], error["topic"]) == (target, "out")
    assert error["errorMessage"] == ("Error serializing message to topic: out. Out.Z: NULL for "
                                     "a non-optional \"int\"")
    assert error["cause"] == ["Out.Z: NULL for a non-optional \"int\""]


@pytest.mark.parametrize("status", [401, 403])
def test_a_registry_refusing_the_querys_credentials_is_a_user_error(status: int) -> None:
    """ksqlDB's schema authorization classifier: the user's to fix, as Kafka's refusals are."""
    detail = (f"Caused by: java.lang.IllegalStateException: the Schema Registry answered {status}"
              " to POST /subjects/out-value/versions: {\"error_code\":40101}")
    assert ErrorClassifier().classify(detail) == USER
    assert ErrorClassifier().classify(detail.replace(str(status), "400")) == UNKNOWN


def test_a_registration_racing_another_is_no_refusal() -> None:
    detail = ("Caused by: io.metastore.avro.RegistryCalls$ConcurrentCreationException: the "
              "Schema Registry answered 409 to POST /apis/ccompat/v7/subjects/out-value/versions:"
              " {\"message\":\"Artifact with name out-value already exists\"}")
    failure = QueryFailure("CSAS_A_1", ("x",), 1_000, detail, "out")
    assert failure.serialization_error() is None
    assert ErrorClassifier().classify(detail) == UNKNOWN


def _sink_entry(cause: str) -> dict[str, Any] | None:
    """The entry logged before the thread error of a CSAS_A_1 failure into ``out`` with
    ``cause``; None when the thread error is alone."""
    failure = QueryFailure("CSAS_A_1", ("org.apache.spark.SparkException: Job aborted.",),
                           1_000, f"org.apache.spark.SparkException: Job aborted.\n{cause}",
                           "out")
    entries = [json.loads(text) for text in failure.entries()]
    assert entries[-1]["message"]["type"] == 4, "the failure itself, last"
    assert len(entries) <= 2
    return entries[0] if len(entries) == 2 else None
