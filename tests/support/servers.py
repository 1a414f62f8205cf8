"""Real node processes (`metastore server`) on the session's broker, driven over HTTP."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from metastore.dev.kafka_cluster import free_ports
from tests.support.kafka import unique
from tests.support.waiting import eventually


@dataclass
class ServerProcess:
    url: str
    service_id: str
    node_id: str
    process: subprocess.Popen[bytes]
    log: Path

    def http(self, **kwargs: object) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60, **kwargs)  # type: ignore[arg-type]

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return self.process.returncode


NO_PROCESSING_LOG = ("--ksql-property", "ksql.logging.processing.topic.auto.create=false",
                     "--ksql-property", "ksql.logging.processing.stream.auto.create=false")
"""A test's node creates no processing log topic or stream at its start (the tests that
want one say so, after these): a catalog holds only what its test created."""


def start_server(bootstrap: str, log_dir: Path, service_id: str, node_id: str,
                 *extra: str, wait: bool = True) -> ServerProcess:
    [port] = free_ports(1)
    log = log_dir / f"{node_id}.log"
    command = [sys.executable, "-m", "cli.main", "server", "--bootstrap-servers", bootstrap,
               "--service-id", service_id, "--node-id", node_id,
               "--listen", f"127.0.0.1:{port}", *NO_PROCESSING_LOG, *extra]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    server = ServerProcess(f"http://127.0.0.1:{port}", service_id, node_id, process, log)
    if wait:
        try:
            wait_until_serving(server)
        except BaseException:  # no caller holds it yet: it would outlive the test run
            server.stop(signal.SIGKILL, timeout=5)
            raise
    return server


def wait_until_serving(server: ServerProcess, timeout: float = 60, ready: bool = True) -> None:
    def serving() -> bool:
        if server.process.poll() is not None:
            raise AssertionError(f"server exited early:\n{server.output()}")
        try:
            response = httpx.get(f"{server.url}/healthcheck", timeout=2)
        except httpx.TransportError:
            return False
        return not ready or response.status_code == 200

    eventually(serving, timeout, lambda: f"the server to serve:\n{server.output()}", interval=0.1)


@pytest.fixture
def server_factory(kafka_bootstrap: str, tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """``server_factory(*extra_args, service_id=None, node_id='node-1', wait=True, spark=False,
    persistent=False, data_dir=None)``: a node process of the test's own, for a test that stops,
    restarts, kills or misconfigures it, or checks a whole catalog; a test of queries on Spark
    that only adds uniquely named objects uses ``spark_node``."""
    started: list[ServerProcess] = []

    def create(*extra: str, service_id: str | None = None, node_id: str = "node-1",
               wait: bool = True, spark: bool = False, persistent: bool = False,
               data_dir: Path | None = None) -> ServerProcess:
        """Nodes run without Spark unless ``spark=True`` (a Spark JVM per node is costly), with
        Spark's in-memory catalog unless ``persistent`` (Derby's start is costly too). Each gets a
        data directory of its own unless ``data_dir`` names one (to restart a node)."""
        directory = data_dir or tmp_path / f"data-{len(started)}-{node_id}"
        args = (*spark_args(spark, persistent), "--data-dir", str(directory), *extra)
        server = start_server(kafka_bootstrap, tmp_path, service_id or unique("svc"), node_id,
                              *args, wait=wait)
        started.append(server)
        return server

    yield create
    for server in started:
        server.stop()


def spark_args(spark: bool, persistent: bool = False) -> tuple[str, ...]:
    if not spark:
        return ("--spark-master", "none")
    return () if persistent else ("--spark-catalog", "in-memory")


@pytest.fixture
def server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    """A node of the test's own (without Spark): for tests that make it DEGRADED, list its
    whole catalog, or otherwise need a catalog no other test writes to."""
    return server_factory()


WRITE_TIMEOUT = 5
"""The shared Spark node's deadline for a client to take a streamed answer's next chunk (60 s by
default): short, so that a test sees a client that stops reading dropped."""


SINK_TIMEOUTS = ("--ksql-property", "ksql.streams.producer.delivery.timeout.ms=20000",
                 "--ksql-property", "ksql.streams.producer.request.timeout.ms=10000",
                 "--ksql-property", "ksql.streams.producer.max.block.ms=10000")
"""The shared Spark node's sink producers give up on a record after 20 s (Kafka's default:
120 s), so that a query whose sink is gone fails within a test's patience."""
SINK_GONE_RULE = ("ksql.error.classifier.regex.sink="
                  "SYSTEM .*(not present in metadata|Expiring [0-9]+ record).*")
