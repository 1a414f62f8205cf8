"""`latency`: sequential CREATE STREAM over REST against the Kafka transaction floor.

The floor is measured in the same run, against the same broker, with a bare confluent-kafka
transactional producer: begin+produce+commit with a reused producer, and
init+begin+produce+commit with a fresh one (what ksqlDB pays per statement). The in-process run
also times the writer's steps (:func:`step_timers`): where a statement's time goes.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from confluent_kafka import Producer

from integration.bench.common import kafka, node_processes, summary_ms
from metastore.kafka.admin import Admin
from metastore.kafka.consumer import EndOffsetProbe
from metastore.kafka.producer import TransactionalProducer
from metastore.kafka.settings import KafkaSettings
from metastore.log.writer import CommandWriter, KafkaTopicFacts
from metastore.server.node import Node, NodeConfig

STEPS: dict[str, tuple[type, str]] = {
    "whole statement (Node.execute)": (Node, "execute"),
    "last stable offset (ListOffsets)": (EndOffsetProbe, "end_offset"),
    "topic facts (Metadata, beside ListOffsets)": (KafkaTopicFacts, "prefetch"),
    "validation": (CommandWriter, "_validate"),
    "begin transaction": (TransactionalProducer, "begin"),
    "produce, flush and commit": (TransactionalProducer, "commit"),
    "apply the written record": (CommandWriter, "_apply_committed"),
}
"""The writer's steps the in-process run times, by the method that does each."""


@contextlib.contextmanager
def step_timers() -> Iterator[dict[str, list[float]]]:
    """Time every call of :data:`STEPS`' methods in this process while the block runs (the
    benchmark's own instrumentation: the classes are restored afterwards)."""
    samples: dict[str, list[float]] = {name: [] for name in STEPS}
    originals = []
    for name, (cls, method) in STEPS.items():
        original = getattr(cls, method)
        originals.append((cls, method, original))

        def timed(*args: Any, __original: Callable[..., Any] = original,
                  __into: list[float] = samples[name], **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return __original(*args, **kwargs)
            finally:
                __into.append(time.perf_counter() - started)

        setattr(cls, method, timed)
    try:
        yield samples
    finally:
        for cls, method, original in originals:
            setattr(cls, method, original)


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
        for index in range(5):
            node.execute(create(index, topic))
        with step_timers() as steps:
            for index in range(5, count + 5):
                started = time.perf_counter()
                node.execute(create(index, topic))
                samples.append(time.perf_counter() - started)
    finally:
        node.stop()
    return summary_ms(samples) | {"steps_p50_ms": {
        name: summary_ms(timed)["p50_ms"] for name, timed in steps.items() if timed}}


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
