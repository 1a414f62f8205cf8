"""Clusters of node processes on real Kafka: races, crashes, zombies, restarts, broker failures."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka.admin import AdminClient

from integration.conftest import Cluster
from metastore.dev.kafka_cluster import LocalKafkaCluster
from metastore.kafka.consumer import EndOffsets
from metastore.kafka.settings import KafkaSettings
from metastore.log.dump import read_committed
from metastore.log.topic import command_topic_name
from tests.support.servers import NO_PROCESSING_LOG
from tests.support.waiting import eventually

ClusterFactory = Callable[..., Cluster]


def create(name: str, topic: str) -> str:
    return (f"CREATE STREAM {name} (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{topic}', "
            "VALUE_FORMAT='JSON', PARTITIONS=1);")


def log_records(cluster: Cluster) -> list[dict[str, Any]]:
    """The committed command records, each with its ``offset``, once no transaction is open:
    a commit is acknowledged before the broker writes its marker, so the stable end a fresh
    reader sees may still stand before the last acknowledged record. After 30 s they are read
    anyway: a writer killed in a transaction leaves it open until its timeout, and nothing
    acknowledged comes after it (the next writer would have ended it)."""
    settings, topic = KafkaSettings(cluster.bootstrap), command_topic_name(cluster.service_id)
    with contextlib.closing(EndOffsets(settings, committed=True)) as stable, \
            contextlib.closing(EndOffsets(settings, committed=False)) as written, \
            contextlib.suppress(AssertionError):
        eventually(lambda: stable.end_offset(topic) == written.end_offset(topic), 30,
                   "the command log's last transaction to end", interval=0.1)
    records = read_committed(settings, topic, group_id=f"check-{uuid.uuid4().hex[:8]}")
    return [json.loads(r.value or b"{}") | {"offset": r.offset} for r in records]


def verify_offline(cluster: Cluster, node_url: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "log", "verify", "--bootstrap-servers", cluster.bootstrap,
         "--service-id", cluster.service_id, "--node", node_url, "--json"],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(json.loads(result.stdout))


def test_concurrent_conflicting_ddl_across_three_nodes(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory()
    cluster.up(3)
    names = [f"RACE{i}" for i in range(6)]
    topic = f"race-{uuid.uuid4().hex[:6]}"
    outcomes: list[tuple[str, int, str]] = []
    lock = threading.Lock()

    def client(worker: int) -> None:
        rng = random.Random(worker)
        for _ in range(8):
            name = rng.choice(names)
            node = f"node-{rng.randint(1, 3)}"
            response = cluster.ksql(node, create(name, topic))
            with lock:
                outcomes.append((name, response.status_code, response.text[:200]))

    threads = [threading.Thread(target=client, args=(w,)) for w in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    successes = Counter(name for name, status, _ in outcomes if status == 200)
    assert set(successes) == set(names) and set(successes.values()) == {1}, outcomes
    rejected = [text for _, status, text in outcomes if status != 200]
    assert all("already exists" in text for text in rejected), rejected
    created = Counter(r["commandId"] for r in log_records(cluster))
    assert created == Counter({f"stream/{n}/create": 1 for n in names})
    cluster.converged()


def test_node_killed_between_produce_and_commit(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory()
    cluster.up(3)
    topic = f"kill-{uuid.uuid4().hex[:6]}"
    assert cluster.ksql("node-1", create("BEFORE", topic)).status_code == 200
    cluster.nodes.stop_node("node-3")
    cluster.nodes.start_node("node-3", extra_args=(  # it writes itself, not through node-1
        *NO_PROCESSING_LOG, "--spark-master", "none", "--no-write-forwarding",
        "--fault-injection", "die-before-commit"))
    try:
        cluster.ksql("node-3", create("DOOMED", topic))
        raise AssertionError("node-3 answered although it died before committing")
    except httpx.TransportError:
        pass
    assert not cluster.nodes.is_running(cluster.nodes.state().node("node-3"))  # type: ignore[union-attr]
    for index in range(3):
        response = cluster.ksql(f"node-{1 + index % 2}", create(f"AFTER{index}", topic))
        assert response.status_code == 200, response.text
    cluster.nodes.start_node("node-3", extra_args=(*NO_PROCESSING_LOG, "--spark-master", "none"))
    ids = [r["commandId"] for r in log_records(cluster)]
    assert "stream/DOOMED/create" not in ids
    assert ids == ["stream/BEFORE/create", "stream/AFTER0/create", "stream/AFTER1/create",
                   "stream/AFTER2/create"]
    cluster.converged()


def test_frozen_node_is_fenced_and_its_client_gets_a_clear_answer(
        cluster_factory: ClusterFactory, tmp_path: Path) -> None:
    cluster = cluster_factory()
    cluster.up(2)
    marker = tmp_path / "in-transaction"
    cluster.nodes.stop_node("node-2")
    cluster.nodes.start_node("node-2", extra_args=(
        *NO_PROCESSING_LOG, "--spark-master", "none", "--fault-injection",
        f"stall-before-commit:{marker}"))
    topic = f"frozen-{uuid.uuid4().hex[:6]}"
    answer: dict[str, httpx.Response] = {}
    frozen_client = threading.Thread(
        target=lambda: answer.setdefault("frozen", cluster.ksql("node-2", create("FROZEN", topic))))
    frozen_client.start()
    eventually(marker.exists, 30, "node-2 to open its transaction", interval=0.05)
    pid = cluster.nodes.state().node("node-2").pid  # type: ignore[union-attr]
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        other = cluster.ksql("node-1", create("FROZEN", topic))
        assert other.status_code == 200, other.text
    finally:
        os.kill(pid, signal.SIGCONT)
    frozen_client.join(120)
    response = answer["frozen"]
    assert response.status_code == 400, response.text
    assert "already exists" in response.json()["message"], "the retry re-validated and was told"
    ids = [r["commandId"] for r in log_records(cluster)]
    assert ids == ["stream/FROZEN/create"]
    [record] = log_records(cluster)
    assert record["originNode"] == "node-1", "the zombie's record never became visible"
    cluster.converged()


def test_full_restart_and_a_new_node_reach_the_same_fingerprint(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory()
    cluster.up(3)
    topic = f"restart-{uuid.uuid4().hex[:6]}"
    for index in range(10):
        assert cluster.ksql(f"node-{1 + index % 3}", create(f"R{index}", topic)).status_code == 200
    cluster.ksql("node-1", "CREATE TABLE COUNTS AS SELECT V, COUNT(*) AS C FROM R0 GROUP BY V;")
    before = cluster.converged()
    cluster.nodes.down()
    for name in ("node-1", "node-2", "node-3"):
        cluster.nodes.start_node(name, wait=False)
    from metastore.dev.kafka_cluster import free_ports

    [port] = free_ports(1)
    cluster.nodes.add_node("node-4", port, (*NO_PROCESSING_LOG, "--spark-master", "none"))
    cluster.nodes.start_node("node-4")
    state = cluster.nodes.state()
    assert state is not None
    for node in state.nodes:
        cluster.nodes.wait_ready(node, 120)
    after = cluster.converged()
    assert set(after.values()) == set(before.values())
    assert len(after) == 4
    report = verify_offline(cluster, cluster.url("node-4"))
    assert report["node"]["agrees"] is True


def test_losing_the_command_topic_leader_loses_no_acknowledged_statement(
        cluster_factory: ClusterFactory, tmp_path: Path) -> None:
    brokers = LocalKafkaCluster(tmp_path / "three-brokers", brokers=3)
    bootstrap = brokers.start(progress=None).bootstrap_servers
    try:
        cluster = cluster_factory(bootstrap)
        cluster.up(2)
        topic = f"leader-{uuid.uuid4().hex[:6]}"
        acknowledged: list[str] = []
        errors: list[str] = []
        stop = threading.Event()

        def writer() -> None:
            index = 0
            while not stop.is_set():
                name = f"L{index}"
                try:
                    response = cluster.ksql("node-1", create(name, topic))
                except httpx.TransportError as error:
                    errors.append(str(error))
                    response = None
                if response is not None and response.status_code == 200:
                    acknowledged.append(name)
                elif response is not None:
                    errors.append(response.text[:200])
                index += 1

        def wait_acknowledged(count: int, timeout: float) -> None:
            eventually(lambda: len(acknowledged) >= count, timeout,
                       lambda: f"{count} acknowledged writes, now {len(acknowledged)}, "
                               f"the last errors {errors[-5:]}", interval=0.1)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            wait_acknowledged(5, 60)
            metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
            leader = metadata.topics[command_topic_name(cluster.service_id)].partitions[0].leader
            brokers.kill_node(leader)
            wait_acknowledged(len(acknowledged) + 3, 90)  # writes go on with the two other brokers
            brokers.restart_node(leader)
            wait_acknowledged(len(acknowledged) + 3, 90)
        finally:
            stop.set()
            thread.join(120)
        ids = Counter(r["commandId"] for r in log_records(cluster))
        for name in acknowledged:
            assert ids[f"stream/{name}/create"] == 1, name
        assert all(count == 1 for count in ids.values())
        cluster.converged(timeout=120)
    finally:
        brokers.stop()


def abusive_requests(service_id: str, topic: str) -> list[dict[str, Any]]:
    """Bodies a hostile client sends: each must be refused (4xx), or meet a node not ready."""
    own_log = command_topic_name(service_id)
    chain = "".join(f"CREATE TYPE ABUSE_T{i} AS ARRAY<{'INT' if i == 0 else f'ABUSE_T{i - 1}'}>;"
                    for i in range(40))
    statements = [
        f"CREATE STREAM STEAL (ID INT KEY) WITH (KAFKA_TOPIC='{own_log}', VALUE_FORMAT='JSON');",
        f"CREATE STREAM STEAL WITH (KAFKA_TOPIC='{own_log}') AS SELECT * FROM C1;",
        "CREATE STREAM STEAL (ID INT KEY) WITH (KAFKA_TOPIC='__consumer_offsets', "
        "VALUE_FORMAT='JSON');",
        f"CREATE STREAM C1 (ID INT KEY) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', "
        "PARTITIONS=1099511627776);",
        "CREATE STREAM C2 (ID INT KEY) WITH (KAFKA_TOPIC='bad\x00name', VALUE_FORMAT='JSON', "
        "PARTITIONS=1, REPLICAS=40000);",
        chain,
        "CREATE STREAM X AS SELECT ID, " + "(" * 20_000 + "1" + ")" * 20_000 + " FROM C1;",
        "SHOW STREAMS EXTENDED;" * 1001,
    ]
    bodies: list[dict[str, Any]] = [{"ksql": text} for text in statements]
    bodies.append({"ksql": create("C3", topic), "requestId": "chaos-reused-id"})
    bodies.append({"ksql": "DROP STREAM IF EXISTS C3;", "requestId": "chaos-reused-id"})
    return bodies


class _Chaos:
    """The chaos run's clients (random DDL, each answer counted) and abusers (requests that
    must be refused), on threads, until stopped."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        self.cluster, self.topic = cluster, topic
        self.acknowledged: Counter[str] = Counter()
        self.failed_clearly = 0
        self.abuse_answers: Counter[int] = Counter()
        self.crashes: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._guarded, args=(self._client, w))
                         for w in range(6)]
        self._threads += [threading.Thread(target=self._guarded, args=(self._abuser, w))
                          for w in range(2)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)

    def _guarded(self, run: Callable[[int], None], worker: int) -> None:
        try:
            run(worker)
        except BaseException as error:  # a dead client would make the run prove less
            self.crashes.append(error)
            raise

    def _post(self, local: random.Random, body: dict[str, Any]) -> httpx.Response | None:
        urls = self.cluster.urls()
        if not urls:
            time.sleep(0.1)
            return None
        try:
            return httpx.post(f"{local.choice(urls)}/ksql", json=body, timeout=30)
        except httpx.TransportError:
            return None

    def _abuser(self, worker: int) -> None:
        local = random.Random(1000 + worker)
        bodies = abusive_requests(self.cluster.service_id, self.topic)
        while not self._stop.is_set():
            body = local.choice(bodies)
            response = self._post(local, body)
            if response is None:
                continue
            with self._lock:
                self.abuse_answers[response.status_code] += 1
            if response.status_code == 200:
                assert body.get("requestId") == "chaos-reused-id", (body, response.text)

    def _client(self, worker: int) -> None:
        local = random.Random(worker)
        while not self._stop.is_set():
            name = f"C{local.randint(0, 40)}"
            statement = (create(name, self.topic) if local.random() < 0.7
                         else f"DROP STREAM IF EXISTS {name};")
            response = self._post(local, {"ksql": statement, "requestId": str(uuid.uuid4())})
            if response is None:
                continue
            with self._lock:
                if response.status_code == 200:
                    for entity in response.json():
                        if "commandSequenceNumber" in entity:
                            key = f"{entity['commandId']}@{entity['commandSequenceNumber']}"
                            self.acknowledged[key] += 1
                elif response.status_code >= 500:
                    self.failed_clearly += 1


