"""`latency`: sequential CREATE STREAM over REST against the Kafka transaction floor.

The floor is measured in the same run, against the same broker, with a bare confluent-kafka
transactional producer: begin+produce+commit with a reused producer, and
init+begin+produce+commit with a fresh one (what ksqlDB pays per statement).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
from confluent_kafka import Producer

from integration.bench.common import kafka, node_processes, summary_ms
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from metastore.node import Node, NodeConfig


def floor(bootstrap: str, count: int) -> dict[str, Any]:
    topic = f"bench-floor-{uuid.uuid4().hex[:8]}"
    Admin(KafkaSettings(bootstrap)).create(topic, 1)
    reused = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"floor-{topic}",
                       "linger.ms": 0})
    reused.init_transactions(30)
    samples = []
    for index in range(count):
        started = time.perf_counter()
        reused.begin_transaction()
        reused.produce(topic, value=str(index).encode())
        reused.flush(30)  # delivering first, then committing, is the fastest way librdkafka offers
        reused.commit_transaction(30)
        samples.append(time.perf_counter() - started)
    fresh_samples = []
    for index in range(max(count // 5, 20)):
        started = time.perf_counter()
        fresh = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"fresh-{topic}",
                          "linger.ms": 0})
        fresh.init_transactions(30)
        fresh.begin_transaction()
        fresh.produce(topic, value=str(index).encode())
        fresh.flush(30)
        fresh.commit_transaction(30)
        fresh_samples.append(time.perf_counter() - started)
    return {"reused_producer": summary_ms(samples) | {"samples_ms": [s * 1000 for s in samples]},
            "fresh_producer": summary_ms(fresh_samples)
            | {"samples_ms": [s * 1000 for s in fresh_samples]}}


def statements(bootstrap: str, count: int) -> dict[str, Any]:
    """Sequential statements over REST to one node process; the first 5 are warm-up."""
    with node_processes(bootstrap, 1, "--spark-master", "none") as state:
        [node] = state.nodes
        topic = f"{state.service_id}-data"
        Admin(KafkaSettings(bootstrap)).create(topic, 1)
        samples = []
        with httpx.Client(base_url=node.url, timeout=60) as client:
            for index in range(count + 5):
                body = {"ksql": create(index, topic)}
                started = time.perf_counter()
                response = client.post("/ksql", json=body)
                elapsed = time.perf_counter() - started
                assert response.status_code == 200, response.text
                if index >= 5:  # the first statements pay init_transactions and warm-up
                    samples.append(elapsed)
    return summary_ms(samples) | {"samples_ms": [s * 1000 for s in samples]}


def in_process(bootstrap: str, count: int) -> dict[str, Any]:
    """The same statements through ``Node.execute`` in this process: the latency without HTTP."""
    node = Node(NodeConfig(service_id=f"bench-inproc-{uuid.uuid4().hex[:8]}",
                           bootstrap_servers=bootstrap))
    node.start()
    try:
        assert node.replica.wait_ready(60)
        topic = f"{node.config.service_id}-data"
        node.admin.create(topic, 1)
        samples = []
        for index in range(count + 5):
            started = time.perf_counter()
            node.execute(create(index, topic))
            if index >= 5:
                samples.append(time.perf_counter() - started)
    finally:
        node.stop()
    return summary_ms(samples)


def create(index: int, topic: str) -> str:
    return (f"CREATE STREAM S{index} (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{topic}', "
            "VALUE_FORMAT='JSON');")


def run(quick: bool) -> dict[str, Any]:
    count = 100 if quick else 500
    with kafka() as bootstrap:
        floor(bootstrap, 500)  # warm-up, unmeasured: a fresh broker's first few hundred
        # transactions take several times longer (its JIT), which would flatter the ratio
        bare = floor(bootstrap, count)
        measured = statements(bootstrap, count)
        without_http = in_process(bootstrap, count)
    reused = bare["reused_producer"]["p50_ms"]
    return {"statement_over_rest": measured, "statement_in_process": without_http, "floor": bare,
            "ratio_p50_to_reused_floor": round(measured["p50_ms"] / reused, 2),
            "ratio_p50_to_fresh_floor": round(measured["p50_ms"] / bare["fresh_producer"]["p50_ms"], 2)}
