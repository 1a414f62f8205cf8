"""The run's local Schema Registry, started once per worker that asks for it: the registry tests'
and every `metastore test` run of a case in a registry format (which would otherwise start the
developer's registry and leave it running)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from metastore.dev.schema_registry import LocalSchemaRegistry, SchemaRegistryState


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchemaRegistryState]:
    launcher = LocalSchemaRegistry(tmp_path_factory.mktemp("schema-registry"))
    state = launcher.start(progress=None)
    try:
        yield state
    finally:
        launcher.stop()