def _kill_and_restart(cluster: Cluster, seconds: float) -> None:
    """Kill (SIGKILL or SIGTERM) and restart a random node every few seconds."""
    rng = random.Random(7)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(rng.uniform(2, 5))
        victim = f"node-{rng.randint(1, 3)}"
        sig = rng.choice([signal.SIGKILL, signal.SIGTERM])
        cluster.nodes.stop_node(victim, sig)
        time.sleep(rng.uniform(0.5, 2))
        cluster.nodes.start_node(victim)


def test_chaos(cluster_factory: ClusterFactory, chaos_seconds: float) -> None:
    """Random DDL from many clients, and abuse from others, while nodes are killed and
    restarted at random: nothing acknowledged is lost or doubled, no abuse is accepted."""
    cluster = cluster_factory()
    cluster.up(3)
    chaos = _Chaos(cluster, f"chaos-{uuid.uuid4().hex[:6]}")
    chaos.start()
    _kill_and_restart(cluster, chaos_seconds)
    chaos.stop()
    assert not chaos.crashes, chaos.crashes
    records = log_records(cluster)
    at_offset = {r["offset"]: r["commandId"] for r in records}
    assert chaos.acknowledged, "the chaos run acknowledged nothing"
    for key, answers in chaos.acknowledged.items():
        command_id, offset = key.rsplit("@", 1)
        assert answers == 1, f"{key} acknowledged twice"
        assert at_offset.get(int(offset)) == command_id, f"acknowledged {key} is not in the log"
    request_ids = Counter(r["requestId"] for r in records)
    assert all(count == 1 for count in request_ids.values()), "a request was applied twice"
    abuse_answers = chaos.abuse_answers
    assert abuse_answers[400] > 0, abuse_answers
    assert set(abuse_answers) <= {200, 400, 503}, abuse_answers
    assert not any(r["commandId"].startswith(("stream/STEAL/", "type/ABUSE_T", "stream/X/"))
                   for r in records), "an abusive statement was written"
    converged = cluster.converged(timeout=120)
    fingerprints = {fingerprint for _, fingerprint in converged.values()}
    report = verify_offline(cluster, cluster.url("node-1"))
    assert fingerprints == {report["fingerprint"]}


