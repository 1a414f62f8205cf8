"""The demo behind the README's first command (`metastore dev demo`).

Starts local Kafka and three nodes, runs examples/ through the CLI against different nodes, shows
that every node reports the same image fingerprint, kills a node, writes while it is down,
restarts it and shows it caught up to the same state, verifies the log offline, then stops
everything it started. Exit status 0 when every check held. ``--secure`` runs it all on the
deployment of ``metastore dev up --secure`` (:mod:`metastore.dev.secure`): Kafka over SASL_SSL
with ACLs, the nodes over HTTPS as their admin user.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from metastore.dev.exceptions import LocalInfraError
from metastore.dev.node_cluster import LocalNode, LocalNodeCluster
from metastore.dev.paths import source_checkout
from metastore.dev.secure import SecureDeployment, secure_kafka, start_secure
from metastore.dev.spark_cluster import application_executors
from metastore.dev.stack import (
    ensure_kafka,
    external_bootstrap,
    local_kafka,
    local_nodes,
    local_spark,
    spark_node_args,
)

EXAMPLES = (source_checkout() or Path.cwd()) / "examples"


@dataclass
class Reach:
    """How the demo reaches the cluster: Kafka's client settings, and the nodes' CA and user
    (None: plain HTTP, no user)."""

    kafka: dict[str, str] = field(default_factory=dict)
    ca: str | None = None
    user: tuple[str, str] | None = None

    @staticmethod
    def of(deployment: SecureDeployment) -> Reach:
        user, _, password = deployment.cli_environment()["METASTORE_USER"].partition(":")
        return Reach(deployment.kafka_config(), deployment.ca, (user, password))

    @property
    def bootstrap(self) -> str:
        return self.kafka["bootstrap.servers"]

    def get(self, url: str, timeout: float = 10) -> httpx.Response:
        verify: ssl.SSLContext | bool = (True if self.ca is None
                                         else ssl.create_default_context(cafile=self.ca))
        return httpx.get(url, timeout=timeout, verify=verify, auth=self.user)

    def environment(self) -> dict[str, str]:
        """A CLI's environment: the nodes' CA and user, and the Kafka login (secrets in the
        environment, which only this user may read, never on a command line)."""
        if self.ca is None or self.user is None:
            return dict(os.environ)
        kafka = " ".join(f"{key}={value}" for key, value in self.kafka.items()
                         if key != "bootstrap.servers")
        return {**os.environ, "METASTORE_CA_CERT": self.ca,
                "METASTORE_USER": ":".join(self.user), "METASTORE_KAFKA": kafka}

    def use(self, other: Reach) -> None:
        self.kafka, self.ca, self.user = other.kafka, other.ca, other.user


REACH = Reach()
"""The run's reach: :func:`run_demo` sets it before the first step."""


def say(message: str) -> None:
    print(message, flush=True)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True,
                          text=True, timeout=300, check=False, env=REACH.environment())


def run_script(path: Path, node: LocalNode) -> bool:
    say(f"\n$ metastore run-script {path.relative_to(EXAMPLES.parent)} --server {node.url}")
    result = cli("run-script", str(path), "--server", node.url)
    say(result.stdout.rstrip() or result.stderr.rstrip())
    return result.returncode == 0


def fingerprints(nodes: tuple[LocalNode, ...], timeout: float = 30) -> dict[str, tuple[int, str]]:
    """Each node's (applied offset, fingerprint) once they all report the same offset."""
    deadline = time.monotonic() + timeout
    while True:
        seen = {}
        for node in nodes:
            status = REACH.get(f"{node.url}/v1/metastore").json()
            seen[node.name] = (status["appliedOffset"], status["imageFingerprint"])
        if len({offset for offset, _ in seen.values()}) == 1 or time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


def show_agreement(nodes: tuple[LocalNode, ...]) -> bool:
    seen = fingerprints(nodes)
    for name, (offset, fingerprint) in seen.items():
        say(f"  {name}: applied offset {offset}, image fingerprint {fingerprint[:24]}...")
    agree = len(set(seen.values())) == 1
    say("  => every node holds the same catalog" if agree else "  => NODES DISAGREE")
    return agree


def produce_pageviews() -> None:
    from confluent_kafka import Producer

    producer = Producer(REACH.kafka)
    for viewtime, user, page in ((1, "alice", "home"), (2, "bob", "cart"), (3, "alice", "pay")):
        producer.produce("pageviews", key=user.encode(),
                         value=json.dumps({"VIEWTIME": viewtime, "PAGE_ID": page}).encode())
    producer.flush(10)
    say("  produced 3 JSON records to the 'pageviews' topic")


