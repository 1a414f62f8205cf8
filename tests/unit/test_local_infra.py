"""Pure pieces of the local infrastructure."""

from __future__ import annotations

from metastore.local.kafka_cluster import new_cluster_id


def test_cluster_ids_never_look_like_options() -> None:
    ids = {new_cluster_id() for _ in range(5000)}
    assert len(ids) == 5000
    assert not any(cluster_id.startswith("-") for cluster_id in ids)
    assert all(len(cluster_id) == 22 for cluster_id in ids)
