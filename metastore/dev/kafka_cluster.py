"""A real Apache Kafka cluster (KRaft, combined broker+controller nodes) on 127.0.0.1.

The launcher formats storage, starts one JVM per node from the jars Maven resolved, waits until
every broker answers metadata, and records the pids it started in ``cluster.json`` under its root
directory. ``stop`` signals only those pids, and only while their command line still names this
root, so it never touches a process it did not start.

Opt-in secured mode (``LocalKafkaCluster(..., security=Security.generate())``): every listener
speaks SASL_PLAINTEXT with SASL/PLAIN users (SASL_SSL with ``Security.generate(tls=<directory>)``:
a certificate authority of its own signs the brokers' certificate for 127.0.0.1 and localhost,
and clients trust its ``ca.pem``), the broker runs KRaft's ``StandardAuthorizer`` with
``allow.everyone.if.no.acl.found=false``, and the admin user is the only super user. The brokers
log in as the admin, to each other and to the controller listener: in combined KRaft mode the
principal of the controller listener must be a super user (it registers brokers and sends
cluster-level requests no ACL is created for before the cluster is up). A PLAINTEXT controller
listener would make that principal ``User:ANONYMOUS`` for anyone who reaches the port, so the
controller listener is SASL too. The node user has no rights until ACLs grant them (see
docs/kafka-acls.md). The credentials are recorded in ``cluster.json``.
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from metastore.dev import jars
from metastore.dev.exceptions import BrokerStartError
from metastore.dev.processes import log_tail, pid_alive, pid_exists, read_state, reap, send, terminate

STATE_FILE = "cluster.json"
_QUIET = logging.getLogger("metastore.dev.kafka_cluster.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
"""
AUTHORIZER_LOG4J2 = """\
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = INFO
"""
"""Secured mode: every denied operation is logged to broker.log ("... is Denied operation ...")."""
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SASL_LISTENER = "SASL_PLAINTEXT"
SASL_SSL_LISTENER = "SASL_SSL"
CERTIFICATE_VALIDITY = datetime.timedelta(days=365)
_USER_NAME = re.compile(r"[A-Za-z0-9._-]+")
_PASSWORD = re.compile(r"[^\"\\\s]+")


@dataclass(frozen=True)
class SaslUser:
    """A SASL/PLAIN user of a secured cluster."""

    name: str
    password: str

    def __post_init__(self) -> None:
        if _USER_NAME.fullmatch(self.name) is None:
            raise ValueError(f"a SASL user name is letters, digits, '.', '_' and '-': {self.name!r}")
        if _PASSWORD.fullmatch(self.password) is None:
            raise ValueError(f"the password of {self.name} must be non-empty, without spaces, "
                             "quotes or backslashes")

    @property
    def principal(self) -> str:
        return f"User:{self.name}"



@dataclass(frozen=True)
class TlsFiles:
    """The PEM files of a secured cluster's TLS: the CA clients trust, and the brokers' key with
    its certificate chain."""

    ca: str
    broker: str

    @staticmethod
    def generate(directory: Path) -> TlsFiles:
        """A new CA under ``directory`` (readable by the user only: ``ca.pem``, and its key
        ``ca.key`` for :meth:`issue_server`), and a broker certificate it signs for 127.0.0.1
        and localhost."""
        from metastore.dev import certificates  # cryptography: not needed before a secured start

        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
        ca = certificates.authority("metastore local CA", CERTIFICATE_VALIDITY)
        ca.pem(directory, "ca")
        files = TlsFiles(str(directory / "ca.pem"), str(directory / "broker.pem"))
        certificates.issue(ca, "kafka-broker", server=True, valid=CERTIFICATE_VALIDITY
                           ).key_and_chain(Path(files.broker), ca)
        return files

    def issue_server(self, name: str, path: Path) -> Path:
        """A certificate of this CA for a server ``name`` on 127.0.0.1 and localhost, with its
        key and chain in one PEM file at ``path``."""
        from metastore.dev import certificates

        ca = certificates.load(Path(self.ca), Path(self.ca).with_suffix(".key"))
        return certificates.issue(ca, name, server=True, valid=CERTIFICATE_VALIDITY
                                  ).key_and_chain(path, ca)


