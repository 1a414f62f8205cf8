"""Persistent queries on a cluster of node processes: the owner (or its Spark) dies mid-stream,
another node takes the query over from its checkpoint, and the sink has every input record."""

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
from typing import Any

import httpx
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition

from integration.conftest import Cluster
from metastore.kafka.settings import KafkaSettings
from tests.support.waiting import eventually

ClusterFactory = Callable[..., Cluster]


def show_queries(cluster: Cluster, node: str) -> dict[str, dict[str, Any]]:
    response = cluster.ksql(node, "SHOW QUERIES;")
    assert response.status_code == 200, response.text
    return {q["id"]: q for q in response.json()[0]["queries"]}


def wait_owner(cluster: Cluster, ask: str, query_id: str, timeout: float,
               not_owner: str | None = None) -> str:
    seen: dict[str, Any] = {}

    def new_owner() -> str | None:
        nonlocal seen
        seen = show_queries(cluster, ask).get(query_id, {})
        owner = seen.get("ownerNode")
        return str(owner) if seen.get("state") == "RUNNING" and owner and owner != not_owner else None

    return eventually(new_owner, timeout, lambda: f"{query_id} RUNNING on a new owner: {seen}",
                      interval=0.5)


def wait_owned_by(cluster: Cluster, node: str, query_id: str, timeout: float) -> None:
    seen: dict[str, Any] = {}

    def owned() -> bool:
        nonlocal seen
        seen = show_queries(cluster, node).get(query_id, {})
        return seen.get("state") == "RUNNING" and seen.get("ownerNode") == node

    eventually(owned, timeout, lambda: f"{query_id} RUNNING on {node}: {seen}", interval=0.5)


def sink_records(bootstrap: str, topic: str, seconds: float = 600) -> list[tuple[int, str]]:
    """(ID, source coordinates) of the committed records in ``topic``: all of them, or those
    read within ``seconds``."""
    consumer = Consumer(KafkaSettings(bootstrap).config(
        group_id=f"check-{uuid.uuid4().hex[:8]}", auto_offset_reset="earliest",
        enable_auto_commit=False, isolation_level="read_committed"))
    consumer.subscribe([topic])
    out: list[tuple[int, str]] = []
    idle, deadline = 0, time.monotonic() + seconds
    try:
        while idle < 6 and time.monotonic() < deadline:
            batch = consumer.consume(500, 0.5)
            idle = 0 if batch else idle + 1
            for message in batch:
                if message.error() is None:
                    headers = dict(message.headers() or [])
                    out.append((json.loads(message.value())["ID"],
                                headers["metastore.source"].decode()))
    finally:
        consumer.close()
    return out


AFTER_TAKEOVER = 200
"""Records a stream goes on with once its query runs on the new owner."""
MAX_RECORDS = 10_000
"""A bound on a stream whose takeover never comes: longer than the tests' own waits (300 s at
0.03 s a record), so a stream that reaches it fails the test (:meth:`PacedStream.finish`)."""


class PacedStream:
    """Records produced from a thread at a steady pace (``send(producer, i)`` writes record
    ``i``) before, during and after a failure: the stream ends :data:`AFTER_TAKEOVER` records
    after :meth:`finish`, so it lasts as long as the failover takes, however loaded the
    machine. The ``paced_stream`` fixture starts them and stops them when the test ends,
    whatever happened."""

    def __init__(self, bootstrap: str, pause: float,
                 send: Callable[[Producer, int], None]) -> None:
        self._bootstrap, self._pause, self._send = bootstrap, pause, send
        self._last = MAX_RECORDS
        self.count = 0
        self.error: Exception | None = None
        self.sent = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._last = min(self._last, self.count)
        self._thread.join(60)

    def _run(self) -> None:
        try:
            producer = Producer(KafkaSettings(self._bootstrap).config(linger_ms=5))
            while self.count < self._last:
                self._send(producer, self.count)
                producer.poll(0)
                self.count += 1
                time.sleep(self._pause)
            producer.flush(30)
        except Exception as error:  # reported by finish()
            self.error = error
        finally:
            self.sent.set()

    def finish(self, timeout: float = 120) -> int:
        """Ends the stream :data:`AFTER_TAKEOVER` records from now; the records it had. The
        stream must still be running: one that ended before, at its bound or on an error,
        had no records after the takeover."""
        assert self.error is None, f"the stream failed: {self.error!r}"
        assert not self.sent.is_set(), f"the stream ended at {self.count} records, before finish"
        self._last = self.count + AFTER_TAKEOVER
        self._thread.join(timeout)
        assert self.error is None, f"the stream failed: {self.error!r}"
        assert self.sent.is_set(), f"the stream to end within {timeout} s"
        return self.count


