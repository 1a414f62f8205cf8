"""`replay`: rebuilding the image from the log, in memory and from Kafka, and start-to-READY."""

from __future__ import annotations

import gc
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from integration.bench.common import fill, kafka, records
from metastore.catalog.image import EMPTY_IMAGE, Image
from metastore.dev.kafka_cluster import free_ports
from metastore.dev.node_cluster import LocalNodeCluster
from metastore.kafka.settings import KafkaSettings
from metastore.log.reader import LogReplica
from metastore.log.replay import pause_collector, replay_encoded, resume_collector
from metastore.log.topic import command_topic_name


def in_memory(count: int) -> dict[str, Any]:
    encoded = [r.encode()[1] for r in records(count)]
    started = time.perf_counter()
    pause_collector()  # as a replica's catch-up holds it, then freezes what it built
    image = replay_encoded(EMPTY_IMAGE, enumerate(encoded)).image
    resume_collector(freeze=True)
    seconds = time.perf_counter() - started
    gc.unfreeze()
    return {"records": count, "seconds": round(seconds, 3),
            "records_per_s": round(count / seconds), "sources": len(image.sources),
            "apply_one_more_ms": _apply_one_more_ms(image, encoded[1])}


def _apply_one_more_ms(image: Image, value: bytes) -> float:
    """The median time to apply one more record to ``image``: what a node's replica (and the
    validator, which stages a request on a delta of the same image) pays per statement."""
    offset = image.offset + 1
    samples = []
    for _ in range(21):
        started = time.perf_counter()
        replay_encoded(image, [(offset, value)])
        samples.append(time.perf_counter() - started)
    return round(sorted(samples)[len(samples) // 2] * 1000, 3)


def from_kafka(bootstrap: str, service_id: str, count: int) -> dict[str, Any]:
    replica = LogReplica(KafkaSettings(bootstrap), command_topic_name(service_id),
                         group_id=f"{service_id}-bench")
    started = time.perf_counter()
    replica.start()
    assert replica.wait_ready(600)
    seconds = time.perf_counter() - started
    replica.stop()
    return {"records": count, "seconds": round(seconds, 3), "records_per_s": round(count / seconds)}


def _startup(url: str) -> dict[str, Any]:
    return dict(httpx.get(f"{url}/v1/metastore", timeout=60).json()["startup"])


def restarts(bootstrap: str, service_id: str, spark: bool) -> dict[str, Any]:
    """Process start to READY: a first start (full replay), a restart from the checkpoint the
    first start wrote, and a new node bootstrapping from the snapshot topic.

    ``readySeconds`` is measured by the node from the kernel's start time of its process to the
    replica becoming READY; ``observed`` is the launcher's wall clock from spawning the process to
    the first healthy answer (it also counts the HTTP server's start and a 0.2 s polling step).
    """
    with tempfile.TemporaryDirectory(prefix="metastore-bench-ready-") as root:
        nodes = LocalNodeCluster(Path(root))
        args = ("--checkpoint-every-records", "1000", *(() if spark else ("--spark-master", "none")))
        ports = free_ports(2)
        try:
            started = time.perf_counter()
            [node] = nodes.up(1, service_id, bootstrap, args, ports=ports[:1]).nodes
            first = _observed(started, node.url)
            while spark and not httpx.get(f"{node.url}/v1/metastore").json()["sparkInSync"]:
                time.sleep(0.2)
            deadline = time.monotonic() + 300
            while _startup(node.url)["checkpoints"]["published"] < 1:
                assert time.monotonic() < deadline, "no checkpoint was written"
                time.sleep(0.1)
            checkpoint = _startup(node.url)["checkpoints"]
            nodes.stop_node(node.name)
            started = time.perf_counter()
            nodes.start_node(node.name)
            restart = _observed(started, node.url)
            nodes.add_node("node-2", ports[1], args)
            started = time.perf_counter()
            state = nodes.start_node("node-2")
            joiner = state.node("node-2")
            joined = _observed(started, joiner.url)
            return {"first_start": _brief(first), "restart": _brief(restart),
                    "new_node_from_snapshot": _brief(joined),
                    "checkpoint": {"write_s": checkpoint["lastSeconds"],
                                   "bytes": checkpoint["lastBytes"]}}
        finally:
            nodes.down()


def _observed(started: float, url: str) -> dict[str, Any]:
    observed = round(time.perf_counter() - started, 2)  # before asking for the status
    return {**_startup(url), "observed": observed}


def _brief(startup: dict[str, Any]) -> dict[str, Any]:
    return {"ready_s": startup["readySeconds"], "observed_s": startup["observed"],
            "restore_s": startup["restoreSeconds"],
            "resumed_from": startup["resumedFrom"], "records_replayed": startup["recordsReplayed"]}


def run(quick: bool) -> dict[str, Any]:
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    results: dict[str, Any] = {"in_memory": [in_memory(n) for n in sizes], "from_kafka": [],
                               "start_to_ready_s": []}
    with kafka() as bootstrap:
        for size in sizes:
            service_id = f"bench-replay-{size}-{time.time_ns()}"
            fill(bootstrap, command_topic_name(service_id), size)
            results["from_kafka"].append(from_kafka(bootstrap, service_id, size))
            results["start_to_ready_s"].append(
                {"records": size, **restarts(bootstrap, service_id, spark=False)})
    return results
