"""Real node processes (`metastore server`) on the session's broker, driven over HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from metastore.local.kafka_cluster import free_ports
from tests.conftest import unique


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


def start_server(bootstrap: str, log_dir: Path, service_id: str, node_id: str,
                 *extra: str, wait: bool = True) -> ServerProcess:
    [port] = free_ports(1)
    log = log_dir / f"{node_id}.log"
    command = [sys.executable, "-m", "cli.main", "server", "--bootstrap-servers", bootstrap,
               "--service-id", service_id, "--node-id", node_id,
               "--listen", f"127.0.0.1:{port}", *extra]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    server = ServerProcess(f"http://127.0.0.1:{port}", service_id, node_id, process, log)
    if wait:
        wait_until_serving(server)
    return server


def wait_until_serving(server: ServerProcess, timeout: float = 60, ready: bool = True) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"server exited early:\n{server.output()}")
        try:
            response = httpx.get(f"{server.url}/healthcheck", timeout=2)
            if not ready or response.status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"server not serving in {timeout}s:\n{server.output()}")


@pytest.fixture
def server_factory(kafka_bootstrap: str, tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """``server_factory(*extra_args, service_id=None, node_id='node-1', wait=True)``."""
    started: list[ServerProcess] = []

    def create(*extra: str, service_id: str | None = None, node_id: str = "node-1",
               wait: bool = True, spark: bool = False,
               data_dir: Path | None = None) -> ServerProcess:
        """Nodes run without Spark unless ``spark=True`` (a Spark JVM per node is costly).
        Each gets a data directory of its own unless ``data_dir`` names one (to restart a node)."""
        directory = data_dir or tmp_path / f"data-{len(started)}-{node_id}"
        args = (*(() if spark else ("--spark-master", "none")), "--data-dir", str(directory),
                *extra)
        server = start_server(kafka_bootstrap, tmp_path, service_id or unique("svc"), node_id,
                              *args, wait=wait)
        started.append(server)
        return server

    yield create
    for server in started:
        server.stop()


@pytest.fixture
def server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory()
