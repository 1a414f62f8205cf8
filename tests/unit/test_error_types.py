"""ksqlDB's types of query errors: its own USER causes (a missing topic only when the query
reads it), the operator's ``ksql.error.classifier.regex.*`` rules matched whole against each
cause's class or message, chained as ksqlDB chains classifiers, and rules that are no
``<TYPE> <REGEX>`` refused."""

from __future__ import annotations

import pytest

from metastore.runtime.error_types import (
    ErrorClassifier,
    ErrorClassifierSettingError,
)

SINK_GONE = ("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job "
             "aborted due to stage failure: Task 0 in stage 3.0 failed 1 times\n"
             "Caused by: org.apache.spark.SparkException: Job aborted.\n"
             "Caused by: org.apache.kafka.common.errors.TimeoutException: Topic out-1 not "
             "present in metadata after 60000 ms.")


@pytest.mark.parametrize("text", [
    "Caused by: org.apache.kafka.common.errors.TimeoutException: Topic in-1 not present in "
    "metadata after 60000 ms.",
    "org.apache.kafka.streams.errors.MissingSourceTopicException: one or more source topics",
    "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access "
    "topics: [out]",
    "org.apache.kafka.common.errors.RecordTooLargeException: too big",
    "io.confluent.kafka.schemaregistry.client.rest.exceptions.RestClientException: Subject "
    "'out-value' not found.; error code: 40401",
])
def test_causes_the_user_must_fix_are_user_errors(text: str) -> None:
    assert ErrorClassifier().classify(text, {"in-1"}) == "USER"


def test_a_missing_topic_is_the_users_when_the_query_reads_it() -> None:
    assert ErrorClassifier().classify(SINK_GONE, {"out-1"}) == "USER"
    assert ErrorClassifier().classify(SINK_GONE, {"in-1"}) == "UNKNOWN", "a sink gone"
    assert ErrorClassifier().classify(SINK_GONE, {"out"}) == "UNKNOWN", (
        "the sink out-1 is no source out, whose name it starts with")


def test_other_causes_are_unknown() -> None:
    assert ErrorClassifier().classify("java.lang.OutOfMemoryError: Java heap space") == "UNKNOWN"


def test_the_operators_rules_type_what_ksqldbs_leave_unknown() -> None:
    classifier = ErrorClassifier.of({
        "ksql.error.classifier.regex.sink": "SYSTEM .*not present in metadata.*",
        "ksql.error.classifier.regex.heap": "system java.lang.OutOfMemoryError",
        "ksql.streams.processing.guarantee": "exactly_once_v2"})
    assert classifier.classify(SINK_GONE, {"in-1"}) == "SYSTEM"
    assert classifier.classify("java.lang.OutOfMemoryError: Java heap space") == "SYSTEM", (
        "a cause's class name matched whole")
    by_class = ErrorClassifier.of({"ksql.error.classifier.regex.t":
                                   "SYSTEM org.apache.kafka.common.errors.TimeoutException"})
    assert by_class.classify(SINK_GONE, {"in-1"}) == "SYSTEM", "an inner cause's class, whole"
    assert classifier.classify("java.io.IOException: OutOfMemoryError elsewhere") == "UNKNOWN"


def test_two_types_that_disagree_are_unknown_as_ksqldbs_chain_makes_them() -> None:
    classifier = ErrorClassifier.of({
        "ksql.error.classifier.regex.a": "SYSTEM .*RecordTooLarge.*"})
    assert classifier.classify("org.apache.kafka.common.errors.RecordTooLargeException: x"
                               ) == "UNKNOWN"
    agreeing = ErrorClassifier.of({"ksql.error.classifier.regex.a": "USER .*too big.*"})
    assert agreeing.classify("org.apache.kafka.common.errors.RecordTooLargeException: too big"
                             ) == "USER"


@pytest.mark.parametrize("value", ["SYSTEM", "FATAL .*x.*", "SYSTEM (unclosed", ""])
def test_a_rule_that_is_no_type_and_regex_is_refused(value: str) -> None:
    with pytest.raises(ErrorClassifierSettingError) as refused:
        ErrorClassifier.of({"ksql.error.classifier.regex.bad": value})
    assert refused.value.name == "ksql.error.classifier.regex.bad"


def test_a_node_takes_its_classifiers_and_sink_producer_settings_from_ksql_properties() -> None:
    from metastore.server.settings import SettingsError, server_settings

    settings = server_settings({"bootstrap_servers": "k:9092", "ksql_properties": {
        "ksql.error.classifier.regex.sink": "SYSTEM .*not present in metadata.*",
        "ksql.streams.producer.max.block.ms": "10000",
        "ksql.logging.processing.rows.include": True}})
    assert settings.error_classifier.classify(SINK_GONE) == "SYSTEM"
    assert settings.sink_producer == {"kafka.max.block.ms": "10000"}
    assert settings.processing_log.rows_include, "the processing log's own, still its own"
    for refused in ({"ksql.error.classifier.regex.bad": "SEVERE .*"},
                    {"ksql.streams.producer.bootstrap.servers": "elsewhere:9092"},
                    {"ksql.streams.producer.linger.ms": " "}):
        with pytest.raises(SettingsError, match="ksql_properties"):
            server_settings({"bootstrap_servers": "k:9092", "ksql_properties": refused})