@dataclass(frozen=True)
class Security:
    """SASL/PLAIN users of a secured cluster: ``admin`` (the super user) and ``node`` (no rights
    but those ACLs grant); ``tls``: SASL_SSL with these files, None: SASL_PLAINTEXT."""

    admin: SaslUser
    node: SaslUser
    tls: TlsFiles | None = None

    def __post_init__(self) -> None:
        if self.admin.name == self.node.name:
            raise ValueError("the admin and the node user must differ")

    @staticmethod
    def generate(admin: str = "admin", node: str = "metastore",
                 tls: Path | None = None) -> Security:
        """Users with fresh random passwords; ``tls``: SASL_SSL, with a new CA in that
        directory."""
        return Security(SaslUser(admin, new_password()), SaslUser(node, new_password()),
                        None if tls is None else TlsFiles.generate(tls))

    @property
    def protocol(self) -> str:
        return SASL_LISTENER if self.tls is None else SASL_SSL_LISTENER

    def client_config(self, user: SaslUser) -> dict[str, str]:
        """Client settings that log in as ``user`` (a node takes them as ``--kafka K=V``)."""
        config = {"security.protocol": self.protocol, "sasl.mechanism": "PLAIN",
                  "sasl.username": user.name, "sasl.password": user.password}
        if self.tls is not None:
            config["ssl.ca.location"] = self.tls.ca
        return config

    def broker_settings(self) -> dict[str, str]:
        """The authorizer, the SASL mechanism, the users and the TLS files, for every listener
        of a node."""
        settings = {
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            f"listener.name.{self.protocol.lower()}.plain.sasl.jaas.config":
                self._jaas(self.admin, self.node),
            "listener.name.controller.plain.sasl.jaas.config": self._jaas(self.admin),
            "authorizer.class.name": AUTHORIZER,
            "allow.everyone.if.no.acl.found": "false",
            "super.users": self.admin.principal,
        }
        if self.tls is not None:
            settings |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": self.tls.broker,
                         "ssl.truststore.type": "PEM", "ssl.truststore.location": self.tls.ca}
        return settings

    def _jaas(self, *users: SaslUser) -> str:
        """PLAIN's login module: the brokers log in as the admin; ``users`` may log in here."""
        return plain_login(self.admin.name, self.admin.password,
                           {user.name: user.password for user in users})

    def to_dict(self) -> dict[str, Any]:
        data = {"admin": asdict(self.admin), "node": asdict(self.node)}
        return data if self.tls is None else {**data, "tls": asdict(self.tls)}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Security:
        tls = data.get("tls")
        return Security(SaslUser(**data["admin"]), SaslUser(**data["node"]),
                        None if tls is None else TlsFiles(**tls))


def new_password() -> str:
    return secrets.token_urlsafe(18)


def plain_login(user: str, password: str, accepted: dict[str, str] | None = None) -> str:
    """PLAIN's JAAS login as ``user``; ``accepted``: the users a broker lets log in."""
    users = "".join(f' user_{name}="{secret}"' for name, secret in (accepted or {}).items())
    return ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{user}" password="{password}"{users};')


@dataclass(frozen=True)
class NodeInfo:
    node_id: int
    port: int
    controller_port: int
    pid: int | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass(frozen=True)
class ClusterState:
    cluster_id: str
    nodes: tuple[NodeInfo, ...]
    security: Security | None = None

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.address for node in self.nodes)

    def client_config(self, user: SaslUser | None = None) -> dict[str, str]:
        """Bootstrap servers, plus ``user``'s SASL settings on a secured cluster (default: the
        admin)."""
        config = {"bootstrap.servers": self.bootstrap_servers}
        if self.security is not None:
            config.update(self.security.client_config(user or self.security.admin))
        return config

    def to_json(self) -> str:
        data: dict[str, Any] = {"cluster_id": self.cluster_id,
                                "nodes": [asdict(node) for node in self.nodes]}
        if self.security is not None:
            data["security"] = self.security.to_dict()
        return json.dumps(data, indent=2)

    @staticmethod
    def from_json(text: str) -> ClusterState:
        data = json.loads(text)
        security = data.get("security")
        return ClusterState(cluster_id=data["cluster_id"],
                            nodes=tuple(NodeInfo(**node) for node in data["nodes"]),
                            security=Security.from_dict(security) if security else None)


