"""`pipeline`: persistent queries on Spark, against the same queries written by hand in PySpark.

One source topic of JSON records (1,000,000; 100,000 with ``--quick``) is read by two queries,
each run three times in the same run on the same broker: as the floor, the query written by hand
(:mod:`integration.bench.pipeline_floor`, a Spark session like a node's), then as a persistent
query of a `metastore server` node (``local[1]``, as a node runs them by default) at-least-once,
its default, and exactly-once (``processing.guarantee='exactly_once_v2'``, a node of its own: its
micro-batches written in Kafka transactions). Each engine first runs
the filter over a tenth as many records, unmeasured, so both are measured with a warm JVM:

- ``filter``: ``CREATE STREAM ... AS SELECT ID, AMOUNT, SENT FROM EVENTS WHERE KEEP`` (half the
  records pass);
- ``count``: ``CREATE TABLE ... AS SELECT ID, COUNT(*) AS N FROM EVENTS GROUP BY ID`` (1,000
  keys).

Each run reports its throughput, the records of the topic over the seconds from the query's
start to its last result being visible in the sink (read_committed), and then, with the query
caught up, its end-to-end latency: records produced at a steady rate, each with a key of its
own, timed from the produce call to the moment a consumer of the sink sees its result.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Consumer, Producer, TopicPartition

from integration.bench.common import kafka, node_processes, summary_ms
from integration.bench.interactive import wait_for_spark
from metastore.dev.spark_cluster import LocalSparkCluster
from metastore.dev.stack import spark_node_args
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings

GROUPS = 1_000
PARTITIONS = 2
LATENCY_KEYS = 10_000_000
"""The first key of the latency records (the topic's own records have keys below GROUPS)."""
STATEMENTS = {
    "filter": "CREATE STREAM {name} WITH (KAFKA_TOPIC='{topic}') AS "
              "SELECT ID, AMOUNT, SENT FROM {source} WHERE KEEP;",
    "count": "CREATE TABLE {name} WITH (KAFKA_TOPIC='{topic}') AS "
             "SELECT ID, COUNT(*) AS N FROM {source} GROUP BY ID;",
}
Start = Callable[[str, str, str], Callable[[], None]]
"""Start a query (its kind, source topic and sink topic); returns what stops it."""


class SinkWatcher:
    """A read_committed consumer of a sink topic on a thread of its own: each key's latest value
    and the time it was first seen."""

    def __init__(self, bootstrap: str, topic: str, from_end: bool = False) -> None:
        """Reads ``topic`` from its start, or only what arrives from now with ``from_end``."""
        self.records = 0
        self.latest: dict[int, bytes | None] = {}
        self.first_seen: dict[int, float] = {}
        self._consumer = Consumer(KafkaSettings(bootstrap).config(
            group_id=f"bench-{uuid.uuid4().hex[:8]}", enable_auto_commit=False,
            isolation_level="read_committed", fetch_wait_max_ms=5))
        self._consumer.assign([TopicPartition(topic, p, self._end(topic, p) if from_end else 0)
                               for p in range(PARTITIONS)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _end(self, topic: str, partition: int) -> int:
        return int(self._consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                        timeout=10)[1])

    def _run(self) -> None:
        while not self._stop.is_set():
            batch = self._consumer.consume(10_000, 0.05)
            now = time.time()
            for message in batch:
                raw_key = message.key()
                if message.error() is not None or raw_key is None or len(raw_key) not in (4, 12):
                    continue
                (key,) = struct.unpack(">i", raw_key[:4])  # a windowed key: then its start
                self.latest[key] = message.value()
                self.first_seen.setdefault(key, now)
            self.records += len(batch)

    def wait(self, done: Callable[[], bool], timeout: float, what: str) -> float:
        """Wait until ``done()``; returns the time it became so."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not done within {timeout:.0f} s")
            time.sleep(0.02)
        return time.time()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()


def produce_backlog(bootstrap: str, topic: str, count: int, timestamp_ms: int = 0) -> None:
    """``count`` records over GROUPS keys; at ``timestamp_ms`` (0: their produce time)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.num.messages": 10_000, "compression.type": "lz4"})
    for index in range(count):
        value = json.dumps({"AMOUNT": index * 0.5, "KEEP": index % 2 == 0, "SENT": 0})
        while True:
            try:
                producer.produce(topic, key=struct.pack(">i", index % GROUPS), value=value,
                                 partition=index % PARTITIONS, timestamp=timestamp_ms)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0, "not every record was acknowledged"


def produce_timed(bootstrap: str, topic: str, keys: range, rate: float) -> dict[int, float]:
    """One record per key at ``rate`` per second; returns each key's produce time."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    sent: dict[int, float] = {}
    started = time.monotonic()
    for number, key in enumerate(keys):
        pause = started + number / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        sent[key] = time.time()
        producer.produce(topic, key=struct.pack(">i", key), partition=key % PARTITIONS,
                         value=json.dumps({"AMOUNT": 1.0, "KEEP": True,
                                           "SENT": int(sent[key] * 1000)}))
        producer.poll(0)
    assert producer.flush(30) == 0, "not every record was acknowledged"
    return sent


def warm_up(bootstrap: str, source: str, records: int, start: Start,
            queries: tuple[str, ...] = ("filter",)) -> None:
    """Run each of ``queries`` over ``source`` (of ``records``) to its end, unmeasured: the
    engine's JVM compiles its hot paths before it is measured, as a node's has once it has run
    queries."""
    for query in queries:
        with throughput(bootstrap, source, query, start, records, 0):
            pass


@contextmanager
def throughput(bootstrap: str, source: str, query: str, start: Start, backlog: int, extra: int
               ) -> Iterator[tuple[float, SinkWatcher]]:
    """Start ``query`` over ``source`` (``backlog`` records, and ``extra`` of earlier latency
    phases, which the filter also passes and a join joins) and wait for its last result: the
    seconds that took and the watcher of its sink, for the block; the query is stopped and the
    watcher closed after it. A count is done when every key's count is ``backlog`` over the
    :data:`GROUPS` keys."""
    sink = f"pipeline-{query}-{uuid.uuid4().hex[:6]}"
    Admin(KafkaSettings(bootstrap)).create(sink, PARTITIONS)
    watcher = SinkWatcher(bootstrap, sink)
    try:
        started = time.time()
        stop = start(query, source, sink)
        try:
            yield _finished(watcher, query, backlog, extra) - started, watcher
        finally:
            stop()
    finally:
        watcher.close()


def _finished(watcher: SinkWatcher, query: str, backlog: int, extra: int) -> float:
    """When ``query``'s last result over ``backlog`` (and ``extra``) records reached its sink."""
    if query in ("filter", "join"):  # half the records pass; every one joins its user
        expected = (backlog // 2 if query == "filter" else backlog) + extra
        return watcher.wait(lambda: watcher.records >= expected, 1800, query)
    final = json.dumps({"N": backlog // GROUPS}, separators=(",", ":")).encode()
    return watcher.wait(lambda: all(watcher.latest.get(key) == final for key in range(GROUPS)),
                        1800, query)


def measure(bootstrap: str, source: str, query: str, start: Start, backlog: int, extra: int,
            latency_keys: range, rate: float) -> dict[str, Any]:
    """Run one query: :func:`throughput` over the backlog, then latency at ``rate`` records/s."""
    with throughput(bootstrap, source, query, start, backlog, extra) as (seconds, watcher):
        sent = produce_timed(bootstrap, source, latency_keys, rate)
        watcher.wait(lambda: all(key in watcher.first_seen for key in latency_keys), 300,
                     f"{query} latency")
        latencies = [watcher.first_seen[key] - sent[key] for key in latency_keys]
    return {"seconds": round(seconds, 2), "records_per_s": round((backlog + extra) / seconds),
            "latency": summary_ms(latencies)}


@contextmanager
def metastore_node(bootstrap: str, *node_args: str,
                   properties: Mapping[str, str] | None = None,
                   statements: Mapping[str, str] = STATEMENTS,
                   preamble: str = "") -> Iterator[Start]:
    """A node whose persistent queries run with the request ``properties`` (none: its
    defaults, at-least-once): each query one of ``statements``, after the ``preamble``."""
    with node_processes(bootstrap, 1, *node_args) as state:
        [node] = state.nodes
        with httpx.Client(base_url=node.url, timeout=120) as client:
            wait_for_spark(client)
            if preamble:
                ksql(client, preamble)
            streams: dict[str, str] = {}

            def start(query: str, source: str, sink: str) -> Callable[[], None]:
                if source not in streams:
                    streams[source] = f"EVENTS_{len(streams)}"
                    ksql(client, f"CREATE STREAM {streams[source]} (ID INT KEY, AMOUNT DOUBLE, "
                                 f"KEEP BOOLEAN, SENT BIGINT) WITH (KAFKA_TOPIC='{source}', "
                                 "VALUE_FORMAT='JSON');")
                name = f"{query.upper()}_{uuid.uuid4().hex[:6].upper()}"
                answer = ksql(client, statements[query].format(name=name, topic=sink,
                                                               source=streams[source]),
                              properties)
                query_id = answer[0]["commandStatus"]["queryId"]

                def stop() -> None:
                    ksql(client, f"TERMINATE {query_id};")

                return stop

            yield start


@contextmanager
def line_engine(command: list[str], name: str, *args: str) -> Iterator[Start]:
    """An engine in a process of its own that speaks a line protocol: ``ready`` once started,
    ``<query> <source> <sink> [args]`` answered ``started``, ``stop`` answered ``stopped``;
    ``name`` says which engine did not answer. The process group is killed afterwards."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, start_new_session=True)

    def ask(line: str, answer: str) -> None:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(line + "\n")
        process.stdin.flush()
        if process.stdout.readline().strip() != answer:
            raise RuntimeError(f"{name} did not answer {answer!r}")

    def start(query: str, source: str, sink: str) -> Callable[[], None]:
        ask(" ".join((query, source, sink, *args)), "started")
        return lambda: ask("stop", "stopped")

    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{name} did not start")
        yield start
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)


@contextmanager
def hand_written(bootstrap: str) -> Iterator[Start]:
    with tempfile.TemporaryDirectory(prefix="metastore-bench-floor-") as root, line_engine(
            [sys.executable, "-m", "integration.bench.pipeline_floor", bootstrap, root],
            "the hand-written query") as start:
        yield start


ENGINES: dict[str, Callable[[str], contextlib.AbstractContextManager[Start]]] = {
    "spark_by_hand": hand_written,
    "metastore": metastore_node,
    "metastore_exactly_once": lambda bootstrap: metastore_node(
        bootstrap, properties={"processing.guarantee": "exactly_once_v2"}),
}
"""Each engine the same run measures: the floor, then a node's queries at-least-once (its
default) and exactly-once."""


def ksql(client: httpx.Client, text: str, properties: Mapping[str, str] | None = None
         ) -> list[dict[str, Any]]:
    response = client.post("/ksql", json={"ksql": text,
                                          "streamsProperties": dict(properties or {})})
    assert response.status_code == 200, response.text
    return list(response.json())


def _sizes(quick: bool) -> tuple[int, int, int, float]:
    """Records of the topic, of the warm-up topic, latency records and their rate."""
    backlog = 100_000 if quick else 1_000_000
    count, rate = (500, 100.0) if quick else (2_000, 200.0)
    return backlog, backlog // 10, count, rate


def _topics(bootstrap: str, backlog: int, warm_records: int) -> tuple[str, str]:
    source, warm = (f"pipeline-{name}-{uuid.uuid4().hex[:6]}" for name in ("in", "warm"))
    for topic, records in ((source, backlog), (warm, warm_records)):
        Admin(KafkaSettings(bootstrap)).create(topic, PARTITIONS)
        print(f"pipeline: producing {records:,} records", file=sys.stderr, flush=True)
        produce_backlog(bootstrap, topic, records)
    return source, warm


def _measure_engine(engine: str, bootstrap: str, source: str, warm: str, start: Start,
                    quick: bool, runs: int) -> dict[str, Any]:
    """One engine's warm-up, then each query measured; ``runs``: queries measured before on the
    same topic (each added its latency records to it, and takes keys of its own)."""
    backlog, warm_records, count, rate = _sizes(quick)
    print(f"pipeline: {engine} warm-up", file=sys.stderr, flush=True)
    warm_up(bootstrap, warm, warm_records, start)
    figures: dict[str, Any] = {}
    for query in STATEMENTS:
        print(f"pipeline: {engine} {query}", file=sys.stderr, flush=True)
        keys = range(LATENCY_KEYS + runs * count, LATENCY_KEYS + (runs + 1) * count)
        figures[query] = measure(bootstrap, source, query, start, backlog, runs * count, keys,
                                 rate)
        runs += 1
    return figures


def run(quick: bool) -> dict[str, Any]:
    backlog, warm_records, count, rate = _sizes(quick)
    results: dict[str, Any] = {"records": backlog, "warm_up_records": warm_records,
                               "latency_records": count, "latency_rate_per_s": rate}
    with kafka() as bootstrap:
        source, warm = _topics(bootstrap, backlog, warm_records)
        runs = 0
        for engine, starter in ENGINES.items():
            with starter(bootstrap) as start:
                results[engine] = _measure_engine(engine, bootstrap, source, warm, start,
                                                  quick, runs)
                runs += len(STATEMENTS)
    for query in STATEMENTS:
        ours, floor = results["metastore"][query], results["spark_by_hand"][query]
        once = results["metastore_exactly_once"][query]
        results[f"{query}_throughput_ratio"] = round(
            ours["records_per_s"] / floor["records_per_s"], 2)
        results[f"{query}_exactly_once_throughput_ratio"] = round(
            once["records_per_s"] / ours["records_per_s"], 2)
        results[f"{query}_exactly_once_p99_ratio"] = round(
            once["latency"]["p99_ms"] / ours["latency"]["p99_ms"], 2)
    return results


def run_on_cluster(quick: bool) -> dict[str, Any]:
    """`pipeline-cluster`: the node's same two queries with its Spark on a local standalone
    cluster (:mod:`metastore.dev.spark_cluster`) of 1, then 2 workers; each node application
    takes one executor of one core per worker."""
    backlog, warm_records, count, rate = _sizes(quick)
    results: dict[str, Any] = {"records": backlog, "warm_up_records": warm_records,
                               "latency_records": count, "latency_rate_per_s": rate,
                               "source_partitions": PARTITIONS}
    with kafka() as bootstrap:
        source, warm = _topics(bootstrap, backlog, warm_records)
        runs = 0
        for workers in (1, 2):
            with tempfile.TemporaryDirectory(prefix="metastore-bench-spark-") as root:
                cluster = LocalSparkCluster(Path(root), workers=workers, worker_cores=1,
                                            worker_memory_mb=1024)
                try:
                    node_args = spark_node_args(cluster.start())
                    with metastore_node(bootstrap, *node_args) as start:
                        engine = f"workers_{workers}"
                        results[engine] = _measure_engine(engine, bootstrap, source, warm,
                                                          start, quick, runs)
                        runs += len(STATEMENTS)
                finally:
                    cluster.stop()
    for query in STATEMENTS:
        results[f"{query}_2_over_1_workers"] = round(
            results["workers_2"][query]["records_per_s"]
            / results["workers_1"][query]["records_per_s"], 2)
    return results
