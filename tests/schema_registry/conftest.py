"""A client of the run's local Schema Registry (``tests.support.registry``), and a Spark node that
uses it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from metastore.dev.schema_registry import SchemaRegistryState
from metastore.kafka.admin import Admin
from metastore.runtime.processing_log_settings import ProcessingLogSettings
from metastore.schema_registry.client import SchemaRegistryClient
from tests.support.servers import ServerProcess, cleaned_after, session_node


@pytest.fixture()
def client(registry: SchemaRegistryState) -> Iterator[SchemaRegistryClient]:
    client = SchemaRegistryClient(registry.url)
    yield client
    client.close()


@pytest.fixture(scope="session")
def registry_node_process(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory,
                          registry: SchemaRegistryState) -> Iterator[ServerProcess]:
    yield from session_node(kafka_bootstrap, tmp_path_factory, "registry", True,
                            "--schema-registry-url", registry.url)


@pytest.fixture
def registry_node(registry_node_process: ServerProcess) -> Iterator[ServerProcess]:
    """One Spark node asking the registry, for every test that creates uniquely named
    sources in the registry's formats (the rules of ``tests.support.servers.spark_node``)."""
    with cleaned_after(registry_node_process):
        yield registry_node_process


@pytest.fixture
def registry_node_log(registry_node: ServerProcess, kafka_admin: Admin) -> Iterator[str]:
    """The registry node's processing log topic, for one test that reads it: the node's other
    tests skip records on purpose, and logging them would cost the node's one Spark core jobs
    they are timed against."""
    topic = ProcessingLogSettings().topic(registry_node.service_id)
    kafka_admin.create(topic, partitions=1)
    yield topic
    kafka_admin.delete_until_gone(topic, 30)