StreamStarter = Callable[[str, float, Callable[[Producer, int], None]], PacedStream]


@pytest.fixture
def paced_stream() -> Iterator[StreamStarter]:
    streams: list[PacedStream] = []

    def start(bootstrap: str, pause: float, send: Callable[[Producer, int], None]
              ) -> PacedStream:
        streams.append(PacedStream(bootstrap, pause, send))
        return streams[-1]

    yield start
    for stream in streams:
        stream.close()


def test_killing_the_owners_spark_mid_stream_moves_the_query_without_a_gap(
        cluster_factory: ClusterFactory, paced_stream: StreamStarter) -> None:
    """The owner's Spark driver JVM is SIGKILLed mid-stream (as the kernel's OOM killer would):
    its node turns unhealthy at once, leaves the query group, and the query moves to the other
    node, which writes every record; the node restarts its Spark and is healthy again."""
    cluster = cluster_factory()
    cluster.up(2, "--spark-master", "local[1]", "--query-session-timeout-ms", "6000")
    source, sink = f"in-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
    created = cluster.ksql("node-1", f"""
        CREATE STREAM EVENTS (K INT KEY, ID INT, KEEP BOOLEAN)
            WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON', PARTITIONS=2);
        CREATE STREAM KEPT WITH (KAFKA_TOPIC='{sink}', PARTITIONS=1) AS
            SELECT K, ID FROM EVENTS WHERE KEEP EMIT CHANGES;""")
    assert created.status_code == 200, created.text
    query_id = created.json()[1]["commandStatus"]["queryId"]
    owner = wait_owner(cluster, "node-1", query_id, 180)

    def send(producer: Producer, i: int) -> None:
        producer.produce(source, key=struct.pack(">i", i % 7),
                         value=json.dumps({"ID": i, "KEEP": i % 3 != 0}))

    stream = paced_stream(cluster.bootstrap, 0.03, send)
    before = eventually(lambda: len(sink_records(cluster.bootstrap, sink, seconds=3)), 60,
                        "the query to move data before its owner's Spark dies", interval=2)
    assert not stream.sent.is_set(), "the owner's Spark dies mid-stream"
    driver = cluster.status(owner)["sparkApplication"]["driverPid"]
    os.kill(driver, signal.SIGKILL)
    killed_at = time.monotonic()
    unhealthy = eventually(lambda: _unhealthy_spark(cluster, owner), 10,
                           "the owner's health to say its Spark is lost", interval=0.2)
    noticed = time.monotonic() - killed_at
    assert httpx.get(f"{cluster.url(owner)}/metrics", timeout=10).status_code == 200
    survivor = "node-2" if owner == "node-1" else "node-1"
    new_owner = wait_owner(cluster, survivor, query_id, 120, not_owner=owner)
    moved = time.monotonic() - killed_at
    assert new_owner == survivor
    total = stream.finish()

    expected = {i for i in range(total) if i % 3 != 0}
    records: list[tuple[int, str]] = []

    def complete() -> bool:
        nonlocal records
        records = sink_records(cluster.bootstrap, sink)
        return {i for i, _ in records} >= expected

    eventually(complete, 120, lambda: "every kept record, missing after takeover: "
               f"{sorted(expected - {i for i, _ in records})[:20]}", interval=2)
    ids = Counter(i for i, _ in records)
    assert set(ids) == expected, f"missing after takeover: {sorted(expected - set(ids))[:20]}"
    # at-least-once: a batch cut short by the kill is written again, never a different record
    by_source: dict[str, set[int]] = {}
    for i, coordinates in records:
        by_source.setdefault(coordinates, set()).add(i)
    assert all(len(v) == 1 for v in by_source.values())
    assert len(by_source) == len(expected), "deduplicated by source offset: exactly the input"
    restarted = eventually(lambda: _spark_restarted(cluster, owner, driver), 120,
                           "the owner to restart its Spark and be healthy again", interval=1)
    duplicates = sum(ids.values()) - len(ids)
    print(f"\n{len(records)} output records for {len(expected)} inputs, {duplicates} duplicates "
          f"(re-written by the new owner), {before} written before the kill; unhealthy after "
          f"{noticed:.1f} s ({unhealthy}), the query moved after {moved:.1f} s, Spark restarted "
          f"as pid {restarted}")
    eventually(lambda: show_queries(cluster, survivor)[query_id]["state"] == "RUNNING", 120,
               "the query running, on whichever node the group gives it once the restarted one "
               "rejoined (a rebalance may move it back)", interval=1)


