"""The image worker: each consumer gets the newest image and what changed since the one it took;
a failing consumer is retried while the others go on."""

from __future__ import annotations

import threading

from metastore.catalog.image import EMPTY_IMAGE, Image
from metastore.catalog.image_worker import ImageChange, ImageWorker, change_between
from metastore.engine.validation import Validator
from metastore.sql.parser import parse
from metastore.testing.check import AssumedTopics
from tests.support.waiting import eventually

BASE = ("CREATE STREAM A (ID INT KEY, V INT) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='JSON');\n"
        "CREATE STREAM B (ID INT KEY, V INT) WITH (KAFKA_TOPIC='b', VALUE_FORMAT='JSON');\n")


def image(script: str, base: Image = EMPTY_IMAGE) -> Image:
    """``base`` with ``script`` applied: unchanged sources stay the same objects, as in replay."""
    validator = Validator(base, AssumedTopics())
    for statement in parse(script):
        validator.validate(statement)
    return validator.image


def test_changes_name_what_was_added_replaced_and_removed() -> None:
    first = image(BASE)
    assert change_between(None, first).sources == {"A", "B"}
    later = image("DROP STREAM B;\nCREATE STREAM C AS SELECT * FROM A;\n"
                  "CREATE TYPE T AS STRUCT<X INT>;", first)
    change = change_between(first, later)
    assert change.sources == {"B", "C"} and change.types == {"T"} and len(change.queries) == 1
    assert change_between(later, later).empty


class Recorder:
    def __init__(self, name: str, failures: int = 0) -> None:
        self.name = name
        self.failures = failures
        self.changes: list[ImageChange] = []
        self.ticks = 0
        self.took = threading.Event()

    def open(self) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("not yet")

    def consume(self, change: ImageChange) -> None:
        self.changes.append(change)
        self.took.set()

    def tick(self) -> None:
        self.ticks += 1


def test_a_failing_consumer_is_retried_and_never_holds_the_others_back() -> None:
    steady, flaky = Recorder("steady"), Recorder("flaky", failures=1)
    worker = ImageWorker([flaky, steady], retry_seconds=0.3, interval=0.05)
    first = image(BASE)
    worker.offer(EMPTY_IMAGE, ready=False)
    worker.start()
    try:
        worker.offer(first, ready=True)
        assert steady.took.wait(5), "the steady consumer waited for the failing one"
        assert not flaky.changes
        assert flaky.took.wait(5), "the failing consumer was not retried"
        later = image("DROP STREAM A;", first)
        steady.took.clear()
        worker.offer(later, ready=True)
        eventually(lambda: len(steady.changes) >= 2, 5,
                   lambda: f"the steady consumer's second change, now {steady.changes}",
                   interval=0.02)
    finally:
        worker.stop()
    assert [c.previous for c in steady.changes] == [None, first]
    assert steady.changes[1].sources == {"A"}
    assert flaky.changes[0].previous is None and steady.ticks > 0