"""The shared Spark node's operator rule: a sink its producer cannot deliver to is SYSTEM."""


@pytest.fixture(scope="session")
def spark_node_process(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory,
                       ) -> Iterator[ServerProcess]:
    yield from session_node(kafka_bootstrap, tmp_path_factory, "spark", True,
                            "--http-limit", f"stream_write_timeout_seconds={WRITE_TIMEOUT}",
                            "--ksql-property", "ksql.logging.processing.topic.auto.create=true",
                            *SINK_TIMEOUTS, "--ksql-property", f"{SINK_GONE_RULE}")


@pytest.fixture
def spark_node(spark_node_process: ServerProcess) -> Iterator[ServerProcess]:
    """One node process with Spark (local, in-memory catalog) for every test of persistent,
    push and pull queries that creates uniquely named objects (its users must not stop it,
    degrade it or expect it to be empty). What a test created is dropped after it."""
    with cleaned_after(spark_node_process):
        yield spark_node_process


@pytest.fixture(scope="session")
def plain_node_process(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory,
                       ) -> Iterator[ServerProcess]:
    yield from session_node(kafka_bootstrap, tmp_path_factory, "plain", spark=False)


@pytest.fixture
def plain_node(plain_node_process: ServerProcess) -> Iterator[ServerProcess]:
    """One node process without Spark per worker, for the tests of statements, inserts, PRINT
    and the REST surface that only add uniquely named objects or read: a test that stops the
    node, degrades it or lists its whole catalog uses ``server`` instead. What a test created is
    dropped after it."""
    with cleaned_after(plain_node_process, push_queries=False):
        yield plain_node_process


@contextlib.contextmanager
def cleaned_after(server: ServerProcess, push_queries: bool = True) -> Iterator[None]:
    """Terminate the persistent queries started within and drop the streams and tables created
    within, so that a shared node's Spark does not keep running every earlier test's
    micro-batches and table stores (and the next test finds only its own objects)."""
    queries, sources = set(_listed(server, "QUERIES")), set(_sources(server))
    yield
    started = [query for query in _listed(server, "QUERIES") if query not in queries]
    if started:
        _ksql(server, " ".join(f"TERMINATE {query};" for query in started))
    created = [source for source in _sources(server) if source not in sources]
    while created:  # a source another reads is dropped after it
        dropped = [s for s in created if _ksql(server, f"DROP {s[0]} {s[1]};", check=False)]
        if not dropped:
            raise AssertionError(f"could not drop what the test created: {created}")
        created = [s for s in created if s not in dropped]
    if push_queries:
        eventually(lambda: gauge(server, "metastore_push_queries") == 0, 60,
                   "the node's push queries to stop (the next test counts them)", interval=0.5)


def gauge(server: ServerProcess, name: str) -> float:
    """A gauge of the node's /metrics."""
    for line in httpx.get(f"{server.url}/metrics", timeout=30).text.splitlines():
        if line.startswith(f"{name} "):
            return float(line[len(name) + 1:])
    raise AssertionError(f"{server.url}/metrics has no {name}")


def _ksql(server: ServerProcess, text: str, check: bool = True) -> list[dict[str, Any]]:
    response = httpx.post(f"{server.url}/ksql", json={"ksql": text}, timeout=120)
    if check:
        assert response.status_code == 200, response.text
    return list(response.json()) if response.status_code == 200 else []


def _listed(server: ServerProcess, kind: str) -> list[str]:
    [entity] = _ksql(server, f"SHOW {kind};")
    return [str(item.get("id") or item["name"]) for item in entity[kind.lower()]
            if item.get("queryType") != "PUSH"]  # a push query ends with its client


def _sources(server: ServerProcess) -> list[tuple[str, str]]:
    return [("STREAM", f"`{name}`") for name in _listed(server, "STREAMS")] + [
        ("TABLE", f"`{name}`") for name in _listed(server, "TABLES")]


def session_node(bootstrap: str, tmp_path_factory: pytest.TempPathFactory, name: str,
                  spark: bool, *extra: str) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp(f"{name}-node")
    server = start_server(bootstrap, directory, unique(name), "node-1", *spark_args(spark),
                          "--data-dir", str(directory / "data"), *extra)
    try:
        if spark:
            eventually(lambda: _spark_started(server), 180, "the node's Spark to start",
                       interval=0.5)
        yield server
    finally:
        server.stop()


def _spark_started(server: ServerProcess) -> bool:
    """Whether the node's Spark runs: the gauge of its streaming queries is -1 (or absent)
    until then."""
    try:
        return gauge(server, "metastore_spark_streaming_queries") >= 0
    except AssertionError:
        return False