def _unhealthy_spark(cluster: Cluster, node: str) -> str | None:
    """The reason the node's health gives for its Spark, once it answers 503 for it."""
    response = httpx.get(f"{cluster.url(node)}/healthcheck", timeout=5)
    spark = response.json()["details"]["spark"]
    if response.status_code == 503 and not spark["isHealthy"]:
        return str(spark["reason"])
    return None


def _spark_restarted(cluster: Cluster, node: str, dead_pid: int) -> int | None:
    """The new driver's pid, once the node's health is good again and its catalog in sync."""
    if httpx.get(f"{cluster.url(node)}/healthcheck", timeout=5).status_code != 200:
        return None
    status = cluster.status(node)
    application = status.get("sparkApplication") or {}
    pid = application.get("driverPid")
    return int(pid) if status.get("sparkInSync") and pid not in (None, dead_pid) else None


WINDOW_BASE_MS = int(time.time() * 1000) // 3_600_000 * 3_600_000
"""The start of the current hour: every record of the windowed test falls in that one TUMBLING
window. Not an older time: the windowed table's topic deletes records past the window's
retention (compact,delete, as ksqlDB creates it), so records years old would be gone."""


def latest_by_key(bootstrap: str, topic: str) -> dict[bytes, bytes | None]:
    """A table's topic read to its end, read_committed: the latest value of each key."""
    latest: dict[bytes, bytes | None] = {}
    for message in read_to_end(bootstrap, topic):
        latest[bytes(message.key() or b"")] = message.value()
    return latest


def read_to_end(bootstrap: str, topic: str, timeout: float = 60) -> list[Message]:
    """Every record of ``topic`` up to its end offsets now, read_committed, from assigned
    partitions (no consumer group to join, whatever the load)."""
    consumer = Consumer(KafkaSettings(bootstrap).config(
        group_id=f"check-{uuid.uuid4().hex[:8]}", enable_auto_commit=False,
        isolation_level="read_committed"))
    out: list[Message] = []
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in partitions}
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])

        def read_to_the_ends() -> bool:
            if not pending:
                return True
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    out.append(message)
                    if message.offset() >= ends[message.partition()] - 1:
                        pending.discard(message.partition())
            for position in consumer.position([TopicPartition(topic, p) for p in pending]):
                if position.offset >= ends[position.partition]:
                    pending.discard(position.partition)
            return False

        eventually(read_to_the_ends, timeout,
                   lambda: f"{topic} read to its ends, partitions {sorted(pending)} not",
                   interval=0)
    finally:
        consumer.close()
    return out


