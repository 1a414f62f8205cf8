"""The secured local deployment of ``metastore dev up --secure``: Kafka over SASL_SSL with ACLs,
nodes serving HTTPS that authenticate their users and check each statement against those ACLs.

Under ``<dev dir>/secure`` (readable by the user only):
- ``tls/``: one local CA (``ca.pem``), the brokers' and the nodes' certificates it signs;
- ``users``: the REST users, ``admin`` (every topic) and ``reader`` (reads every topic, creates
  and writes nothing), with generated passwords;
- ``node.toml``: the nodes' settings (``metastore server --config``): the node principal's SASL
  login, the REST TLS, the users file and ``ksql.access.validator.enable=on``;
- ``env.sh``: what a shell needs to use the cluster (the CLI's CA and user, the Kafka login).

Kafka's principals: ``User:admin``, the broker's super user (and the REST admin's principal,
which the ACLs also give every topic, since the node cannot see ``super.users``);
``User:metastore``, the nodes, with every topic, group and transactional id of this development
cluster and DESCRIBE on the cluster (to read the ACLs); ``User:reader``, READ on every topic.
The admin also holds ALL on the cluster, which connector statements need.
Running it again reuses the passwords and certificates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

from metastore.dev.kafka_cluster import (
    ClusterState,
    LocalKafkaCluster,
    Security,
    new_password,
    plain_login,
)
from metastore.dev.paths import dev_dir

REST_USERS = ("admin", "reader")
NODE_PRINCIPAL = "metastore"


def secure_root() -> Path:
    return dev_dir() / "secure"


def secure_kafka() -> LocalKafkaCluster:
    """The secured local Kafka (its own directory: the plain one is left as it is), with the
    users and CA it was started with, if ever."""
    root = secure_root() / "kafka"
    state = LocalKafkaCluster(root).state()
    return LocalKafkaCluster(root, security=None if state is None else state.security)


@dataclass(frozen=True)
class SecureDeployment:
    """A running secured Kafka and the files the nodes and their users read."""

    root: Path
    kafka: ClusterState
    passwords: dict[str, str]

    @property
    def security(self) -> Security:
        assert self.kafka.security is not None and self.kafka.security.tls is not None
        return self.kafka.security

    @property
    def ca(self) -> str:
        assert self.security.tls is not None
        return self.security.tls.ca

    @property
    def node_config(self) -> Path:
        return self.root / "node.toml"

    def node_args(self) -> tuple[str, ...]:
        """The server arguments of a secured node (its secrets stay in the config file)."""
        return ("--config", str(self.node_config))

    def kafka_config(self) -> dict[str, str]:
        """The Kafka admin's client settings (bootstrap servers, SASL_SSL, the CA)."""
        return self.kafka.client_config()

    def cli_environment(self, user: str = "admin") -> dict[str, str]:
        """The environment a ``metastore`` command needs to reach the nodes as ``user``."""
        return cli_environment(self.ca, user, self.passwords[user])


def cli_environment(ca: str, user: str, password: str) -> dict[str, str]:
    """The environment a ``metastore`` command needs to reach HTTPS nodes of CA ``ca`` as
    ``user``."""
    return {"METASTORE_CA_CERT": ca, "METASTORE_USER": f"{user}:{password}"}


def users_text(passwords: Mapping[str, str]) -> str:
    """The REST users file (``--auth-file``) of :data:`REST_USERS`."""
    return "".join(f"{user}:{passwords[user]}\n" for user in REST_USERS)





def start_secure(progress: TextIO | None) -> SecureDeployment:
    """Start (or reuse) the secured Kafka, grant the ACLs, and write the nodes' and users'
    files."""
    root = secure_root()
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    cluster = secure_kafka()
    if cluster.security is None or cluster.security.tls is None:
        cluster = LocalKafkaCluster(cluster.root, security=Security.generate(
            admin="admin", node=NODE_PRINCIPAL, tls=root / "tls"))
    state = cluster.start(progress)
    deployment = SecureDeployment(root, state, _passwords(root / "passwords.json"))
    _grant(deployment)
    _write_files(deployment)
    return deployment


