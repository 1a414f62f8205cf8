"""The local development environment: where `metastore dev` keeps Kafka and nodes."""

from __future__ import annotations

import os

from metastore.local.kafka_cluster import LocalKafkaCluster
from metastore.local.node_cluster import LocalNodeCluster
from metastore.local.paths import dev_dir


def external_bootstrap() -> str | None:
    return os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or None


def local_kafka(brokers: int = 1) -> LocalKafkaCluster:
    return LocalKafkaCluster(dev_dir() / "kafka", brokers=brokers)


def local_nodes() -> LocalNodeCluster:
    return LocalNodeCluster(dev_dir() / "nodes")


def ensure_kafka(brokers: int = 1) -> str:
    """KAFKA_BOOTSTRAP_SERVERS, or the local Kafka (started, with ``brokers`` brokers)."""
    external = external_bootstrap()
    if external:
        return external
    cluster = local_kafka(brokers)
    existing = cluster.state()
    if existing is not None and len(existing.nodes) != brokers:
        cluster.stop()
        cluster.wipe()
    return cluster.start().bootstrap_servers