@pytest.mark.timeout(900)
def test_stateful_queries_resume_their_state_when_their_owner_is_killed(
        cluster_factory: ClusterFactory, paced_stream: StreamStarter) -> None:
    """A windowed aggregation and a stream-stream join keep their state in the checkpoint: when
    every node that runs them is SIGKILLed mid-stream, the survivor resumes them with it. The
    window's final counts are exact (nothing counted twice, nothing lost), and the join's output,
    deduplicated by its source-offset header, is exactly the pairs that match."""
    cluster = cluster_factory()
    cluster.up(3, "--spark-master", "local[1]", "--query-session-timeout-ms", "6000")
    left, right = f"left-{uuid.uuid4().hex[:6]}", f"right-{uuid.uuid4().hex[:6]}"
    counts, joined = f"counts-{uuid.uuid4().hex[:6]}", f"joined-{uuid.uuid4().hex[:6]}"
    created = cluster.ksql("node-1", f"""
        CREATE STREAM L (K INT KEY, ID INT, G INT)
            WITH (KAFKA_TOPIC='{left}', VALUE_FORMAT='JSON', PARTITIONS=2);
        CREATE STREAM R (K INT KEY, ID INT)
            WITH (KAFKA_TOPIC='{right}', VALUE_FORMAT='JSON', PARTITIONS=2);
        CREATE TABLE COUNTS WITH (KAFKA_TOPIC='{counts}', PARTITIONS=1) AS
            SELECT G, COUNT(*) AS N FROM L WINDOW TUMBLING (SIZE 1 HOUR) GROUP BY G;
        CREATE STREAM JOINED WITH (KAFKA_TOPIC='{joined}', PARTITIONS=1) AS
            SELECT L.K AS K, L.ID AS ID, R.ID AS RID FROM L JOIN R WITHIN 1 HOUR ON L.K = R.K;
        """)
    assert created.status_code == 200, created.text
    query_ids = [created.json()[i]["commandStatus"]["queryId"] for i in (2, 3)]
    for query_id in query_ids:  # running, wherever the group placed it (it may move again
        wait_owner(cluster, "node-1", query_id, 240)  # while the other nodes join the group)

    groups = 7

    def send(producer: Producer, i: int) -> None:
        key, timestamp = struct.pack(">i", i), WINDOW_BASE_MS + i * 500
        producer.produce(left, key=key, value=json.dumps({"ID": i, "G": i % groups}),
                         timestamp=timestamp)
        producer.produce(right, key=key, value=json.dumps({"ID": i}), timestamp=timestamp + 250)

    stream = paced_stream(cluster.bootstrap, 0.025, send)
    eventually(lambda: latest_by_key(cluster.bootstrap, counts)
               and sink_records(cluster.bootstrap, joined, seconds=3), 90,
               "the aggregation and the join to write before the kill", interval=1)
    assert latest_by_key(cluster.bootstrap, counts), "the aggregation writes before the kill"
    assert sink_records(cluster.bootstrap, joined, seconds=3), "the join writes before the kill"
    assert not stream.sent.is_set(), "the owners die mid-stream"
    owners = {wait_owner(cluster, "node-1", query_id, 60) for query_id in query_ids}
    for owner in owners:
        assert cluster.nodes.stop_node(owner, signal.SIGKILL)
    survivor = next(f"node-{n}" for n in (1, 2, 3) if f"node-{n}" not in owners)
    for query_id in query_ids:
        wait_owned_by(cluster, survivor, query_id, 180)
    total = stream.finish()

    expected_counts = Counter(i % groups for i in range(total))
    final: dict[int, int] = {}
    pairs: list[tuple[int, str]] = []

    def complete() -> bool:
        nonlocal final, pairs
        final = {}
        for key, value in latest_by_key(cluster.bootstrap, counts).items():
            group, window_start = struct.unpack(">iq", key)
            assert window_start == WINDOW_BASE_MS, "one window: the hour every record falls in"
            final[group] = json.loads(value or b"null")["N"]
        pairs = [(json.loads(m.value() or b"null")["ID"],
                  dict(m.headers() or [])["metastore.source"].decode())
                 for m in read_to_end(cluster.bootstrap, joined)]
        return final == dict(expected_counts) and {i for i, _ in pairs} == set(range(total))

    eventually(complete, 180, lambda: (
        f"exact window counts and every pair joined: counts {final}, expected "
        f"{dict(expected_counts)}, {len(set(range(total)) - {i for i, _ in pairs})} pairs missing"),
        interval=3)
    assert final == dict(expected_counts), "each group counted every record exactly once"
    by_source: dict[str, set[int]] = {}
    for i, coordinates in pairs:
        by_source.setdefault(coordinates, set()).add(i)
    assert all(len(ids) == 1 for ids in by_source.values()), "a source pair joins one way"
    assert sorted(i for ids in by_source.values() for i in ids) == list(range(total)), (
        "deduplicated by source offsets: every pair joined exactly once")
    print(f"\nowners killed: {sorted(owners)}; join records {len(pairs)} for {total} pairs "
          f"({len(pairs) - len(by_source)} re-written by the new owner)")
