"""A local cluster of metastore nodes, each a `metastore server` process on 127.0.0.1.

State (service id, Kafka, each node's port and pid) lives in ``nodes.json`` under the root, logs
in ``<root>/<node>.log``. Only processes whose command line names this root are ever signalled.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import httpx

from metastore.dev.exceptions import LocalInfraError
from metastore.dev.processes import pid_alive, pid_exists, reap, send, terminate, write_state

STATE_FILE = "nodes.json"
BASE_PORT = 8088


@dataclass(frozen=True)
class LocalNode:
    name: str
    port: int
    pid: int | None = None
    extra_args: tuple[str, ...] = ()
    scheme: str = "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"


@dataclass(frozen=True)
class NodeClusterState:
    service_id: str
    bootstrap_servers: str
    nodes: tuple[LocalNode, ...] = field(default_factory=tuple)
    ca_file: str | None = None
    """The CA of the nodes' HTTPS certificates; None: they serve plain HTTP."""

    def node(self, name: str) -> LocalNode:
        for node in self.nodes:
            if node.name == name:
                return node
        raise LocalInfraError(f"no node named {name!r}; nodes: "
                              + ", ".join(n.name for n in self.nodes))


class LocalNodeCluster:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    @property
    def marker(self) -> str:
        return str(self.root)

    def state(self) -> NodeClusterState | None:
        try:
            data = json.loads((self.root / STATE_FILE).read_text())
            nodes = tuple(LocalNode(n["name"], n["port"], n.get("pid"),
                                    tuple(n.get("extra_args", ())), n.get("scheme", "http"))
                          for n in data["nodes"])
            return NodeClusterState(data["service_id"], data["bootstrap_servers"], nodes,
                                    data.get("ca_file"))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _save(self, state: NodeClusterState) -> None:
        """Write the state atomically: readers in other threads or processes never see half."""
        self.root.mkdir(parents=True, exist_ok=True)
        write_state(self.root / STATE_FILE, json.dumps(asdict(state), indent=2))

    def is_running(self, node: LocalNode) -> bool:
        return node.pid is not None and pid_alive(node.pid, self.marker)

    def log_path(self, name: str) -> Path:
        return self.root / f"{name}.log"

    # -- lifecycle -------------------------------------------------------------------------------
    def up(self, count: int, service_id: str, bootstrap_servers: str,
           extra_args: tuple[str, ...] = (), timeout: float = 180.0,
           ports: list[int] | None = None, ca_file: str | None = None) -> NodeClusterState:
        """Start ``count`` nodes and wait until each is READY; ``ca_file``: they serve HTTPS
        (their ``extra_args`` configure it) with a certificate of this CA."""
        existing = self.state()
        if existing is not None and any(self.is_running(n) for n in existing.nodes):
            raise LocalInfraError("a local cluster is already running here; "
                                  "run 'metastore dev down' first")
        chosen = ports or [BASE_PORT + i for i in range(count)]
        scheme = "http" if ca_file is None else "https"
        nodes = tuple(LocalNode(f"node-{i + 1}", chosen[i], None, extra_args, scheme)
                      for i in range(count))
        state = NodeClusterState(service_id, bootstrap_servers, nodes, ca_file)
        self._save(state)
        for node in nodes:
            state = self.start_node(node.name, wait=False)
        for node in state.nodes:
            self.wait_ready(node, timeout, ca_file)
        return state

    def start_node(self, name: str, wait: bool = True, timeout: float = 180.0,
                   extra_args: tuple[str, ...] | None = None) -> NodeClusterState:
        """Start ``name`` (again); ``extra_args`` replaces its extra server arguments."""
        state = self._require_state()
        node = state.node(name)
        if self.is_running(node):
            return state
        if extra_args is not None:
            node = replace(node, extra_args=extra_args)
        data_dir = self.root / name
        data_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "cli.main", "server",
                   "--service-id", state.service_id, "--bootstrap-servers", state.bootstrap_servers,
                   "--node-id", name, "--listen", f"127.0.0.1:{node.port}",
                   "--data-dir", str(data_dir), *node.extra_args]
        if "--query-checkpoint-dir" not in node.extra_args:  # shared: any node can take over
            command += ["--query-checkpoint-dir", str(self.root / "query-checkpoints")]
        with self.log_path(name).open("ab") as log:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True,
                                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
        started = replace(node, pid=process.pid)
        state = replace(state, nodes=tuple(started if n.name == name else n for n in state.nodes))
        self._save(state)
        if wait:
            self.wait_ready(started, timeout, state.ca_file)
        return state

    def add_node(self, name: str, port: int, extra_args: tuple[str, ...] = ()) -> NodeClusterState:
        """Register a new node of the same service (not started)."""
        state = self._require_state()
        scheme = "http" if state.ca_file is None else "https"
        state = replace(state, nodes=(*state.nodes,
                                      LocalNode(name, port, None, extra_args, scheme)))
        self._save(state)
        return state

    def wait_ready(self, node: LocalNode, timeout: float, ca_file: str | None = None) -> None:
        verify: ssl.SSLContext | bool = (True if ca_file is None
                                         else ssl.create_default_context(cafile=ca_file))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if node.pid is None or not pid_exists(node.pid):
                tail = "\n".join(self.log_path(node.name).read_text(errors="replace")
                                 .splitlines()[-20:])
                raise LocalInfraError(f"{node.name} exited during start-up:\n{tail}")
            try:
                if httpx.get(f"{node.url}/healthcheck", timeout=2,
                             verify=verify).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise LocalInfraError(f"{node.name} was not READY within {timeout:.0f}s; see "
                              f"{self.log_path(node.name)}")

    def stop_node(self, name: str, sig: signal.Signals = signal.SIGTERM) -> bool:
        """Signal one node (SIGTERM: clean stop, SIGKILL: crash); False if it was not running."""
        node = self._require_state().node(name)
        if not self.is_running(node):
            return False
        assert node.pid is not None
        if sig is signal.SIGKILL:
            send(node.pid, sig)
            time.sleep(0.2)
            reap(node.pid)
        else:
            terminate([node.pid], self.marker, timeout=20)
        return True

    def down(self) -> int:
        state = self.state()
        if state is None:
            return 0
        pids = [n.pid for n in state.nodes if n.pid is not None and self.is_running(n)]
        terminate(pids, self.marker, timeout=20)
        return len(pids)

    def _require_state(self) -> NodeClusterState:
        state = self.state()
        if state is None:
            raise LocalInfraError("no local cluster here; start one with 'metastore dev up'")
        return state
