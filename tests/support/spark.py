"""One in-process SparkSession for the tests that evaluate SQL with Spark (batch), shared by
every such test of a run.

A SparkContext costs seconds to start, and Spark holds one per process, so the session is started
once and handed to each test; the root conftest groups its users on one xdist worker. A test that
needs a session of its own (``metastore test`` starts one with its own settings and stops it)
asks for ``own_spark``, which stops the shared session first; the next user starts it again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metastore.spark.session import start_session

_shared: list[Any] = []


def _alive(session: Any) -> bool:
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None and session.sparkContext._jsc is not None


def release_shared_session() -> None:
    """Stop the shared session, if any, so that the next start in this process is a new one."""
    if _shared:
        session = _shared.pop()
        if _alive(session):
            session.stop()


@pytest.fixture
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The shared local[2] session; a test's changes to its SQL settings are undone after it."""
    if not _shared or not _alive(_shared[0]):
        _shared[:] = [start_session("local[2]", "metastore-tests",
                                    Path(tmp_path_factory.mktemp("spark")))]
    session = _shared[0]
    before = dict(session.conf.getAll)
    yield session
    after = dict(session.conf.getAll)
    for key in after.keys() - before.keys():
        session.conf.unset(key)
    for key, value in before.items():
        if after.get(key) != value:
            session.conf.set(key, value)


@pytest.fixture
def own_spark() -> Iterator[None]:
    """For a test that starts (and stops) a SparkSession of its own in this process: no session
    is active when it starts, none is left when it ends (a node built in process leaves its
    session running)."""
    release_shared_session()
    _stop_active()
    yield
    _stop_active()


def _stop_active() -> None:
    """Stop the process's SparkContext, whichever thread started it."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        context.stop()