def metric(cluster: Cluster, node: str, name: str) -> float:
    text = httpx.get(f"{cluster.url(node)}/metrics", timeout=30).text
    [line] = [line for line in text.splitlines() if line.startswith(f"{name} ")]
    return float(line.split()[1])


def sees_ready(cluster: Cluster, node: str, other: str) -> bool:
    hosts = httpx.get(f"{cluster.url(node)}/clusterStatus", timeout=30).json()["clusterStatus"]
    return any(h["nodeId"] == other and h["hostAlive"] and h["state"] == "READY"
               for h in hosts.values())


def test_writes_go_to_the_current_writer_and_to_another_node_when_it_dies(
        cluster_factory: ClusterFactory) -> None:
    """A node forwards a write to the node that wrote last instead of fencing it; the client
    reads its write on the node it asked at once; a writer that is gone is replaced."""
    cluster = cluster_factory()
    cluster.up(3)
    topic = f"fwd-{uuid.uuid4().hex[:6]}"
    assert cluster.ksql("node-1", create("FIRST", topic)).status_code == 200
    eventually(lambda: all(sees_ready(cluster, n, "node-1") and cluster.status(n)["appliedOffset"] >= 0
                           for n in ("node-2", "node-3")), 30,
               "every node to see node-1 READY and its record", interval=0.1)
    for index, node in enumerate(["node-2", "node-3", "node-2"]):
        response = cluster.ksql(node, create(f"VIA{index}", topic))
        assert response.status_code == 200, response.text
        listed = cluster.ksql(node, "SHOW STREAMS;").json()[0]["streams"]
        assert f"VIA{index}" in {s["name"] for s in listed}, "read your write where you wrote"
    refused = cluster.ksql("node-3", create("FIRST", topic))
    assert refused.status_code == 400 and "already exists" in refused.json()["message"]
    assert [r["originNode"] for r in log_records(cluster)] == ["node-1"] * 4
    assert metric(cluster, "node-2", "metastore_writes_forwarded_total") == 2
    assert metric(cluster, "node-3", "metastore_writes_forwarded_total") == 2
    assert metric(cluster, "node-1", "metastore_producers_created_total") == 1, "never fenced"

    cluster.nodes.stop_node("node-1")
    response = cluster.ksql("node-2", create("AFTER", topic))
    assert response.status_code == 200, response.text
    records = log_records(cluster)
    assert [(r["commandId"], r["originNode"]) for r in records[-1:]] == [
        ("stream/AFTER/create", "node-2")]
    after = response.json()[0]["commandSequenceNumber"]
    assert cluster.ksql("node-3", create("LAST", topic),
                        commandSequenceNumber=after).status_code == 200
    assert log_records(cluster)[-1]["originNode"] == "node-2", "node-2 is the writer now"
    cluster.converged()


