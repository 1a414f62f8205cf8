"""`streams-peer`: persistent queries on Spark against Kafka Streams, the engine under ksqlDB.

The peer (:file:`integration/bench/java/StreamsPeer.java`) builds by hand the topologies ksqlDB
builds for three statements, with ksqlDB's defaults (2 s commits, a 10 MB record cache,
at-least-once, Jackson), on the jars of Kafka Streams of the broker's version
(:file:`integration/bench/poms/kafka-streams.xml`, resolved from Maven Central into the jar
cache on first use; the peer is compiled there by ``javac``). A `metastore server` node runs the
same statements as persistent queries:

- ``filter``: ``CREATE STREAM ... AS SELECT ID, AMOUNT, SENT FROM EVENTS WHERE KEEP``;
- ``count``: ``CREATE TABLE ... AS SELECT ID, COUNT(*) AS N FROM EVENTS WINDOW TUMBLING
  (SIZE 1 HOUR) GROUP BY ID`` (1,000 keys; the backlog's records in one window);
- ``join``: ``CREATE STREAM ... AS SELECT E.ID, E.AMOUNT, E.SENT, U.NAME FROM EVENTS E JOIN
  USERS U ON E.ID = U.ID`` (every event has its user).

Both engines read one topic of JSON records (1,000,000; 100,000 with ``--quick``; two
partitions), first pinned to one core (one stream thread; Spark ``local[1]``; the harness's
producers and consumers on the other), then to both (two threads; ``local[2]``; the harness
beside them). Each engine first runs every query over another topic of half as many records,
unmeasured: its JVM has compiled most of every query's hot paths, as a server's has once it
has run for a while. A node's first filter over a million records, after a filter over
100,000, took 16.3 s, the same query started again 11.3 s and a third time 10.4 s, its JIT
compilers busy meanwhile (measured once, by starting the filter three times in one node;
no benchmark reruns it); a query started anew still compiles some of its own (see
``streams-profile``). The broker runs beside them throughout. A run's throughput is the topic's records
over the seconds from the query's start to its last result being visible in the sink; its
latency, once caught up, is each of 2,000 records at 200/s from its produce call to a consumer
seeing its result. Records/s per core divides the throughput by the cores it had.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from integration.bench.common import kafka
from integration.bench.pipeline import (
    GROUPS,
    LATENCY_KEYS,
    PARTITIONS,
    Start,
    line_engine,
    measure,
    metastore_node,
    produce_backlog,
    warm_up,
)
from metastore.dev import jars
from metastore.dev.paths import jar_dir
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings

QUERIES = ("filter", "count", "join")
CORES = (1, 2)
WINDOW_MS = 3_600_000
PEER_SOURCE = Path(__file__).parent / "java" / "StreamsPeer.java"
STREAMS_JARS = jars.JarSet(name="kafka-streams-peer", pom="kafka-streams.xml",
                           package="integration.bench")


def sizes(quick: bool) -> tuple[int, int, int, float]:
    """Records of the topic, of the warm-up topic, latency records and their rate."""
    backlog = 100_000 if quick else 1_000_000
    count, rate = (500, 100.0) if quick else (2_000, 200.0)
    return backlog, backlog // 2, count, rate


# -- the peer ----------------------------------------------------------------------------------
def peer_classpath() -> str:
    """The peer's jars and its class, compiled once per source text into the jar cache."""
    libraries = jars.resolve(STREAMS_JARS)
    classpath = os.pathsep.join(str(j) for j in libraries)
    classes = jar_dir("streams-peer-classes")
    stamp = classes / "source.java"
    if not stamp.exists() or stamp.read_text() != PEER_SOURCE.read_text():
        shutil.rmtree(classes, ignore_errors=True)
        classes.mkdir(parents=True)
        javac = jars.require_tool("javac", "Install a JDK 17+ (Debian: apt-get install "
                                           "openjdk-17-jdk-headless).")
        compiled = subprocess.run([javac, "-nowarn", "-cp", classpath, "-d", str(classes),
                                   str(PEER_SOURCE)], capture_output=True, text=True, check=False)
        if compiled.returncode != 0:
            raise RuntimeError(f"javac refused {PEER_SOURCE.name}:\n{compiled.stderr}")
        shutil.copyfile(PEER_SOURCE, stamp)
    return os.pathsep.join([classpath, str(classes)])


@contextmanager
def kafka_streams(bootstrap: str, cores: int, users: str) -> Iterator[Start]:
    """The peer's JVM with ``cores`` stream threads: a query started per command."""
    classpath = peer_classpath()
    with tempfile.TemporaryDirectory(prefix="metastore-bench-streams-") as state, line_engine(
            [jars.require_java(), "-cp", classpath, "StreamsPeer", bootstrap, state, str(cores)],
            "the Kafka Streams peer", users) as start:
        yield start


# -- the node ----------------------------------------------------------------------------------
STATEMENTS = {
    "filter": "CREATE STREAM {name} WITH (KAFKA_TOPIC='{topic}') AS "
              "SELECT ID, AMOUNT, SENT FROM {source} WHERE KEEP;",
    "count": "CREATE TABLE {name} WITH (KAFKA_TOPIC='{topic}') AS SELECT ID, COUNT(*) AS N "
             "FROM {source} WINDOW TUMBLING (SIZE 1 HOUR) GROUP BY ID;",
    "join": "CREATE STREAM {name} WITH (KAFKA_TOPIC='{topic}') AS SELECT E.ID AS ID, "
            "E.AMOUNT AS AMOUNT, E.SENT AS SENT, U.NAME AS NAME FROM {source} E "
            "JOIN USERS U ON E.ID = U.ID;",
}


