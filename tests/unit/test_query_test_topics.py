"""The topics `metastore test` makes for a test, as ksqlDB's test driver makes them: the count
validation sees, and the count each topic is created with."""

from __future__ import annotations

import pytest

from metastore.catalog.exceptions import StatementError
from metastore.catalog.image import EMPTY_IMAGE, Image
from metastore.engine.validation import Validator
from metastore.sql.parser import parse
from metastore.testing.cases import DeclaredTopic, QueryTest
from metastore.testing.runner import PreexistingTopics, physical_partitions


def _test(statements: list[str], topics: tuple[DeclaredTopic, ...]) -> QueryTest:
    return QueryTest("t", "t", tuple(statements), (), (), topics)


def _validated(test: QueryTest) -> Image:
    statements = parse(test.script)
    validator = Validator(EMPTY_IMAGE, PreexistingTopics(test, statements))
    for statement in statements:
        validator.validate(statement)
    return validator.image


def test_a_create_sizes_a_declared_topic_for_validation_but_not_on_the_broker() -> None:
    """ksqlDB's driver creates the declared topics itself and runs no topic-creation step, so
    PARTITIONS=128 on a topic declared without a count (1) is accepted; the topic keeps 1."""
    test = _test(["CREATE TABLE L (K INT PRIMARY KEY, V STRING) WITH (KAFKA_TOPIC='left', "
                  "PARTITIONS=128, FORMAT='JSON');",
                  "CREATE TABLE O AS SELECT * FROM L;"],
                 (DeclaredTopic("left"),))
    image = _validated(test)
    assert image.sources["L"].partitions == 128
    assert physical_partitions(test, image) == {"left": 1, "O": 1}


def test_a_declared_count_is_kept_and_an_undeclared_topic_is_the_drivers() -> None:
    test = _test(["CREATE STREAM A (K INT KEY, V STRING) WITH (KAFKA_TOPIC='a', PARTITIONS=2, "
                  "FORMAT='JSON');",
                  "CREATE STREAM B (K INT KEY, V STRING) WITH (KAFKA_TOPIC='b', FORMAT='JSON');",
                  "CREATE STREAM C (K INT KEY, V STRING) WITH (KAFKA_TOPIC='c', PARTITIONS=3, "
                  "FORMAT='JSON');"],
                 (DeclaredTopic("a", partitions=6),))
    statements = parse(test.script)
    topics = PreexistingTopics(test, statements)
    assert (topics.partitions("a"), topics.partitions("b"), topics.partitions("c")) == (2, 4, None)
    assert physical_partitions(test, _validated(test)) == {"a": 6, "b": 1, "c": 3}


def test_an_invalid_partitions_value_is_still_refused() -> None:
    test = _test(["CREATE STREAM A (K INT KEY, V STRING) WITH (KAFKA_TOPIC='a', PARTITIONS=0, "
                  "FORMAT='JSON');"], (DeclaredTopic("a"),))
    with pytest.raises(StatementError, match="Invalid PARTITIONS value: 0"):
        _validated(test)
