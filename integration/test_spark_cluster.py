"""Persistent queries on a real Spark standalone cluster of two workers (started from the
installed pyspark's distribution), with real Kafka and two nodes as separate processes.

A filter CSAS and a windowed CTAS run with their tasks on the workers' executors, as the nodes'
Spark applications report through Spark's REST status API; a worker is killed mid-stream (its
executors with it) and Spark reschedules; then the node that drives the windowed CTAS is killed
and the other node takes its queries over from the shared checkpoint. The sinks end with every
input record exactly once after deduplication by source offset, and the window counts exact."""

from __future__ import annotations

import json
import os
import signal
import struct
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from integration.conftest import Cluster
from integration.query_cluster import (
    WINDOW_BASE_MS,
    latest_by_key,
    read_to_end,
    show_queries,
    wait_owner,
)
from metastore.dev.spark_cluster import (
    LocalSparkCluster,
    SparkClusterState,
    application_executors,
    worker_status,
)
from metastore.dev.stack import spark_node_args
from metastore.kafka.settings import KafkaSettings
from tests.support.waiting import eventually

ClusterFactory = Callable[..., Cluster]


@pytest.fixture
def spark_cluster(tmp_path: Path) -> Iterator[SparkClusterState]:
    cluster = LocalSparkCluster(tmp_path / "spark", workers=2, worker_cores=2,
                                worker_memory_mb=1024)  # an executor for each of 2 nodes
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def application(cluster: Cluster, node: str, timeout: float = 120) -> dict[str, Any]:
    """The node's Spark application, once its Spark started (after the node is READY)."""
    found = eventually(lambda: cluster.status(node)["sparkApplication"], timeout,
                       f"{node} to report its Spark application", interval=0.5)
    assert found["uiUrl"], "on a cluster the node's Spark UI is on"
    return dict(found)


def tasks_by_worker(cluster: Cluster, state: SparkClusterState, nodes: set[str]
                    ) -> dict[str, int]:
    """Tasks the applications of ``nodes`` ran on each worker's executors: a worker's own
    status names its executors and their applications, each application's driver counts their
    tasks."""
    per_worker: Counter[str] = Counter()
    for node in nodes:
        app = application(cluster, node)
        tasks = {str(e["id"]): int(e["totalTasks"])
                 for e in application_executors(app["uiUrl"], app["applicationId"])}
        assert tasks.get("driver", 0) == 0, "the driver runs no task on a cluster"
        for worker in state.workers:
            status = worker_status(worker) or {}
            for executor in status.get("executors", []):
                if executor.get("appid") == app["applicationId"]:
                    per_worker[worker.name] += tasks.get(str(executor["id"]), 0)
    return dict(per_worker)


def wait_tasks_on_workers(cluster: Cluster, state: SparkClusterState, nodes: set[str],
                          workers: set[str], timeout: float) -> dict[str, int]:
    """``tasks_by_worker`` once each of ``workers`` counts a task (AssertionError at
    ``timeout``). A driver counts a task when its listener bus delivers the task's end, after
    the task wrote its output: the output alone does not say the count is there yet."""
    ran: dict[str, int] = {}

    def on_each_worker() -> dict[str, int] | None:
        nonlocal ran
        ran = tasks_by_worker(cluster, state, nodes)
        return ran if all(ran.get(worker, 0) > 0 for worker in workers) else None

    return eventually(on_each_worker, timeout,
                      lambda: f"a task on each of {sorted(workers)}, tasks per worker {ran}",
                      interval=1)


def wait_moved(cluster: Cluster, dead: set[str], query_id: str, timeout: float) -> str:
    """The node that runs ``query_id`` once it left the ``dead`` nodes."""
    alive = [f"node-{n}" for n in (1, 2) if f"node-{n}" not in dead]
    seen: dict[str, Any] = {}

    def owner() -> str | None:
        nonlocal seen
        seen = show_queries(cluster, alive[0]).get(query_id, {})
        if seen.get("state") == "RUNNING" and seen.get("ownerNode") in alive:
            return str(seen["ownerNode"])
        return None

    return eventually(owner, timeout, lambda: f"{query_id} RUNNING on one of {alive}: {seen}",
                      interval=0.5)


class _PhasedProducer:
    """Produces ``total`` JSON records (ID, G) to ``topic`` in three phases, each when its
    event in ``phases`` is set; ``produced`` tells when each phase is flushed."""

    def __init__(self, bootstrap: str, topic: str, total: int, groups: int) -> None:
        self.bootstrap, self.topic, self.total, self.groups = bootstrap, topic, total, groups
        self.phases = [threading.Event() for _ in range(3)]
        self.produced = [threading.Event() for _ in range(3)]

    def start(self) -> None:
        threading.Thread(target=self._produce, daemon=True).start()

    def _produce(self) -> None:
        producer = Producer(KafkaSettings(self.bootstrap).config(linger_ms=5))
        per_phase = self.total // len(self.phases)
        for phase, (go, done) in enumerate(zip(self.phases, self.produced, strict=True)):
            if not go.wait(600):
                return
            for i in range(phase * per_phase, (phase + 1) * per_phase):
                producer.produce(self.topic, key=struct.pack(">i", i % 11),
                                 value=json.dumps({"ID": i, "G": i % self.groups}),
                                 timestamp=WINDOW_BASE_MS + i * 100)
                producer.poll(0)
                time.sleep(0.01)
            producer.flush(30)
            done.set()