@contextmanager
def node(bootstrap: str, cores: int, users: str) -> Iterator[Start]:
    """A node whose Spark runs ``local[cores]``; the users table declared over ``users``."""
    with metastore_node(bootstrap, "--spark-master", f"local[{cores}]",
                        statements=STATEMENTS,
                        preamble=f"CREATE TABLE USERS (ID INT PRIMARY KEY, NAME STRING) WITH "
                                 f"(KAFKA_TOPIC='{users}', VALUE_FORMAT='JSON');") as start:
        yield start


ENGINES: dict[str, Callable[[str, int, str], contextlib.AbstractContextManager[Start]]] = {
    "kafka_streams": kafka_streams,
    "metastore": node,
}


@contextmanager
def affinity(cpus: set[int]) -> Iterator[None]:
    """This thread, and the processes and threads it starts meanwhile, run on ``cpus``."""
    every = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, every)


@contextmanager
def pinned(engine: contextlib.AbstractContextManager[Start], cores: int) -> Iterator[Start]:
    """``engine`` started on the first ``cores`` of this process's cores, and this thread (the
    harness's producers and watchers) moved to the others, or to all of them when none is left,
    for the block."""
    cpus = sorted(os.sched_getaffinity(0))
    with contextlib.ExitStack() as stack:
        with affinity(set(cpus[:cores])):  # the engine's processes, and theirs
            start = stack.enter_context(engine)
        stack.enter_context(affinity(set(cpus[cores:]) or set(cpus)))
        yield start


# -- a run -------------------------------------------------------------------------------------
def topics(bootstrap: str, backlog: int, warm_records: int, users: int
            ) -> tuple[str, str, str]:
    """The events (in one window, an hour ago), the warm-up's, and the users (older still:
    Kafka Streams joins in time order), one user per key of the events and the latency runs."""
    source, warm, table = (f"streams-peer-{name}-{uuid.uuid4().hex[:6]}"
                           for name in ("in", "warm", "users"))
    window = (int(time.time() * 1000) // WINDOW_MS - 1) * WINDOW_MS
    for topic in (source, warm, table):
        Admin(KafkaSettings(bootstrap)).create(topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for key in [*range(GROUPS), *range(LATENCY_KEYS, LATENCY_KEYS + users)]:
        producer.produce(table, key=struct.pack(">i", key), partition=key % PARTITIONS,
                         value=json.dumps({"NAME": f"user {key}"}), timestamp=window - 60_000)
        producer.poll(0)
    assert producer.flush(60) == 0, "not every user was acknowledged"
    for topic, records in ((source, backlog), (warm, warm_records)):
        print(f"streams-peer: producing {records:,} records", file=sys.stderr, flush=True)
        produce_backlog(bootstrap, topic, records, timestamp_ms=window + 1)
    return source, warm, table


def run(quick: bool) -> dict[str, Any]:
    backlog, warm_records, count, rate = sizes(quick)
    results: dict[str, Any] = {"records": backlog, "latency_records": count,
                               "latency_rate_per_s": rate, "source_partitions": PARTITIONS}
    runs = 0
    with kafka() as bootstrap:
        source, warm, users = topics(bootstrap, backlog, warm_records,
                                      count * len(QUERIES) * len(ENGINES) * len(CORES))
        for cores in CORES:
            for engine, starter in ENGINES.items():
                name = f"{engine}_{cores}_core{'s' if cores > 1 else ''}"
                with pinned(starter(bootstrap, cores, users), cores) as start:
                    print(f"streams-peer: {name} warm-up", file=sys.stderr, flush=True)
                    warm_up(bootstrap, warm, warm_records, start, QUERIES)
                    results[name] = {}
                    for query in QUERIES:
                        print(f"streams-peer: {name} {query}", file=sys.stderr, flush=True)
                        keys = range(LATENCY_KEYS + runs * count,
                                     LATENCY_KEYS + (runs + 1) * count)
                        figures = measure(bootstrap, source, query, start, backlog,
                                          runs * count, keys, rate)
                        figures["records_per_s_per_core"] = round(figures["records_per_s"]
                                                                  / cores)
                        results[name][query] = figures
                        runs += 1
    results.update(ratios(results))
    return results


def ratios(results: dict[str, Any]) -> dict[str, float]:
    """The node's records/s and p99 latency over Kafka Streams', per query and cores."""
    found: dict[str, float] = {}
    for cores in CORES:
        suffix = f"{cores}_core{'s' if cores > 1 else ''}"
        ours, theirs = results.get(f"metastore_{suffix}"), results.get(f"kafka_streams_{suffix}")
        if not ours or not theirs:
            continue
        for query in QUERIES:
            found[f"{query}_{suffix}_throughput_ratio"] = round(
                ours[query]["records_per_s"] / theirs[query]["records_per_s"], 2)
            found[f"{query}_{suffix}_p99_ratio"] = round(
                ours[query]["latency"]["p99_ms"] / theirs[query]["latency"]["p99_ms"], 2)
    return found
