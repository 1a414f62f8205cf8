"""A pull query answered by Spark runs within its budget: past its time its Spark jobs are
cancelled and it fails alone, past its bytes its answer is refused after reading no more than
that, and the session answers the next query."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from metastore.engine.overrides import NO_OVERRIDES
from metastore.spark.exceptions import AnswerTooLargeError, PullQueryTimeoutError
from metastore.spark.query import PullBudget, check_pull_query, run_analysed
from metastore.spark.views import object_name
from metastore.testing.check import run_script
from tests.support.kafka import unique

ROWS = 100_000_000_000
"""Rows of the view: minutes of scanning on any machine."""


def a_view(spark: Any) -> tuple[str, Any]:
    """A stream in an image and, for it, a Spark view of ``ROWS`` rows in a database."""
    database = unique("budget").replace("-", "_")
    _, image = run_script("CREATE STREAM S (K BIGINT KEY, V STRING) WITH (KAFKA_TOPIC='s', "
                          "VALUE_FORMAT='JSON', PARTITIONS=1);")
    spark.sql(f"CREATE DATABASE `{database}`")
    spark.sql(f"CREATE VIEW `{database}`.`{object_name('S')}` AS SELECT id AS K, "
              f"repeat('v', 100) AS V FROM range(0, {ROWS})")
    return database, image


def test_a_pull_query_past_its_time_is_cancelled_and_fails_alone(spark: Any) -> None:
    database, image = a_view(spark)
    analysis = check_pull_query("SELECT * FROM S WHERE K < 0;", image, NO_OVERRIDES)
    started = time.monotonic()
    with pytest.raises(PullQueryTimeoutError, match="ran longer than 1 s and was cancelled"):
        run_analysed(spark, analysis, database, budget=PullBudget(timeout_seconds=1))
    assert time.monotonic() - started < 15, "cancelled, not run to its end"
    answer = run_analysed(spark, check_pull_query("SELECT K FROM S LIMIT 3;", image,
                                                  NO_OVERRIDES), database)
    assert answer.rows == [[0], [1], [2]], "the session answers the next query"
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None


BIG_ANSWER_ROWS = 5_000
"""About 560 KB of rows against a 100 KB budget: past it, yet one task's result that a loaded
suite's Spark computes in time (a million rows, 110 MB in one task, passed 240 s in a clean
clone, and through the block manager had lost its result there once)."""
ROOMY_IN_TIME = PullBudget(max_bytes=100_000, timeout_seconds=240)
"""A bytes budget alone: a loaded suite's Spark may take longer than a node's 30 s."""


def test_an_answer_past_its_bytes_is_refused_after_reading_about_that_much(spark: Any) -> None:
    database, image = a_view(spark)
    analysis = check_pull_query(f"SELECT * FROM S LIMIT {BIG_ANSWER_ROWS};", image, NO_OVERRIDES)
    with pytest.raises(AnswerTooLargeError,
                       match=r"The answer is larger than 100000 bytes after \d+ rows"):
        run_analysed(spark, analysis, database, budget=ROOMY_IN_TIME)
    answer = run_analysed(spark, check_pull_query("SELECT * FROM S LIMIT 100;", image,
                                                  NO_OVERRIDES), database,
                          budget=ROOMY_IN_TIME)
    assert len(answer.rows) == 100 and answer.rows[0] == [0, "v" * 100]


class EndingFails:
    """The session, with answers whose row iterators fail when closed early, as PySpark's does
    when the job it ends had a task in flight (``TaskResultLost``, seen in a loaded suite)."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self.sparkContext = spark.sparkContext

    def sql(self, text: str) -> Any:
        return _FrameEndingFails(self._spark.sql(text))


class _FrameEndingFails:
    def __init__(self, frame: Any) -> None:
        self._frame = frame
        self.columns = frame.columns

    def toLocalIterator(self) -> Iterator[Any]:  # noqa: N802 - PySpark's name
        try:
            yield from self._frame.toLocalIterator()
        except GeneratorExit:
            raise RuntimeError("TaskResultLost (result lost from block manager)") from None


def test_an_answer_past_its_bytes_is_refused_even_when_ending_its_job_fails(spark: Any) -> None:
    database, image = a_view(spark)
    analysis = check_pull_query("SELECT * FROM S LIMIT 100;", image, NO_OVERRIDES)
    with pytest.raises(AnswerTooLargeError, match="larger than 1000 bytes"):
        run_analysed(EndingFails(spark), analysis, database,
                     budget=PullBudget(max_bytes=1000, timeout_seconds=240))
