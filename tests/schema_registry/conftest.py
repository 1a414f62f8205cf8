"""A local Schema Registry for this package's tests, started once, and a client of it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from metastore.local.schema_registry import LocalSchemaRegistry, SchemaRegistryState
from metastore.schema_registry.client import SchemaRegistryClient


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchemaRegistryState]:
    launcher = LocalSchemaRegistry(tmp_path_factory.mktemp("schema-registry"))
    state = launcher.start(progress=None)
    try:
        yield state
    finally:
        launcher.stop()


@pytest.fixture()
def client(registry: SchemaRegistryState) -> Iterator[SchemaRegistryClient]:
    client = SchemaRegistryClient(registry.url)
    yield client
    client.close()
