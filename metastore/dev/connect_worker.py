"""A local Kafka Connect worker on 127.0.0.1: Apache Kafka's own, in distributed mode.

The worker runs from the jars of Kafka's ``connect-runtime`` of the broker's version (with Kafka's
FileStream connectors and JSON converter on its class path), which Maven resolves from Maven
Central into the jar cache once (``poms/connect.xml``). Plugins that need a class loader of their
own are resolved into plugin directories under ``<cache>/jars/connect-plugins/``, the worker's
``plugin.path``: Debezium's PostgreSQL source connector (``poms/debezium-postgres.xml``) and
Apicurio Registry's converters (``poms/apicurio-converters.xml``), which read and write the
registry formats through the local Schema Registry.

:class:`LocalConnect` starts one worker under a root, with its properties in
``connect-worker.properties``, its port and pid in ``connect.json`` and its log in
``connect.log``. Its configs, offsets and statuses are in three compacted topics named after its
group (``<group>-configs``, ``-offsets``, ``-status``), so a worker started again under the same
root with the same group finds its connectors again. Readiness is Connect's own answer: ``GET
/connectors`` gives a JSON list once the worker has joined its group.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from metastore.dev import jars
from metastore.dev.exceptions import LocalInfraError
from metastore.dev.kafka_cluster import free_ports
from metastore.dev.local_service import LocalService, ServiceState, answers_with_list, say
from metastore.dev.paths import jar_dir

HEAP = "-Xmx384m"
PLUGINS = "connect-plugins"
"""The directory of the jar cache that is the worker's ``plugin.path``."""
MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectDistributed"
DEFAULT_GROUP = "metastore-connect"


class ConnectStartError(LocalInfraError):
    """The local Kafka Connect worker did not start, or not in time."""

    code = "connect_start"


def worker_jars() -> jars.JarSet:
    return jars.JarSet(name="connect", pom="connect.xml")


def debezium_postgres() -> jars.JarSet:
    return jars.JarSet(name=f"{PLUGINS}/debezium-postgres", pom="debezium-postgres.xml")


def apicurio_converters() -> jars.JarSet:
    return jars.JarSet(name=f"{PLUGINS}/apicurio-converters", pom="apicurio-converters.xml")


PLUGIN_SETS = (debezium_postgres, apicurio_converters)
"""The plugins every local worker has, each in a directory of its own."""


def resolve(progress: TextIO | None = sys.stderr) -> list[Path]:
    """The worker's class path, with every plugin of :data:`PLUGIN_SETS` resolved beside it
    (each downloaded the first time)."""
    for plugin in PLUGIN_SETS:
        jars.resolve(plugin(), progress)
    return jars.resolve(worker_jars(), progress)


def worker_properties(bootstrap: str, port: int, group: str) -> dict[str, str]:
    """A distributed worker's settings on ``bootstrap``, listening on ``port``, in ``group``."""
    topics = {kind: f"{group}-{kind}" for kind in ("configs", "offsets", "status")}
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(port),
        "config.storage.topic": topics["configs"],
        "offset.storage.topic": topics["offsets"],
        "status.storage.topic": topics["status"],
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.storage.partitions": "1",
        "status.storage.partitions": "1",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        "offset.flush.interval.ms": "1000",
        "plugin.path": str(jar_dir(PLUGINS)),
        "plugin.discovery": "only_scan",
    }


def properties_text(settings: dict[str, str]) -> str:
    """``settings`` as a Java properties file (backslashes and separators escaped)."""
    def escaped(text: str) -> str:
        return (text.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=")
                .replace(":", "\\:"))

    return "".join(f"{escaped(key)}={escaped(value)}\n" for key, value in settings.items())


class ConnectState(ServiceState):
    """The worker's REST API is its base URL."""


class LocalConnect(LocalService[ConnectState]):
    """One Kafka Connect worker process under ``root``, in ``group``."""

    title = "Kafka Connect worker"
    file_stem = "connect"
    start_error = ConnectStartError
    state_type = ConnectState

    def __init__(self, root: Path, group: str = DEFAULT_GROUP) -> None:
        super().__init__(root)
        self.group = group

    def start(self, bootstrap: str, progress: TextIO | None = sys.stderr,
              timeout: float = 120.0) -> ConnectState:
        """Start the worker on ``bootstrap`` (or return it when it runs) once it has joined its
        group and answers."""
        existing = self.state()
        if existing is not None and self.is_running():
            return existing
        self.stop()
        classpath = ":".join(str(jar) for jar in resolve(progress))
        java = jars.require_java()
        [port] = free_ports(1)
        self.root.mkdir(parents=True, exist_ok=True)
        settings = self.root / "connect-worker.properties"
        settings.write_text(properties_text(worker_properties(bootstrap, port, self.group)),
                            encoding="utf-8")
        say(progress, f"Starting a Kafka Connect worker on 127.0.0.1:{port} (group "
                      f"{self.group})...")
        command = [java, HEAP, f"-Dmetastore.local.root={self.root}", "-cp", classpath,
                   MAIN_CLASS, str(settings)]
        return self.launch(command, ConnectState(port), progress, timeout)

    def answers(self, state: ConnectState) -> bool:
        return answers(state.url)


def answers(url: str, timeout: float = 2.0) -> bool:
    """Whether a Connect worker answers at ``url`` with its connectors (a JSON list)."""
    return answers_with_list(f"{url.rstrip('/')}/connectors", timeout)


__all__ = ["ConnectStartError", "ConnectState", "LocalConnect", "answers", "resolve",
           "worker_properties"]
