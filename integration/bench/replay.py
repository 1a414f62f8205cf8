"""`replay`: rebuilding the image from the log, in memory and from Kafka, and start-to-READY."""

from __future__ import annotations

import gc
import subprocess
import sys
import time
from typing import Any

import httpx
from confluent_kafka import Producer

from integration.bench.common import kafka, records, wait_healthy
from metastore.catalog.image import EMPTY_IMAGE
from metastore.kafka.settings import KafkaSettings
from metastore.local.kafka_cluster import free_ports
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
    [port] = free_ports(1)
    command = [sys.executable, "-m", "cli.main", "server", "--bootstrap-servers", bootstrap,
               "--service-id", service_id, "--node-id", f"bench-{port}",
               "--listen", f"127.0.0.1:{port}"]
    if not spark:
        command += ["--spark-master", "none"]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(process, f"http://127.0.0.1:{port}")
        ready = time.perf_counter() - started
        if spark:
            while not httpx.get(f"http://127.0.0.1:{port}/v1/metastore").json()["sparkInSync"]:
                time.sleep(0.2)
            return round(time.perf_counter() - started, 2)
        return round(ready, 2)
    finally:
        process.terminate()
        process.wait(30)


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