def query_through_spark(node: LocalNode, timeout: float = 180) -> bool:
    deadline = time.monotonic() + timeout
    while not REACH.get(f"{node.url}/v1/metastore").json()["sparkInSync"]:
        if time.monotonic() > deadline:
            say(f"  {node.name}'s Spark catalog did not catch up in {timeout:.0f}s")
            return False
        time.sleep(0.5)
    statement = "SELECT * FROM pageviews;"
    say(f"\n$ metastore query \"{statement}\" --server {node.url}")
    result = cli("query", statement, "--server", node.url)
    say(result.stdout.rstrip() or result.stderr.rstrip())
    return result.returncode == 0 and "3 row(s)" in result.stdout


def query_moves_data(node: LocalNode, timeout: float = 240) -> bool:
    """The CTAS of examples/02 counts the produced pageviews into its sink topic, on Spark."""
    from confluent_kafka import Consumer

    expected = {"home": 1, "cart": 1, "pay": 1}
    consumer = Consumer({**REACH.kafka, "group.id": f"demo-{time.time()}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe(["PAGEVIEWS_PER_PAGE"])
    counts: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while counts != expected and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.5):
                value = message.value()
                if message.error() is None and value is not None:
                    counts[(message.key() or b"").decode()] = json.loads(value)["VIEWS"]
    finally:
        consumer.close()
    say("  PAGEVIEWS_PER_PAGE topic (upserts keyed by page): "
        + ", ".join(f"{page}={views}" for page, views in sorted(counts.items())))
    result = cli("exec", "SHOW QUERIES;", "--server", node.url, "--json")
    for entity in json.loads(result.stdout or "[]"):
        for query in entity.get("queries", []):
            say(f"  {query['id']}: {query['state']} on {query['ownerNode']}, lag {query['lag']}")
    return counts == expected


def tasks_on_workers(nodes: tuple[LocalNode, ...]) -> bool:
    """Each node's Spark application, from its driver's REST API: executors and tasks run."""
    ran = False
    for node in nodes:
        application = REACH.get(f"{node.url}/v1/metastore").json()["sparkApplication"]
        if not application or not application.get("uiUrl"):
            say(f"  {node.name}: no Spark application with a UI")
            continue
        executors = [e for e in application_executors(application["uiUrl"],
                                                      application["applicationId"])
                     if e.get("id") != "driver"]
        tasks = sum(int(e.get("totalTasks", 0)) for e in executors)
        say(f"  {node.name}: application {application['applicationId']} on "
            f"{application['master']}, {len(executors)} executor(s) on "
            f"{', '.join(sorted(str(e.get('hostPort')) for e in executors)) or 'no worker'}, "
            f"{tasks} task(s) run there")
        ran = ran or tasks > 0
    return ran


def _start_nodes(nodes_cluster: LocalNodeCluster, service_id: str, spark_workers: int,
                 secure: SecureDeployment | None) -> tuple[LocalNode, ...]:
    """Three nodes (on a Spark cluster of ``spark_workers``, if asked; secured by ``secure``)."""
    nodes_cluster.down()
    extra: tuple[str, ...] = () if secure is None else secure.node_args()
    if spark_workers:
        spark = local_spark(spark_workers, 3).start()
        say(f"Spark: {spark.master_url}, {spark_workers} worker(s)")
        extra += spark_node_args(spark)
    state = nodes_cluster.up(3, service_id, REACH.bootstrap, extra,
                             ca_file=None if secure is None else secure.ca)
    for node in state.nodes:
        say(f"  {node.name}: {node.url}")
    say(f"  the console, on every node: {state.nodes[0].url}/console/")
    return tuple(state.nodes)


def show_query_figures(nodes: tuple[LocalNode, ...], timeout: float = 60) -> bool:
    """``metastore status`` lists each query with its lag and the records it read; the owner's
    ``/metrics`` has the same series, labelled by query id: true when a query read records and
    its owner's ``/metrics`` counts them."""
    deadline = time.monotonic() + timeout
    counted: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not counted:
        status = json.loads(cli("status", "--server", nodes[0].url, "--json").stdout or "{}")
        counted = [q for q in status.get("queries", []) if q.get("recordsRead", 0) > 0]
        time.sleep(0 if counted else 1)
    say(cli("status", "--server", nodes[0].url).stdout.rstrip())
    by_name = {node.name: node for node in nodes}
    exported = False
    for query in counted:
        owner = by_name.get(str(query.get("ownerNode")))
        text = _metrics_text(owner.url) if owner is not None else ""
        if text:
            lines = [line for line in text.splitlines() if f'query_id="{query["id"]}"' in line
                     and line.startswith(("metastore_query_records_in",
                                          "metastore_query_lag"))]
            say("  " + "\n  ".join(lines))
            exported = exported or any(
                line.startswith("metastore_query_records_in_total")
                and float(line.rsplit(" ", 1)[-1]) > 0 for line in lines)
    return exported


def _metrics_text(url: str) -> str:
    """A node's /metrics, or nothing when it does not answer (it may be restarting, or its
    queries moving)."""
    try:
        response = REACH.get(f"{url}/metrics")
    except httpx.HTTPError:
        return ""
    return response.text if response.status_code == 200 else ""


def _show_catalog(nodes: tuple[LocalNode, ...], checks: list[tuple[str, bool]],
                  spark_workers: int) -> None:
    """Steps 2 to 4: statements through the CLI, one catalog on every node, Spark reading it
    and running persistent queries."""
    say("\n== 2. Statements through the CLI, each file to a different node")
    scripts = sorted(EXAMPLES.glob("0[1-3]_*.sql"))
    ok = all(run_script(path, nodes[i % 3]) for i, path in enumerate(scripts))
    checks.append(("examples ran on three different nodes", ok))

    say("\n== 3. Every node replays the same log into the same catalog")
    checks.append(("all nodes agree after the examples", show_agreement(nodes)))
    listing = cli("list", "streams", "--server", nodes[2].url)
    say(listing.stdout.rstrip())

    say("\n== 4. Spark SQL on any node reads the same streams from Kafka")
    produce_pageviews()
    checks.append(("a stream queried through Spark", query_through_spark(nodes[1])))

    say("\n== 4b. Persistent queries run as Spark streaming jobs, one node each")
    checks.append(("a persistent query moved data into its sink topic",
                   query_moves_data(nodes[2])))

    say("\n== 4c. What each query did: metastore status, and /metrics on its owner")
    checks.append(("the queries' figures are live in status and /metrics",
                   show_query_figures(nodes)))

    if spark_workers:
        say("\n== 4d. The Spark work ran on the cluster's workers")
        checks.append(("Spark tasks ran on the workers", tasks_on_workers(nodes)))


def _show_recovery(nodes_cluster: LocalNodeCluster, nodes: tuple[LocalNode, ...],
                   service_id: str, checks: list[tuple[str, bool]]) -> None:
    """Steps 5 to 7: a node killed, writes going on, its restart, the log replayed offline."""
    say("\n== 5. A node crashes (SIGKILL), the others keep writing")
    nodes_cluster.stop_node("node-3", signal.SIGKILL)
    say("  node-3 killed")
    ok = run_script(EXAMPLES / "04_while_a_node_is_down.sql", nodes[0])
    checks.append(("writes continue while a node is down", ok))

    say("\n== 6. The node restarts and catches up from the log")
    nodes_cluster.start_node("node-3")
    startup = REACH.get(f"{nodes[2].url}/v1/metastore", timeout=30).json()["startup"]
    say(f"  node-3 is READY again after {startup['readySeconds']} s: from "
        f"{startup['resumedFrom'] or 'the start of the log'}, "
        f"{startup['recordsReplayed']} records replayed")
    checks.append(("the restarted node caught up to the same state", show_agreement(nodes)))

    say("\n== 7. The log, replayed offline, gives the same fingerprint")
    verify = cli("log", "verify", "--bootstrap-servers", REACH.bootstrap, "--service-id",
                 service_id, "--node", nodes[2].url)
    say(verify.stdout.rstrip() or verify.stderr.rstrip())
    checks.append(("offline replay matches node-3", verify.returncode == 0))


def run_demo(keep: bool = False, spark_workers: int = 0, secure: bool = False) -> int:
    """The demo; with ``spark_workers`` the nodes run Spark on a local standalone cluster of that
    many workers instead of in local mode; ``secure``: on the secured deployment."""
    checks: list[tuple[str, bool]] = []
    service_id = f"demo-{int(time.time())}"
    kafka = secure_kafka() if secure else local_kafka()
    started_kafka = not kafka.is_running()
    nodes_cluster = local_nodes()
    try:
        say("== 1. Local Kafka and three metastore nodes" + (
            ": Kafka over SASL_SSL with ACLs, the nodes over HTTPS" if secure else ""))
        if started_kafka and (secure or not external_bootstrap()):
            kafka.wipe()  # the demo's own broker: no topics left from an earlier run
        deployment = start_secure(sys.stdout) if secure else None
        REACH.use(Reach.of(deployment) if deployment is not None
                  else Reach({"bootstrap.servers": ensure_kafka(1)}))
        say(f"Kafka: {REACH.bootstrap}")
        nodes = _start_nodes(nodes_cluster, service_id, spark_workers, deployment)
        _show_catalog(nodes, checks, spark_workers)
        _show_recovery(nodes_cluster, nodes, service_id, checks)
    except LocalInfraError as error:
        say(f"\nThe demo could not run: {error}")
        checks.append(("local cluster started", False))
    finally:
        if not keep:
            say("\n== Stopping everything the demo started")
            nodes_cluster.down()
            if spark_workers:
                local_spark().stop()
            if started_kafka:
                kafka.stop()
    say("\n== What the demo showed")
    for label, passed in checks:
        say(f"  [{'ok' if passed else 'FAILED'}] {label}")
    return 0 if checks and all(passed for _, passed in checks) else 1
