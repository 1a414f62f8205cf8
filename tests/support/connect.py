"""The run's Kafka Connect worker (Apache Kafka's own, distributed mode, with the FileStream and
Debezium PostgreSQL plugins) on the run's broker, and its PostgreSQL server: each started once
per worker that asks for it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from metastore.dev.connect_worker import ConnectState, LocalConnect
from metastore.dev.postgres import LocalPostgres, PostgresState
from tests.support.kafka import unique


@pytest.fixture(scope="session")
def connect_worker(kafka_bootstrap: str,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectState]:
    launcher = LocalConnect(tmp_path_factory.mktemp("connect"), group=unique("connect"))
    state = launcher.start(kafka_bootstrap, progress=None)
    try:
        yield state
    finally:
        launcher.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresState]:
    """A PostgreSQL server of the run's own (Debian's), in a directory its service user can
    reach (pytest's own temporary root is its user's alone)."""
    root = Path(tempfile.mkdtemp(prefix="metastore-test-postgres-"))
    launcher = LocalPostgres(root)
    state = launcher.start(progress=None)
    try:
        yield state
    finally:
        launcher.stop()
        shutil.rmtree(root, ignore_errors=True)
