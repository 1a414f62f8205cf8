"""`queries-per-node`: how many persistent queries one node holds, with its defaults.

One node process (its defaults: Spark ``local[1]``, a 1 GB driver) and one stream over a topic of
two partitions; filter queries are added in steps (1, 10, 25, 50, 75, 100; 1, 10, 25 with
``--quick``), each ``CREATE STREAM ... AS SELECT ID, AMOUNT, SENT FROM EVENTS WHERE KEEP`` into a
sink of its own, read from the topic's start. The topic holds 50,000 records before the first
query (10,000 with ``--quick``): the first query's catch-up warms the JVM. After each step:

- ``settle``: 100 records more; the seconds until every query, the new ones with the topic's
  whole history, has written its share (each new query started and caught up);

- ``round``: 10,000 records (5,000 pass) produced at once; the seconds until every sink holds
  its share, and the records the queries read per second together (records x queries / s);
- ``latency``: 200 records at 20/s, each from its produce call to a consumer seeing it in the
  first query's sink (one query's view while all of them run);
- ``idle``: once every query has written the probes too, with no records coming, the CPU the
  node and its Spark driver JVM take (percent of one core over 10 s), and their memory (RSS).

The run stops at the first step whose queries do not all run (a query in ERROR, the driver
gone, a statement refused) or do not catch up within ``LIMIT_S``; that step is reported with
its reason. It runs only when named (a full run takes half an hour or more). Each sink's
records are counted by its end offsets (the queries write at-least-once, so a query that ran a
micro-batch twice would count twice: none does here).
"""

from __future__ import annotations

import contextlib
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
from confluent_kafka import Consumer, TopicPartition

from integration.bench.common import (
    cpu_seconds,
    jvm_of,
    kafka,
    node_processes,
    rss_mib,
    summary_ms,
)
from integration.bench.interactive import wait_for_spark
from integration.bench.pipeline import (
    LATENCY_KEYS,
    PARTITIONS,
    SinkWatcher,
    ksql,
    produce_backlog,
    produce_timed,
)
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings

STEPS = (1, 10, 25, 50, 75, 100)
QUICK_STEPS = (1, 10, 25)
ROUND = 10_000
"""Records a round produces; every other one passes the filter."""
SETTLE = 100
WARM, QUICK_WARM = 50_000, 10_000
PROBES, PROBE_RATE = 200, 20.0
LIMIT_S = 600.0
"""How long a step's queries may take to catch up (and a round to be written)."""
IDLE_S = 10.0


class _Sinks:
    """The end offsets of every query's sink, summed."""

    def __init__(self, bootstrap: str) -> None:
        self.topics: list[str] = []
        self._consumer = Consumer(KafkaSettings(bootstrap).config(
            group_id=f"bench-{uuid.uuid4().hex[:8]}", enable_auto_commit=False))

    def counts(self) -> list[int]:
        return [sum(self._consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                         timeout=10)[1]
                    for partition in range(PARTITIONS)) for topic in self.topics]

    def wait_for(self, expected: int, what: str) -> float:
        """Seconds until every sink holds ``expected`` records (TimeoutError past LIMIT_S)."""
        started = time.monotonic()
        while min(self.counts(), default=expected) < expected:
            if time.monotonic() - started > LIMIT_S:
                raise TimeoutError(f"{what}: not every sink held {expected} records within "
                                   f"{LIMIT_S:.0f} s")
            time.sleep(0.2)
        return time.monotonic() - started

    def close(self) -> None:
        self._consumer.close()


def _idle_cpu(pids: tuple[int, ...]) -> list[float]:
    """Each process's CPU over IDLE_S, in percent of one core."""
    before, began = [cpu_seconds(pid) for pid in pids], time.monotonic()
    time.sleep(IDLE_S)
    elapsed = time.monotonic() - began
    return [round(100 * (cpu_seconds(pid) - start) / elapsed, 1)
            for pid, start in zip(pids, before, strict=True)]


def _not_running(client: httpx.Client) -> list[str]:
    [listed] = ksql(client, "SHOW QUERIES;")
    return [f"{query['id']} {query['state']}" for query in listed["queries"]
            if query["state"] != "RUNNING"]


