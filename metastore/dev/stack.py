"""The local development environment: where `metastore dev` keeps Kafka, Spark, the Schema
Registry, the Kafka Connect worker, PostgreSQL and nodes."""

from __future__ import annotations

import os

from metastore.dev.connect_worker import LocalConnect
from metastore.dev.kafka_cluster import LocalKafkaCluster
from metastore.dev.node_cluster import LocalNodeCluster
from metastore.dev.paths import dev_dir
from metastore.dev.postgres import LocalPostgres
from metastore.dev.schema_registry import LocalSchemaRegistry
from metastore.dev.spark_cluster import LocalSparkCluster, SparkClusterState


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


def local_spark(workers: int = 2, nodes: int = 1) -> LocalSparkCluster:
    """The local Spark standalone cluster, sized so that each of ``nodes`` nodes gets one
    executor (1 core, 512 MB) on every worker at once."""
    return LocalSparkCluster(dev_dir() / "spark", workers=workers, worker_cores=max(nodes, 1),
                             worker_memory_mb=max(nodes, 1) * 768)


def spark_node_args(state: SparkClusterState) -> tuple[str, ...]:
    """The server arguments of a node that drives its queries on ``state``'s cluster."""
    conf = [arg for key, value in state.node_spark_conf().items()
            for arg in ("--spark-conf", f"{key}={value}")]
    return ("--spark-master", state.master_url, *conf)


def local_schema_registry() -> LocalSchemaRegistry:
    return LocalSchemaRegistry(dev_dir() / "schema-registry")


def ensure_schema_registry() -> str:
    """METASTORE_SCHEMA_REGISTRY_URL, or the local Schema Registry's URL (started if needed)."""
    external = os.environ.get("METASTORE_SCHEMA_REGISTRY_URL")
    if external:
        return external
    return local_schema_registry().start().url


def local_connect() -> LocalConnect:
    return LocalConnect(dev_dir() / "connect")


def local_postgres() -> LocalPostgres:
    return LocalPostgres(dev_dir() / "postgres")
