"""Fixtures for multi-process cluster tests: clusters of node processes on the suite's broker."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from metastore.dev.kafka_cluster import free_ports
from metastore.dev.node_cluster import LocalNodeCluster, NodeClusterState
from tests.support.servers import NO_PROCESSING_LOG
from tests.support.waiting import eventually


@pytest.fixture
def chaos_seconds(request: pytest.FixtureRequest) -> float:
    return float(request.config.getoption("--chaos-seconds"))


class Cluster:
    """Nodes of one service as separate `metastore server` processes, on free ports."""

    def __init__(self, root: Path, bootstrap: str) -> None:
        self.nodes = LocalNodeCluster(root)
        self.bootstrap = bootstrap
        self.service_id = f"it-{uuid.uuid4().hex[:10]}"
        self.state: NodeClusterState | None = None

    def up(self, count: int, *extra: str) -> NodeClusterState:
        args = ("--spark-master", "none", "--request-timeout", "20", *NO_PROCESSING_LOG, *extra)
        self.state = self.nodes.up(count, self.service_id, self.bootstrap, args,
                                   ports=free_ports(count))
        return self.state

    def url(self, name: str) -> str:
        state = self.nodes.state()
        assert state is not None
        return state.node(name).url

    def urls(self) -> list[str]:
        state = self.nodes.state()
        return [] if state is None else [n.url for n in state.nodes if self.nodes.is_running(n)]

    def ksql(self, name: str, text: str, **extra: Any) -> httpx.Response:
        return httpx.post(f"{self.url(name)}/ksql", json={"ksql": text, **extra}, timeout=60)

    def status(self, name: str) -> dict[str, Any]:
        return dict(httpx.get(f"{self.url(name)}/v1/metastore", timeout=30).json())

    def converged(self, timeout: float = 60) -> dict[str, tuple[int, str]]:
        """Each running node's (applied offset, fingerprint) once they all agree."""
        seen: dict[str, tuple[int, str]] = {}

        def agreed() -> dict[str, tuple[int, str]] | None:
            state = self.nodes.state()
            assert state is not None
            seen.clear()
            for node in state.nodes:
                if self.nodes.is_running(node):
                    status = httpx.get(f"{node.url}/v1/metastore", timeout=30).json()
                    seen[node.name] = (status["appliedOffset"], status["imageFingerprint"])
            return dict(seen) if len(set(seen.values())) == 1 else None

        return eventually(agreed, timeout, lambda: f"the nodes to converge: {seen}", interval=0.3)

    def down(self) -> None:
        self.nodes.down()


@pytest.fixture
def cluster_factory(kafka_bootstrap: str, tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    made: list[Cluster] = []

    def make(bootstrap: str | None = None) -> Cluster:
        cluster = Cluster(tmp_path / f"cluster-{len(made)}", bootstrap or kafka_bootstrap)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.down()
