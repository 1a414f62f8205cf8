"""The run's Kafka Connect worker (Apache Kafka's own, distributed mode, with the FileStream and
Debezium PostgreSQL plugins), started once per worker that asks for it, on the run's broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from metastore.dev.connect_worker import ConnectState, LocalConnect
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
