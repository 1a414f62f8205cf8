"""A local Spark standalone cluster on 127.0.0.1: one master and N workers, started from the
installed pyspark's own distribution (``bin/spark-class org.apache.spark.deploy.master.Master`` and
``...deploy.worker.Worker``), so the cluster runs exactly the Spark the nodes drive.

State (ports, pids, worker sizes) lives in ``spark-cluster.json`` under the root, each daemon's log
in ``<root>/<daemon>.log`` and each worker's executors under ``<root>/<worker>/work``. Only processes
whose command line names this root are ever signalled. Readiness is the master's own JSON status
(``http://127.0.0.1:<web port>/json/``): every worker registered and ALIVE.

Each node drives the cluster as a Spark driver of its own (an application of the master):
:meth:`SparkClusterState.node_spark_conf` sizes an application so that every node of the service
gets one executor of one core on every worker at the same time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from metastore.dev import jars
from metastore.dev.exceptions import LocalInfraError
from metastore.dev.kafka_cluster import free_ports
from metastore.dev.processes import (
    log_tail,
    pid_alive,
    pid_exists,
    read_state,
    terminate,
    write_state,
)

STATE_FILE = "spark-cluster.json"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_MEMORY_MB = 512


class SparkClusterError(LocalInfraError):
    """The local Spark cluster did not start, or not in time."""

    code = "spark_cluster_start"


@dataclass(frozen=True)
class SparkDaemon:
    """The master or one worker: its name, RPC port, web UI port and pid."""

    name: str
    port: int
    web_port: int
    pid: int | None = None

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"


@dataclass(frozen=True)
class SparkClusterState:
    master: SparkDaemon
    workers: tuple[SparkDaemon, ...]
    worker_cores: int
    worker_memory_mb: int

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master.port}"

    def worker(self, name: str) -> SparkDaemon:
        for worker in self.workers:
            if worker.name == name:
                return worker
        raise LocalInfraError(f"no Spark worker named {name!r}; workers: "
                              + ", ".join(w.name for w in self.workers))

    def node_spark_conf(self) -> dict[str, str]:
        """A node's application on this cluster: one executor of one core per worker (Spark's
        standalone master spreads them), the driver on the loopback address the executors
        reach, and the UI on (its REST API shows where the tasks ran)."""
        return {"spark.executor.cores": "1",
                "spark.cores.max": str(len(self.workers)),
                "spark.executor.memory": f"{EXECUTOR_MEMORY_MB}m",
                "spark.driver.host": "127.0.0.1",
                "spark.ui.enabled": "true"}

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @staticmethod
    def from_json(text: str) -> SparkClusterState:
        data = json.loads(text)
        return SparkClusterState(master=SparkDaemon(**data["master"]),
                                 workers=tuple(SparkDaemon(**w) for w in data["workers"]),
                                 worker_cores=int(data["worker_cores"]),
                                 worker_memory_mb=int(data["worker_memory_mb"]))


def spark_home() -> Path:
    """The installed pyspark's distribution: ``bin/spark-class`` and Spark's jars."""
    import pyspark

    return Path(pyspark.__file__).parent


class LocalSparkCluster:
    """A master and ``workers`` workers under ``root``, each worker offering ``worker_cores``
    cores (advertised: they may exceed the machine's) and ``worker_memory_mb`` of memory."""

    def __init__(self, root: Path, workers: int = 2, worker_cores: int = 2,
                 worker_memory_mb: int = 2048) -> None:
        if not 1 <= workers <= 8:
            raise ValueError("a local Spark cluster has 1 to 8 workers")
        if worker_cores < 1 or worker_memory_mb < EXECUTOR_MEMORY_MB:
            raise ValueError(f"a worker needs at least 1 core and {EXECUTOR_MEMORY_MB} MB")
        self.root = root.resolve()
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory_mb = worker_memory_mb

    @property
    def marker(self) -> str:
        return str(self.root)

    @property
    def state_path(self) -> Path:
        return self.root / STATE_FILE

    def state(self) -> SparkClusterState | None:
        return read_state(self.state_path, SparkClusterState.from_json)

    def is_alive(self, daemon: SparkDaemon) -> bool:
        return daemon.pid is not None and pid_alive(daemon.pid, self.marker)

    def running_daemons(self) -> list[SparkDaemon]:
        state = self.state()
        if state is None:
            return []
        return [d for d in (state.master, *state.workers) if self.is_alive(d)]

    def log_path(self, name: str) -> Path:
        return self.root / f"{name}.log"

    # -- start ---------------------------------------------------------------------------------
    def start(self, progress: TextIO | None = sys.stderr, timeout: float = 90.0) -> SparkClusterState:
        """Start the cluster (or return it when it runs as asked) once every worker is ALIVE."""
        existing = self.state()
        if existing is not None and self._runs_as_asked(existing):
            return existing
        self.stop()
        self.root.mkdir(parents=True, exist_ok=True)
        ports = free_ports(2 + 2 * self.workers)
        master = SparkDaemon("master", ports[0], ports[1])
        workers = tuple(SparkDaemon(f"worker-{i + 1}", ports[2 + 2 * i], ports[3 + 2 * i])
                        for i in range(self.workers))
        if progress is not None:
            print(f"Starting a Spark master and {self.workers} worker(s) under {self.root}...",
                  file=progress, flush=True)
        master = self._launch(master, [MASTER_CLASS, "--host", "127.0.0.1",
                                       "--port", str(master.port),
                                       "--webui-port", str(master.web_port)])
        state = SparkClusterState(master, (), self.worker_cores, self.worker_memory_mb)
        self._save(state)
        try:  # a worker that finds no master retries only after 5 to 15 s
            self._wait_ready(state, timeout)
        except SparkClusterError:
            self.stop()
            raise
        started = []
        for worker in workers:
            work_dir = self.root / worker.name / "work"
            work_dir.mkdir(parents=True, exist_ok=True)
            started.append(self._launch(worker, [
                WORKER_CLASS, "--host", "127.0.0.1", "--port", str(worker.port),
                "--webui-port", str(worker.web_port), "--cores", str(self.worker_cores),
                "--memory", f"{self.worker_memory_mb}m", "--work-dir", str(work_dir),
                state.master_url]))
        state = replace(state, workers=tuple(started))
        self._save(state)
        try:
            self._wait_ready(state, timeout)
        except SparkClusterError:
            self.stop()
            raise
        if progress is not None:
            print(f"Spark is ready at {state.master_url} (UI {state.master.web_url})",
                  file=progress, flush=True)
        return state

    def _runs_as_asked(self, state: SparkClusterState) -> bool:
        return (len(state.workers) == self.workers and state.worker_cores == self.worker_cores
                and state.worker_memory_mb == self.worker_memory_mb
                and all(self.is_alive(d) for d in (state.master, *state.workers)))

    def _launch(self, daemon: SparkDaemon, arguments: list[str]) -> SparkDaemon:
        jars.require_java()
        home = spark_home()
        # the root in the daemon's command line is how stop() knows it is ours; no port retry,
        # so a port taken since free_ports() fails the start instead of moving the daemon
        own = f"-Dmetastore.local.root={self.root} -Dspark.port.maxRetries=0"
        env = {**os.environ, "SPARK_HOME": str(home),
               "SPARK_DAEMON_JAVA_OPTS": f"{os.environ.get('SPARK_DAEMON_JAVA_OPTS', '')} {own}",
               "SPARK_DAEMON_MEMORY": "512m", "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable}
        with self.log_path(daemon.name).open("ab") as log:
            process = subprocess.Popen([str(home / "bin" / "spark-class"), *arguments],
                                       stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True, env=env)
        return replace(daemon, pid=process.pid)

    def _save(self, state: SparkClusterState) -> None:
        write_state(self.state_path, state.to_json())

    def _wait_ready(self, state: SparkClusterState, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for daemon in (state.master, *state.workers):
                if daemon.pid is None or not pid_exists(daemon.pid):
                    raise SparkClusterError(f"the Spark {daemon.name} exited during start-up:\n"
                                            f"{log_tail(self.log_path(daemon.name))}")
            status = master_status(state)
            if status is not None and status.get("aliveworkers") == len(state.workers):
                return
            if time.monotonic() > deadline:
                raise SparkClusterError(f"the Spark cluster was not ready within {timeout:.0f}s; "
                                        f"see {self.root}/*.log")
            time.sleep(0.25)

    # -- stop ----------------------------------------------------------------------------------
    def stop(self, timeout: float = 20.0) -> int:
        """Stop every daemon this launcher started (workers first); how many were running."""
        state = self.state()
        if state is None:
            return 0
        workers = [w.pid for w in state.workers if w.pid is not None and self.is_alive(w)]
        terminate(workers, self.marker, timeout)
        master = [state.master.pid] if state.master.pid is not None and self.is_alive(
            state.master) else []
        terminate(master, self.marker, timeout)
        return len(workers) + len(master)


def master_status(state: SparkClusterState, timeout: float = 2.0) -> dict[str, Any] | None:
    """The master's JSON status (workers, applications), or None when it does not answer."""
    body = _json(f"{state.master.web_url}/json/", timeout)
    return body if isinstance(body, dict) else None


def worker_status(worker: SparkDaemon, timeout: float = 2.0) -> dict[str, Any] | None:
    """A worker's JSON status (its executors and their applications), or None."""
    body = _json(f"{worker.web_url}/json/", timeout)
    return body if isinstance(body, dict) else None


def _json(url: str, timeout: float) -> Any:
    """The JSON body at ``url``, or None when nothing answers with JSON."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.load(response)
    except (OSError, urllib.error.URLError, ValueError):
        return None


def application_executors(ui_url: str, application_id: str,
                          timeout: float = 5.0) -> list[dict[str, Any]]:
    """The executors of a running application from its driver's REST API
    (``/api/v1/applications/<id>/executors``): id, hostPort, totalTasks... The driver is one."""
    body = _json(f"{ui_url.rstrip('/')}/api/v1/applications/{application_id}/executors",
                 timeout)
    return [e for e in body if isinstance(e, dict)] if isinstance(body, list) else []