@contextlib.contextmanager
def _node(bootstrap: str) -> Iterator[tuple[httpx.Client, int, int]]:
    """A node with its defaults: its client, its pid and its Spark driver's."""
    with node_processes(bootstrap, 1) as state:
        [node] = state.nodes
        with httpx.Client(base_url=node.url, timeout=300) as client:
            wait_for_spark(client)
            jvm = jvm_of(node.pid or 0)
            assert jvm is not None, "the node's Spark driver runs in a JVM of its own"
            yield client, node.pid or 0, jvm


def _step(bootstrap: str, topics: tuple[str, str], sinks: _Sinks, passed: int,
          probes_sent: int) -> dict[str, Any]:
    """One step's settle, round and latency; ``passed``: the records of the topic that pass
    the filter before it, ``probes_sent`` among them."""
    source, first_sink = topics
    produce_backlog(bootstrap, source, SETTLE)
    settle = sinks.wait_for(passed + SETTLE // 2, "settling")
    started = time.monotonic()
    produce_backlog(bootstrap, source, ROUND)
    sinks.wait_for(passed + (SETTLE + ROUND) // 2, "the round")
    seconds = time.monotonic() - started
    watcher = SinkWatcher(bootstrap, first_sink, from_end=True)
    try:
        keys = range(LATENCY_KEYS + probes_sent, LATENCY_KEYS + probes_sent + PROBES)
        sent = produce_timed(bootstrap, source, keys, PROBE_RATE)
        watcher.wait(lambda: all(key in watcher.first_seen for key in keys), LIMIT_S,
                     "the latency probes")
        latency = summary_ms([watcher.first_seen[key] - sent[key] for key in keys])
    finally:
        watcher.close()
    sinks.wait_for(passed + (SETTLE + ROUND) // 2 + PROBES, "the latency probes")
    queries = len(sinks.topics)
    return {"queries": queries, "settle_s": round(settle, 1), "round_s": round(seconds, 2),
            "records_read_per_s": round(ROUND * queries / seconds), "latency": latency}


def run(quick: bool) -> dict[str, Any]:
    steps = QUICK_STEPS if quick else STEPS
    results: dict[str, Any] = {"round_records": ROUND, "probes": PROBES, "steps": []}
    with kafka() as bootstrap, _node(bootstrap) as (client, node_pid, jvm_pid):
        admin = Admin(KafkaSettings(bootstrap))
        source = f"density-in-{uuid.uuid4().hex[:6]}"
        admin.create(source, PARTITIONS)
        ksql(client, f"CREATE STREAM EVENTS (ID INT KEY, AMOUNT DOUBLE, KEEP BOOLEAN, SENT BIGINT) "
                     f"WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');")
        sinks = _Sinks(bootstrap)
        produce_backlog(bootstrap, source, QUICK_WARM if quick else WARM)
        passed = (QUICK_WARM if quick else WARM) // 2
        probes_sent = 0
        try:
            for count in steps:
                print(f"queries-per-node: {count} queries", file=sys.stderr, flush=True)
                while len(sinks.topics) < count:
                    sink = f"density-out-{len(sinks.topics)}-{uuid.uuid4().hex[:6]}"
                    admin.create(sink, PARTITIONS)
                    ksql(client, f"CREATE STREAM FILTER_{len(sinks.topics)} WITH (KAFKA_TOPIC="
                                 f"'{sink}') AS SELECT ID, AMOUNT, SENT FROM EVENTS WHERE KEEP;",
                         {"auto.offset.reset": "earliest"})
                    sinks.topics.append(sink)
                try:
                    figures = _step(bootstrap, (source, sinks.topics[0]), sinks, passed,
                                    probes_sent)
                except Exception as error:
                    results["steps"].append({"queries": count, "stopped": str(error)[:500],
                                             "not_running": _not_running(client),
                                             "spark_driver_now": jvm_of(node_pid)})
                    break
                passed += (SETTLE + ROUND) // 2 + PROBES
                probes_sent += PROBES
                if jvm_of(node_pid) != jvm_pid:
                    results["steps"].append({**figures, "stopped": "the Spark driver restarted"})
                    break
                node_cpu, jvm_cpu = _idle_cpu((node_pid, jvm_pid))
                figures.update(idle_cpu_percent={"node": node_cpu, "spark_driver": jvm_cpu},
                               rss_mib={"node": rss_mib(node_pid),
                                        "spark_driver": rss_mib(jvm_pid)},
                               not_running=_not_running(client))
                results["steps"].append(figures)
                print(f"queries-per-node: {figures}", file=sys.stderr, flush=True)
                if figures["not_running"]:
                    break
        finally:
            sinks.close()
    return results
