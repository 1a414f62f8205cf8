"""A lost Spark is noticed and restarted: the liveness watch finds a driver that fails or stops
answering, and the projection starts a new session with backoff and projects the newest image
into it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest

from metastore.catalog.image_worker import change_between
from metastore.spark.liveness import SparkLiveness
from metastore.spark.projection import ProjectionRunner, ReconcileResult, SparkProjection
from metastore.testing.check import run_script
from tests.support.waiting import eventually


class _Driver:
    """What the probe calls: ``sparkContext._jsc.sc().isStopped()``."""

    def __init__(self) -> None:
        self.answer: bool | Exception = False
        self.hang = threading.Event()
        self.released = threading.Event()

    def isStopped(self) -> bool:  # noqa: N802 - Spark's name
        if self.hang.is_set():
            self.released.wait(10)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def sc(self) -> _Driver:
        return self

    @property
    def sparkContext(self) -> Any:  # noqa: N802
        return type("Context", (), {"_jsc": self})()


def watch(driver: _Driver) -> tuple[SparkLiveness, list[str]]:
    lost: list[str] = []
    liveness = SparkLiveness(lambda: cast(Any, driver), lost.append, interval=0.05, timeout=0.3)
    liveness.start()
    return liveness, lost


def _refuse(driver: _Driver) -> None:
    driver.answer = ConnectionRefusedError(111, "Connection refused")


class _DyingJavaError(Exception):
    """As py4j's Py4JJavaError when the JVM dies: its text is asked of the JVM, and fails."""

    def __str__(self) -> str:
        raise ConnectionError("Answer from Java side is empty")


def _die(driver: _Driver) -> None:
    driver.answer = _DyingJavaError()


def _stop(driver: _Driver) -> None:
    driver.answer = True


def _hang(driver: _Driver) -> None:
    driver.hang.set()


@pytest.mark.parametrize(("make_lost", "reason"), [
    (_refuse, "the Spark driver JVM does not answer ([Errno 111] Connection refused)"),
    (_die, "the Spark driver JVM does not answer (_DyingJavaError)"),
    (_stop, "the SparkContext stopped"),
    (_hang, "the Spark driver JVM did not answer within 0.3 s; killed")])
def test_a_driver_that_fails_stops_or_hangs_is_lost_with_the_reason(
        make_lost: Callable[[_Driver], None], reason: str) -> None:
    driver = _Driver()
    liveness, lost = watch(driver)
    try:
        threading.Event().wait(0.3)
        assert lost == [], "a driver that answers is alive"
        make_lost(driver)
        eventually(lambda: lost, 5, f"the loss to be noticed: {reason}", interval=0.05)
        threading.Event().wait(0.3)
        assert lost == [reason], "noticed once"
    finally:
        driver.released.set()
        liveness.stop()


class _Projection:
    def __init__(self, spark: object) -> None:
        self.spark = spark
        self.catalog_calls = 0
        self.fingerprint = "f"
        self.reconciled: list[object] = []

    def reconcile(self, image: object) -> ReconcileResult:
        self.reconciled.append(image)
        return ReconcileResult(created=1, catalog_calls=1)


def test_a_lost_spark_restarts_with_backoff_and_gets_the_newest_image() -> None:
    starts: list[_Projection] = []
    failing = [True]
    discarded: list[int] = []

    def start() -> SparkProjection:
        if len(starts) == 1 and failing[0]:
            failing[0] = False
            raise RuntimeError("no JVM")
        context = SimpleNamespace(master="local[1]", applicationId=f"app-{len(starts)}",
                                  uiWebUrl=None)
        starts.append(_Projection(SimpleNamespace(sparkContext=context)))
        return cast(SparkProjection, starts[-1])

    def discard() -> None:
        discarded.append(len(starts))

    runner = ProjectionRunner(start, discard=discard, restart_backoff=(0.2, 1.0))
    runner.open()
    _, image = run_script("CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', "
                          "PARTITIONS=1);")
    runner.consume(change_between(None, image))
    assert runner.status.in_sync and runner.down is None

    runner.lost("the Spark driver JVM does not answer")
    assert runner.projection is None and not runner.status.in_sync
    assert runner.down is not None and "does not answer" in runner.down
    runner.tick()
    assert len(starts) == 1, "no restart before the loss is handled (the query group left)"
    runner.may_restart()  # the lost session ran for less than five minutes: after the backoff
    runner.tick()
    assert len(starts) == 1 and runner.projection is None, "not at once"
    eventually(lambda: (runner.tick(), "restarting it failed (no JVM)" in str(runner.down))[1],
               5, "the first attempt, after the backoff, to fail", interval=0.05)
    eventually(lambda: (runner.tick(), runner.projection is not None)[1], 5,
               "the next attempt, after a longer backoff, to start a new session",
               interval=0.05)
    assert runner.down is None and runner.restarts == 1 and discarded == [1, 1]
    assert starts[1].reconciled == [image], "the new session gets the newest image"
    assert runner.status.in_sync and runner.status.image is image
