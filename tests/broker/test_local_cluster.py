"""The local launcher's three-broker cluster: replication sized for it, and a clean stop."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient

from metastore.dev.kafka_cluster import LocalKafkaCluster
from metastore.kafka.admin import Admin
from metastore.kafka.producer import TransactionalProducer
from metastore.kafka.settings import KafkaSettings


def test_three_broker_cluster_starts_replicates_and_stops(tmp_path: Path) -> None:
    cluster = LocalKafkaCluster(tmp_path / "three", brokers=3)
    state = cluster.start(progress=None)
    try:
        settings = KafkaSettings(state.bootstrap_servers)
        assert Admin(settings).broker_count() == 3
        producer = TransactionalProducer(settings, "three-broker-check")
        producer.init()  # creates the transaction state topic, replicated 3 times
        producer.close()
        metadata = AdminClient({"bootstrap.servers": state.bootstrap_servers}).list_topics(timeout=10)
        transaction_state = metadata.topics["__transaction_state"]
        assert {len(p.replicas) for p in transaction_state.partitions.values()} == {3}
        pids = [node.pid for node in cluster.running_nodes()]
        assert len(pids) == 3
    finally:
        stopped = cluster.stop()
    assert stopped == 3
    assert cluster.running_nodes() == []
    assert not any(Path(f"/proc/{pid}").exists() and b"three" in
                   Path(f"/proc/{pid}/cmdline").read_bytes() for pid in pids if pid)
