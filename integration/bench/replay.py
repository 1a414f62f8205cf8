"""`replay`: rebuilding the image from the log, in memory and from Kafka, and start-to-READY."""

from __future__ import annotations

import gc
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer

from integration.bench.common import kafka, records
from metastore.catalog.image import EMPTY_IMAGE
from metastore.kafka.settings import KafkaSettings
from metastore.local.kafka_cluster import free_ports
from metastore.local.node_cluster import LocalNodeCluster
from metastore.log.reader import LogReplica
from metastore.log.replay import replay_encoded
from metastore.log.topic import command_topic_name


def in_memory(count: int) -> dict[str, Any]:
    encoded = [r.encode()[1] for r in records(count)]
    started = time.perf_counter()
    image = replay_encoded(EMPTY_IMAGE, enumerate(encoded)).image
    gc.freeze()  # as the replica does once caught up, instead of a full collection
    seconds = time.perf_counter() - started
    gc.unfreeze()
    return {"records": count, "seconds": round(seconds, 3),
            "records_per_s": round(count / seconds), "sources": len(image.sources)}


def fill(bootstrap: str, topic: str, count: int) -> None:
    from metastore.kafka.admin import Admin
    from metastore.log.topic import CommandTopicSpec, ensure_command_topic

    ensure_command_topic(Admin(KafkaSettings(bootstrap)), CommandTopicSpec(topic), 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.num.messages": 10000, "compression.type": "lz4"})
    for record in records(count):
        key, value = record.encode()
        while True:
            try:
                producer.produce(topic, key=key, value=value)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(120)


def from_kafka(bootstrap: str, service_id: str, count: int) -> dict[str, Any]:
    replica = LogReplica(KafkaSettings(bootstrap), command_topic_name(service_id),
                         group_id=f"{service_id}-bench")
    started = time.perf_counter()
    replica.start()
    assert replica.wait_ready(600)
    seconds = time.perf_counter() - started
    replica.stop()
    return {"records": count, "seconds": round(seconds, 3), "records_per_s": round(count / seconds)}


def start_to_ready(bootstrap: str, service_id: str, spark: bool) -> float:
    """Seconds from starting a node process on an existing log to READY (or Spark in sync)."""
    with tempfile.TemporaryDirectory(prefix="metastore-bench-ready-") as root:
        nodes = LocalNodeCluster(Path(root))
        args = () if spark else ("--spark-master", "none")
        started = time.perf_counter()
        try:
            [node] = nodes.up(1, service_id, bootstrap, args, ports=free_ports(1)).nodes
            while spark and not httpx.get(f"{node.url}/v1/metastore").json()["sparkInSync"]:
                time.sleep(0.2)
            return round(time.perf_counter() - started, 2)
        finally:
            nodes.down()


def run(quick: bool) -> dict[str, Any]:
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    results: dict[str, Any] = {"in_memory": [in_memory(n) for n in sizes], "from_kafka": [],
                               "start_to_ready_s": []}
    with kafka() as bootstrap:
        for size in sizes:
            service_id = f"bench-replay-{size}-{time.time_ns()}"
            fill(bootstrap, command_topic_name(service_id), size)
            results["from_kafka"].append(from_kafka(bootstrap, service_id, size))
            entry = {"records": size, "without_spark": start_to_ready(bootstrap, service_id, False)}
            if size == sizes[0]:  # every source is two Spark objects: larger logs take minutes
                entry["with_spark_in_sync"] = start_to_ready(bootstrap, service_id, True)
            results["start_to_ready_s"].append(entry)
    return results
