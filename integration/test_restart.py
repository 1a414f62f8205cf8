"""Fast restart with node processes: checkpoints survive a SIGKILL mid-write and agree with the log."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from integration.conftest import Cluster
from metastore.dev.processes import pid_exists
from tests.support.servers import NO_PROCESSING_LOG
from tests.support.waiting import eventually

ClusterFactory = Callable[..., Cluster]
NO_SPARK = ("--spark-master", "none", "--request-timeout", "20", *NO_PROCESSING_LOG)


def create(name: str) -> str:
    return (f"CREATE STREAM {name} (ID INT KEY, V STRING) "
            f"WITH (KAFKA_TOPIC='{name.lower()}', VALUE_FORMAT='JSON', PARTITIONS=1);")


def startup(cluster: Cluster, name: str) -> dict:  # type: ignore[type-arg]
    return dict(cluster.status(name)["startup"])


def wait_for_checkpoint(cluster: Cluster, name: str, offset: int) -> None:
    eventually(lambda: _or_minus_one(startup(cluster, name)["checkpoints"]["lastOffset"]) >= offset,
               30, lambda: f"a checkpoint at {offset}: {startup(cluster, name)}", interval=0.1)


def _or_minus_one(offset: int | None) -> int:
    return -1 if offset is None else offset


def log_verify(cluster: Cluster, *args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    done = subprocess.run([sys.executable, "-m", "cli.main", "log", "verify", "--json",
                           "--bootstrap-servers", cluster.bootstrap, "--service-id",
                           cluster.service_id, *args], capture_output=True, text=True, timeout=120,
                          check=False)
    return done.returncode, json.loads(done.stdout)


def test_sigkill_while_writing_a_checkpoint_then_restart_is_correct(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory()
    every = ("--checkpoint-every-records", "6", "--no-snapshots")
    cluster.up(1, *every)
    for index in range(4):  # a record and a commit marker each: a checkpoint at offset 6
        assert cluster.ksql("node-1", create(f"FIRST{index}")).status_code == 200
    wait_for_checkpoint(cluster, "node-1", 6)

    cluster.nodes.stop_node("node-1")
    state = cluster.nodes.start_node("node-1", extra_args=(
        *NO_SPARK, *every, "--fault-injection", "die-during-checkpoint"))
    assert startup(cluster, "node-1")["resumedOffset"] == 6
    pid = state.node("node-1").pid
    assert pid is not None
    for index in range(6):  # the checkpoint due at offset 12 kills the node half-way through
        try:
            cluster.ksql("node-1", create(f"SECOND{index}"))
        except httpx.TransportError:
            break
    eventually(lambda: not pid_exists(pid), 30, "the fault injection to kill the node",
               interval=0.1)
    checkpoints = Path(cluster.nodes.root) / "node-1" / "checkpoints"
    assert any(p.name.endswith(".tmp") for p in checkpoints.iterdir()), "no half-written file"

    cluster.nodes.start_node("node-1", extra_args=(*NO_SPARK, *every))
    after = startup(cluster, "node-1")
    assert after["resumedOffset"] == 6, after  # the torn write left the previous checkpoint
    code, verified = log_verify(cluster, "--node", cluster.url("node-1"),
                                "--checkpoint", str(checkpoints.parent))
    assert code == 0, verified
    assert verified["node"]["agrees"] and verified["checkpoint"]["agrees"]
    assert verified["checkpoint"]["offset"] >= 6  # the restarted node may have checkpointed again
    assert verified["sources"] >= 7  # FIRST0-3 and SECOND0-2 at least


def test_log_verify_rejects_a_checkpoint_that_disagrees_with_the_log(
        cluster_factory: ClusterFactory, tmp_path: Path) -> None:
    cluster = cluster_factory()
    cluster.up(1, "--checkpoint-every-records", "1", "--no-snapshots")
    assert cluster.ksql("node-1", create("ONLY")).status_code == 200
    wait_for_checkpoint(cluster, "node-1", 0)
    other = cluster_factory()
    other.up(1, "--no-snapshots")
    assert other.ksql("node-1", create("ELSEWHERE")).status_code == 200
    checkpoint_dir = Path(cluster.nodes.root) / "node-1"
    code, verified = log_verify(other, "--checkpoint", str(checkpoint_dir))
    assert code == 1
    assert not verified["checkpoint"]["agrees"]
    assert "belongs to service" in verified["checkpoint"]["problem"]
    cluster.nodes.stop_node("node-1", signal.SIGTERM)