def free_ports(count: int) -> list[int]:
    """Ports the kernel reports free right now (bound together, so they are distinct)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def new_cluster_id() -> str:
    """A KRaft cluster id (base64 of a UUID) that does not start with '-' (read as an option)."""
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not candidate.startswith("-"):
            return candidate


class LocalKafkaCluster:
    """N combined KRaft nodes under ``root``; transactions and offsets sized for N.

    ``security``: the secured mode with these users (see the module docstring); None, the
    default, is PLAINTEXT without an authorizer.
    """

    def __init__(self, root: Path, brokers: int = 1, ports: Iterable[int] | None = None,
                 heap: str = "512m", security: Security | None = None) -> None:
        if brokers not in (1, 3):
            raise ValueError("a local cluster has 1 or 3 brokers")
        self.root = root.resolve()
        self.brokers = brokers
        self.heap = heap
        self.security = security
        self._ports = list(ports) if ports is not None else None

    # -- state -------------------------------------------------------------------------------
    @property
    def state_path(self) -> Path:
        return self.root / STATE_FILE

    def state(self) -> ClusterState | None:
        return read_state(self.state_path, ClusterState.from_json)

    def running_nodes(self) -> list[NodeInfo]:
        state = self.state()
        if state is None:
            return []
        return [node for node in state.nodes
                if node.pid is not None and pid_alive(node.pid, str(self.root))]

    def is_running(self) -> bool:
        state = self.state()
        return state is not None and len(self.running_nodes()) == len(state.nodes)

    # -- start -------------------------------------------------------------------------------
    def start(self, progress: TextIO | None = sys.stderr, timeout: float = 90.0) -> ClusterState:
        """Start the cluster (or return it if it already runs) once every broker is ready."""
        if self.is_running():
            state = self.state()
            assert state is not None
            return state
        if self.running_nodes():
            self.stop()
        classpath = os.pathsep.join(str(jar) for jar in jars.resolve(jars.kafka_broker(), progress))
        java = jars.require_java()
        previous = self.state()
        if previous is not None and self._reusable(previous):
            cluster_id, nodes, fresh = previous.cluster_id, previous.nodes, False
        else:
            ports = self._ports or free_ports(2 * self.brokers)
            nodes = tuple(NodeInfo(node_id=i + 1, port=ports[i],
                                   controller_port=ports[self.brokers + i])
                          for i in range(self.brokers))
            cluster_id, fresh = new_cluster_id(), True
            self.wipe()
        self.root.mkdir(parents=True, exist_ok=True)
        log4j = self.root / "log4j2.properties"
        log4j.write_text(LOG4J2 if self.security is None else LOG4J2 + AUTHORIZER_LOG4J2)
        if progress is not None:
            verb = "Starting" if fresh else "Restarting"
            print(f"{verb} {self.brokers} Kafka broker(s) under {self.root}...", file=progress,
                  flush=True)
        started: list[NodeInfo] = []
        for node in nodes:
            config = self._write_config(node, nodes)
            if fresh:
                self._format(java, classpath, cluster_id, config)
            started.append(self._launch(java, classpath, log4j, node, config))
        state = ClusterState(cluster_id=cluster_id, nodes=tuple(started), security=self.security)
        self._write_state(state)
        try:
            self._wait_ready(state, timeout)
        except BrokerStartError:
            self.stop()
            raise
        if progress is not None:
            print(f"Kafka is ready at {state.bootstrap_servers}", file=progress, flush=True)
        return state

    def _reusable(self, previous: ClusterState) -> bool:
        """Whether the stored cluster can restart as asked: same size, same security."""
        return len(previous.nodes) == self.brokers and previous.security == self.security

    def _write_state(self, state: ClusterState) -> None:
        self.state_path.write_text(state.to_json())
        if state.security is not None:
            self.state_path.chmod(0o600)

    def wipe(self) -> None:
        """Delete the cluster's data (it must not be running)."""
        if self.running_nodes():
            raise BrokerStartError("refusing to wipe a running cluster; stop it first")
        for directory in self.root.glob("node-*"):
            shutil.rmtree(directory, ignore_errors=True)
        self.state_path.unlink(missing_ok=True)

    def node_dir(self, node_id: int) -> Path:
        return self.root / f"node-{node_id}"

    def _write_config(self, node: NodeInfo, nodes: tuple[NodeInfo, ...]) -> Path:
        replication = len(nodes)
        min_isr = 2 if replication >= 3 else 1
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in nodes)
        directory = self.node_dir(node.node_id)
        (directory / "data").mkdir(parents=True, exist_ok=True)
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            **self._listeners(node),
            "log.dirs": str(directory / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": str(replication),
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.replication.factor": str(replication),
            "transaction.state.log.min.isr": str(min_isr),
            "transaction.state.log.num.partitions": "10",
            "share.coordinator.state.topic.replication.factor": str(replication),
            "share.coordinator.state.topic.min.isr": str(min_isr),
            "default.replication.factor": str(replication),
            "min.insync.replicas": str(min_isr),
            "unclean.leader.election.enable": "false",
            "group.initial.rebalance.delay.ms": "0",
            # A dead broker is fenced, and its partitions move, within seconds (default 9 s).
            "broker.heartbeat.interval.ms": "500",
            "broker.session.timeout.ms": "3000",
            "log.flush.interval.messages": str(2**62),
        }
        if self.security is not None:
            settings.update(self.security.broker_settings())
        config = directory / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        if self.security is not None:
            config.chmod(0o600)
        return config

    def _listeners(self, node: NodeInfo) -> dict[str, str]:
        """A client listener (PLAINTEXT, or SASL_PLAINTEXT or SASL_SSL when secured) that
        brokers also use between themselves, and the controller listener."""
        client = "PLAINTEXT" if self.security is None else self.security.protocol
        return {
            "listeners": f"{client}://127.0.0.1:{node.port},"
                         f"CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"{client}://127.0.0.1:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": client,
            "listener.security.protocol.map": f"{client}:{client},CONTROLLER:{client}",
        }

    def _format(self, java: str, classpath: str, cluster_id: str, config: Path) -> None:
        result = subprocess.run(
            [java, "-cp", classpath, f"-Dlog4j2.configurationFile={self.root}/log4j2.properties",
             "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)],
            capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BrokerStartError(f"Formatting KRaft storage failed ({config}):\n"
                                   f"{(result.stdout + result.stderr).strip()[-2000:]}")

    def _launch(self, java: str, classpath: str, log4j: Path, node: NodeInfo,
                config: Path) -> NodeInfo:
        log_path = self.node_dir(node.node_id) / "broker.log"
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [java, f"-Xmx{self.heap}", f"-Xms{self.heap}", "-XX:+UseG1GC",
                 "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j}",
                 f"-Dkafka.logs.dir={self.node_dir(node.node_id)}",
                 "-cp", classpath, "kafka.Kafka", str(config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        return NodeInfo(node.node_id, node.port, node.controller_port, process.pid)

    def _wait_ready(self, state: ClusterState, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        config: dict[str, Any] = {**state.client_config(),
                                  "socket.connection.setup.timeout.ms": 2000, "logger": _QUIET}
        admin = AdminClient(config)
        deadline = time.monotonic() + timeout
        while True:
            dead = [n for n in state.nodes if n.pid is None or not pid_exists(n.pid)]
            if dead:
                tail = log_tail(self.node_dir(dead[0].node_id) / "broker.log")
                raise BrokerStartError(f"Kafka node {dead[0].node_id} exited during start-up:\n{tail}")
            try:
                if not all(_accepts(node.port) for node in state.nodes):
                    raise ConnectionRefusedError
                metadata = admin.list_topics(timeout=2)
                if len(metadata.brokers) == len(state.nodes):
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise BrokerStartError(f"Kafka did not become ready within {timeout:.0f}s; "
                                       f"see {self.root}/node-*/broker.log")
            time.sleep(0.25)

    # -- stop / faults -----------------------------------------------------------------------
    def stop(self, timeout: float = 20.0) -> int:
        """Stop every node this launcher started; returns how many were running."""
        pids = [node.pid for node in self.running_nodes() if node.pid is not None]
        terminate(pids, str(self.root), timeout)
        return len(pids)

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node (a broker failure); ``restart_node`` brings it back."""
        for node in self.running_nodes():
            if node.node_id == node_id and node.pid is not None:
                send(node.pid, signal.SIGKILL)
                reap(node.pid)

    def restart_node(self, node_id: int) -> None:
        state = self.state()
        if state is None:
            raise BrokerStartError("no cluster state to restart a node from")
        classpath = os.pathsep.join(str(jar) for jar in jars.resolve(jars.kafka_broker(), None))
        node = next(n for n in state.nodes if n.node_id == node_id)
        restarted = self._launch(jars.require_java(), classpath, self.root / "log4j2.properties",
                                 node, self.node_dir(node_id) / "server.properties")
        nodes = tuple(restarted if n.node_id == node_id else n for n in state.nodes)
        self._write_state(ClusterState(state.cluster_id, nodes, state.security))


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False

