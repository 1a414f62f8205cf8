"""A secured Kafka of its own: SASL/PLAIN over TLS (SASL_SSL, a CA of its own), the
StandardAuthorizer, nothing allowed without an ACL.

The launcher's secured mode (``metastore.dev.kafka_cluster.Security``) gives an admin super user
and a node user with no rights; tests grant the node user ACLs as the admin. Each test module
has its broker; each test names its own resources.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from confluent_kafka.admin import AclBinding, AclBindingFilter, AdminClient

from metastore.dev.kafka_cluster import ClusterState, LocalKafkaCluster, SaslUser, Security


@dataclass(frozen=True)
class SecuredKafka:
    cluster: LocalKafkaCluster
    state: ClusterState
    security: Security

    @property
    def bootstrap_servers(self) -> str:
        return self.state.bootstrap_servers

    @property
    def node_user(self) -> SaslUser:
        return self.security.node

    @property
    def node_config(self) -> dict[str, str]:
        """The node user's client settings (SASL_SSL, trusting the cluster's CA)."""
        return self.security.client_config(self.node_user)

    def admin_client(self) -> AdminClient:
        return AdminClient(self.state.client_config())

    def create_acls(self, bindings: list[AclBinding]) -> None:
        """Create ``bindings`` as the admin and wait until every one is in place."""
        admin = self.admin_client()  # referenced until every future is done
        for future in admin.create_acls(bindings, request_timeout=10).values():
            future.result()

    def delete_acls(self, bindings: list[AclBinding]) -> None:
        """Delete ``bindings`` as the admin: a grant of one test must not outlive it on the
        worker's shared broker."""
        admin = self.admin_client()
        filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal,
                                    b.host, b.operation, b.permission_type) for b in bindings]
        for future in admin.delete_acls(filters, request_timeout=10).values():
            future.result()

    @property
    def broker_log(self) -> Path:
        return self.cluster.node_dir(1) / "broker.log"

    def log_mark(self) -> LogMark:
        """Where the broker log ends now, and the time."""
        return LogMark(self.broker_log.stat().st_size, datetime.now())

    def denials_since(self, mark: LogMark) -> list[str]:
        """The authorizer's "Denied" lines logged since ``mark``: past its byte offset and
        stamped at or after its time (the logger writes behind, so an earlier test's lines can
        land past the offset)."""
        with self.broker_log.open("rb") as log:
            log.seek(mark.offset)
            text = log.read().decode(errors="replace")
        return [line for line in text.splitlines()
                if " is Denied operation " in line and _stamped(line, mark.at)]


@dataclass(frozen=True)
class LogMark:
    offset: int
    at: datetime


def _stamped(line: str, since: datetime) -> bool:
    """Whether a log4j line (``[2026-11-25 15:45:58,528] ...``) was logged at or after
    ``since``; a line without that stamp counts."""
    try:
        return datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f") >= since
    except ValueError:
        return True


@pytest.fixture(scope="module")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    """A 1-broker SASL_SSL cluster for one test module, stopped afterwards (an idle broker JVM
    for the rest of the run would cost every other test)."""
    root = tmp_path_factory.mktemp("secured-kafka")
    security = Security.generate(admin="admin", node="metastore-node", tls=root / "tls")
    cluster = LocalKafkaCluster(root, security=security)
    state = cluster.start(progress=None)
    try:
        yield SecuredKafka(cluster, state, security)
    finally:
        cluster.stop()