def _exactly_once(bootstrap: str, kept: str, counts: str, expected: set[int],
                  expected_counts: dict[int, int]) -> list[tuple[int, str]]:
    """Wait until the CSAS's sink holds every kept record and the windowed CTAS's the exact
    counts; check each record is there once by its source offset; the CSAS's records."""
    final: dict[int, int] = {}
    records: list[tuple[int, str]] = []

    def complete() -> bool:
        nonlocal records, final
        records = [(json.loads(m.value() or b"null")["ID"],
                    dict(m.headers() or [])["metastore.source"].decode())
                   for m in read_to_end(bootstrap, kept)]
        final = {struct.unpack(">iq", key)[0]: json.loads(value or b"null")["N"]
                 for key, value in latest_by_key(bootstrap, counts).items()}
        return {i for i, _ in records} >= expected and final == expected_counts

    eventually(complete, 240, lambda: (
        f"every kept record and exact window counts: {len(expected - {i for i, _ in records})} "
        f"kept records missing, counts {final}, expected {expected_counts}"), interval=3)
    by_source: dict[str, set[int]] = {}
    for i, coordinates in records:
        by_source.setdefault(coordinates, set()).add(i)
    assert all(len(ids) == 1 for ids in by_source.values())
    assert sorted(i for ids in by_source.values() for i in ids) == sorted(expected), (
        "deduplicated by source offset: every kept record exactly once, no gap")
    assert final == expected_counts, "each window count is exact after both failures"
    return records


@pytest.mark.timeout(900)
def test_queries_run_on_the_workers_and_survive_a_worker_and_their_driver(
        cluster_factory: ClusterFactory,
        spark_cluster: SparkClusterState) -> None:
    state = spark_cluster
    cluster = cluster_factory()
    cluster.up(2, *spark_node_args(state), "--query-session-timeout-ms", "6000")
    for node in ("node-1", "node-2"):
        assert application(cluster, node)["master"] == state.master_url
    source = f"in-{uuid.uuid4().hex[:6]}"
    kept, counts = f"kept-{uuid.uuid4().hex[:6]}", f"counts-{uuid.uuid4().hex[:6]}"
    created = cluster.ksql("node-1", f"""
        CREATE STREAM EVENTS (K INT KEY, ID INT, G INT)
            WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON', PARTITIONS=2);
        CREATE STREAM KEPT WITH (KAFKA_TOPIC='{kept}', PARTITIONS=1) AS
            SELECT K, ID FROM EVENTS WHERE ID % 3 <> 0 EMIT CHANGES;
        CREATE TABLE COUNTS WITH (KAFKA_TOPIC='{counts}', PARTITIONS=1) AS
            SELECT G, COUNT(*) AS N FROM EVENTS WINDOW TUMBLING (SIZE 1 HOUR) GROUP BY G;""")
    assert created.status_code == 200, created.text
    query_ids = [created.json()[i]["commandStatus"]["queryId"] for i in (1, 2)]
    for query_id in query_ids:
        wait_owner(cluster, "node-1", query_id, 240)

    total, groups = 3000, 5
    producer = _PhasedProducer(cluster.bootstrap, source, total, groups)
    phases, produced = producer.phases, producer.produced
    producer.start()
    phases[0].set()
    eventually(lambda: read_to_end(cluster.bootstrap, kept) and latest_by_key(cluster.bootstrap, counts),
               120, "the CSAS and the windowed CTAS to write on the cluster", interval=1)
    assert read_to_end(cluster.bootstrap, kept), "the CSAS writes on the cluster"
    assert latest_by_key(cluster.bootstrap, counts), "the windowed CTAS writes on the cluster"
    owner_of = {query_id: wait_owner(cluster, "node-1", query_id, 60) for query_id in query_ids}
    owners = set(owner_of.values())
    ran = wait_tasks_on_workers(cluster, state, owners, {"worker-1", "worker-2"}, 60)
    assert set(ran) == {"worker-1", "worker-2"} and all(ran.values()), (
        f"the queries' tasks ran on both workers' executors: {ran}")

    victim = state.worker("worker-1")
    assert victim.pid is not None
    os.killpg(victim.pid, signal.SIGKILL)  # the worker and its executors: a lost machine
    phases[1].set()  # records go on arriving while Spark reschedules on worker-2
    assert produced[1].wait(120)
    time.sleep(5)
    for query_id in query_ids:  # the queries never stopped
        assert show_queries(cluster, "node-1")[query_id]["state"] == "RUNNING"

    victim_node = owner_of[query_ids[1]]  # the windowed CTAS's driver dies between two
    assert cluster.nodes.stop_node(victim_node, signal.SIGKILL)  # phases of the stream
    phases[2].set()
    new_owners = {wait_moved(cluster, {victim_node}, query_id, 180) for query_id in query_ids}
    assert produced[2].wait(180)

    expected = {i for i in range(total) if i % 3 != 0}
    records = _exactly_once(cluster.bootstrap, kept, counts, expected,
                            dict(Counter(i % groups for i in range(total))))
    ran_after = wait_tasks_on_workers(cluster, state, new_owners, {"worker-2"}, 60)
    assert ran_after.get("worker-2", 0) > 0, f"the queries run on the worker left: {ran_after}"
    on_worker_2 = {(e.get("appid"), str(e.get("id")))
                   for e in (worker_status(state.worker("worker-2")) or {}).get("executors", [])}
    for node in new_owners:
        app = application(cluster, node)
        active = {(app["applicationId"], str(e["id"]))
                  for e in application_executors(app["uiUrl"], app["applicationId"])
                  if e["id"] != "driver" and e.get("isActive")}
        assert active and active <= on_worker_2, f"{node}'s executors are worker-2's: {active}"
    print(f"\nkilled worker-1, then {victim_node}; the queries run on {sorted(new_owners)}; "
          f"{len(records)} records for {len(expected)} kept; tasks per worker before {ran}, "
          f"after {ran_after}")