def _passwords(path: Path) -> dict[str, str]:
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    passwords = {user: str(known.get(user) or new_password()) for user in REST_USERS}
    write_private(path, json.dumps(passwords))
    return passwords


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable by the user only."""
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(text)


@dataclass(frozen=True)
class AclGrant:
    """One ALLOW binding of the module docstring, for every host, by the names Kafka's tools
    use: ``resource`` TOPIC, GROUP, TRANSACTIONAL_ID or CLUSTER; ``operation`` ALL, READ, ..."""

    resource: str
    name: str
    principal: str
    operation: str

    def binding(self) -> AclBinding:
        resource = ResourceType.BROKER if self.resource == "CLUSTER" else ResourceType[
            self.resource]
        return AclBinding(resource, self.name, ResourcePatternType.LITERAL, self.principal, "*",
                          AclOperation[self.operation], AclPermissionType.ALLOW)

    def command(self, bootstrap: str, command_config: str) -> str:
        """The ``kafka-acls.sh`` line that creates it."""
        target = ("--cluster" if self.resource == "CLUSTER" else
                  f"--{self.resource.lower().replace('_', '-')} '{self.name}'")
        operation = "".join(word.capitalize() for word in self.operation.split("_"))
        return (f"kafka-acls.sh --bootstrap-server {bootstrap} --command-config {command_config} "
                f"--add --allow-principal {self.principal} --operation {operation} {target}")


def grants() -> list[AclGrant]:
    node = f"User:{NODE_PRINCIPAL}"
    return [
        *(AclGrant(resource, "*", node, "ALL")
          for resource in ("TOPIC", "GROUP", "TRANSACTIONAL_ID")),
        *(AclGrant("CLUSTER", "kafka-cluster", node, operation)
          for operation in ("DESCRIBE", "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE")),
        AclGrant("TOPIC", "*", "User:admin", "ALL"),
        AclGrant("CLUSTER", "kafka-cluster", "User:admin", "ALL"),  # connectors
        AclGrant("TOPIC", "*", "User:reader", "READ"),
    ]


def _grant(deployment: SecureDeployment) -> None:
    """The ACLs, created as the Kafka admin (creating one twice is harmless)."""
    config: dict[str, str | int | float | bool] = {**deployment.kafka_config()}
    admin = AdminClient(config)
    bindings = [grant.binding() for grant in grants()]
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result()


def node_config(users_file: str, kafka: Mapping[str, str], ca: str, key_store: str) -> str:
    """A secured node's config file (``metastore server --config``): its Kafka login, its users,
    HTTPS from ``key_store`` (key and chain, PEM) trusting ``ca``, and the ACL validator."""
    properties = {"ssl.keystore.location": key_store, "ssl.keystore.type": "PEM",
                  "ssl.truststore.location": ca, "ssl.truststore.type": "PEM",
                  "ksql.access.validator.enable": "on"}
    return "\n".join([
        f"auth_file = {json.dumps(users_file)}", "", "[kafka]",
        *(f"{json.dumps(key)} = {json.dumps(value)}" for key, value in kafka.items()), "",
        "[ksql_properties]",
        *(f"{json.dumps(key)} = {json.dumps(value)}" for key, value in properties.items()),
        ""])


def java_client_properties(user: str, password: str, ca: str) -> dict[str, str]:
    """A Java Kafka client's login (Kafka's tools, Connect) over SASL_SSL as ``user``."""
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": plain_login(user, password),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": ca}


def properties_text(properties: Mapping[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in properties.items())


def _write_files(deployment: SecureDeployment) -> None:
    root, security = deployment.root, deployment.security
    tls = security.tls
    assert tls is not None
    node_pem = tls.issue_server("metastore-node", root / "tls" / "node.pem")
    users = root / "users"
    write_private(users, users_text(deployment.passwords))
    write_private(deployment.node_config, node_config(
        str(users), security.client_config(security.node), tls.ca, str(node_pem)))
    write_private(root / "admin.properties", properties_text(
        java_client_properties("admin", security.admin.password, tls.ca)))
    write_private(root / "env.sh", "".join(
        f"export {name}={json.dumps(value)}\n"
        for name, value in deployment.cli_environment("admin").items()) + (
        f"# the read-only user: METASTORE_USER=reader:{deployment.passwords['reader']}\n"
        f"# Kafka at {deployment.kafka.bootstrap_servers} (SASL_SSL), as its admin: "
        f"--command-config {root / 'admin.properties'} for Kafka's tools; for metastore's "
        "(log, test): export METASTORE_KAFKA=\"" + " ".join(
            f"{key}={value}" for key, value in security.client_config(security.admin).items()
            if key != "bootstrap.servers") + "\"\n"))

__all__ = [
    "AclGrant",
    "SecureDeployment",
    "cli_environment",
    "grants",
    "java_client_properties",
    "node_config",
    "properties_text",
    "secure_kafka",
    "secure_root",
    "start_secure",
    "users_text",
    "write_private",
]