def test_a_forwarded_write_carries_the_clients_credentials(
        cluster_factory: ClusterFactory, tmp_path: Path) -> None:
    credentials = tmp_path / "users"
    credentials.write_text("alice:s3cret\n")
    cluster = cluster_factory()
    cluster.up(2, "--auth-file", str(credentials))
    alice = ("alice", "s3cret")
    topic = f"auth-{uuid.uuid4().hex[:6]}"

    def ksql(node: str, text: str) -> httpx.Response:
        return httpx.post(f"{cluster.url(node)}/ksql", json={"ksql": text}, auth=alice,
                          timeout=60)

    assert ksql("node-1", create("FIRST", topic)).status_code == 200

    def node_2_sees_node_1_ready() -> bool:
        hosts = httpx.get(f"{cluster.url('node-2')}/clusterStatus", auth=alice,
                          timeout=30).json()["clusterStatus"]
        return any(h["nodeId"] == "node-1" and h["state"] == "READY" for h in hosts.values())

    eventually(node_2_sees_node_1_ready, 30, "node-2 to see node-1 READY", interval=0.1)
    assert ksql("node-2", create("SECOND", topic)).status_code == 200
    assert [r["originNode"] for r in log_records(cluster)] == ["node-1", "node-1"]
    unauthorized = httpx.post(f"{cluster.url('node-2')}/ksql", timeout=60,
                              json={"ksql": create("THIRD", topic)})
    assert unauthorized.status_code == 401
    text = httpx.get(f"{cluster.url('node-2')}/metrics", auth=alice, timeout=30).text
    assert "metastore_writes_forwarded_total 1.0" in text
