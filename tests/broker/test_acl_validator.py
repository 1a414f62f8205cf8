"""ksqlDB's topic access validator on the broker's own ACLs: a node that authenticates its users,
over a Kafka with an authorizer, checks each statement for the sender's principal
(``User:<name>``) against the ACLs it reads with DescribeAcls. A read-only user reads but
creates nothing, a user denied WRITE on a topic cannot CSAS into it (40301, nothing written),
and a grant made while the node runs is honoured."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from metastore.server.acl_validator import AccessValidatorError, AccessValidatorSettings
from metastore.server.node import Node, NodeConfig
from tests.broker.conftest import SecuredKafka
from tests.broker.test_acls import LITERAL, PREFIXED, Grant, Op, bindings, node_grants
from tests.support.servers import start_server

USERS = {"writer": "w", "reader": "r", "stranger": "s"}


def user_acl(user: str, name: str, operation: AclOperation, pattern: ResourcePatternType,
             allow: bool = True) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, f"User:{user}", "*", operation,
                      AclPermissionType.ALLOW if allow else AclPermissionType.DENY)


@pytest.fixture
def nodes_read_acls(secured_kafka: SecuredKafka) -> Iterator[None]:
    """DESCRIBE on the cluster for the node principal (DescribeAcls), while the test runs:
    the worker's other tests' nodes must not have it."""
    granted = bindings([Grant(ResourceType.BROKER, LITERAL, "kafka-cluster", (Op.DESCRIBE,))],
                       secured_kafka.node_user.principal)
    secured_kafka.create_acls(granted)
    yield
    secured_kafka.delete_acls(granted)


@pytest.mark.usefixtures("nodes_read_acls")
def test_each_statement_is_checked_for_its_users_principal_against_the_brokers_acls(
        secured_kafka: SecuredKafka, tmp_path: Path) -> None:
    service_id = f"acv{uuid.uuid4().hex[:8]}"
    prefix = f"{service_id}."
    orders, locked, copy = f"{prefix}orders", f"{prefix}locked", f"{prefix}copy"
    node_principal = secured_kafka.node_user.principal
    node_acls = bindings([
        *node_grants(service_id, prefix),
        Grant(ResourceType.TOPIC, PREFIXED, prefix, (Op.READ, Op.WRITE)),
    ], node_principal)
    secured_kafka.create_acls([
        *node_acls,
        user_acl("writer", prefix, Op.ALL, PREFIXED),
        user_acl("writer", locked, Op.WRITE, LITERAL, allow=False),
        user_acl("reader", prefix, Op.READ, PREFIXED),
    ])
    admin = secured_kafka.admin_client()  # referenced until its future is done
    for future in admin.create_topics([NewTopic(locked, 1, 1)]).values():
        future.result()
    mark = secured_kafka.log_mark()
    server = _server(secured_kafka, service_id, tmp_path)
    try:
        def ksql(user: str, text: str) -> tuple[int, Any]:
            response = httpx.post(f"{server.url}/ksql", json={"ksql": text}, timeout=60,
                                  auth=(user, USERS[user]))
            return response.status_code, response.json()

        def print_topic(user: str) -> httpx.Response:
            return httpx.post(f"{server.url}/query", auth=(user, USERS[user]), timeout=60,
                              json={"ksql": f"PRINT '{orders}' FROM BEGINNING LIMIT 1;"})

        assert ksql("writer", f"CREATE STREAM ORDERS (ID INT KEY, V INT) WITH (KAFKA_TOPIC="
                              f"'{orders}', PARTITIONS=1, VALUE_FORMAT='JSON');")[0] == 200
        assert ksql("writer", "INSERT INTO ORDERS (ID, V) VALUES (1, 2);")[0] == 200
        for user, text, operation, topic in (
                ("reader", f"CREATE STREAM COPY WITH (KAFKA_TOPIC='{copy}') AS SELECT * FROM "
                           "ORDERS;", "Create", copy),
                ("reader", "INSERT INTO ORDERS (ID, V) VALUES (3, 4);", "Write", orders),
                ("writer", f"CREATE STREAM LOCKED WITH (KAFKA_TOPIC='{locked}') AS SELECT * "
                           "FROM ORDERS;", "Write", locked),
                ("stranger", f"CREATE STREAM AGAIN (ID INT KEY) WITH (KAFKA_TOPIC='{orders}', "
                             "VALUE_FORMAT='JSON');", "Read", orders)):
            status, body = ksql(user, text)
            assert (status, body["error_code"], body["message"]) == (
                403, 40301, f"Authorization denied to {operation} on topic(s): [{topic}]"), text
        status, listed = ksql("reader", "SHOW STREAMS;")
        assert status == 200
        assert [s["name"] for s in listed[0]["streams"]] == ["ORDERS"], "nothing else written"

        read = print_topic("reader")
        assert read.status_code == 200 and '"V":2' in read.text.replace(" ", ""), read.text
        refused = print_topic("stranger")
        assert (refused.status_code, refused.json()["error_code"]) == (403, 40301)
        secured_kafka.create_acls([user_acl("stranger", orders, Op.READ, LITERAL)])
        assert print_topic("stranger").status_code == 200, "a grant counts at once (expiry 0)"
    finally:
        assert server.stop() == 0, server.output()
    denied = [line for line in secured_kafka.denials_since(mark)
              if secured_kafka.node_user.name in line and service_id in line]
    assert denied == [], "\n".join(denied)


def _server(kafka: SecuredKafka, service_id: str, tmp_path: Path) -> Any:
    config = tmp_path / "node.toml"
    config.write_text("[kafka]\n" + "".join(
        f'"{key}" = "{value}"\n' for key, value in kafka.node_config.items()))
    users = tmp_path / "users"
    users.write_text("".join(f"{user}:{password}\n" for user, password in USERS.items()))
    return start_server(kafka.bootstrap_servers, tmp_path, service_id, "node-1",
                        "--spark-master", "none", "--data-dir", str(tmp_path / "data"),
                        "--config", str(config), "--auth-file", str(users),
                        "--ksql-property", "ksql.authorization.cache.expiry.time.secs=0")


def test_a_node_that_may_not_read_the_acls_does_not_start_unchecked(
        secured_kafka: SecuredKafka) -> None:
    service_id = f"acv{uuid.uuid4().hex[:8]}"
    secured_kafka.create_acls(bindings(node_grants(service_id, f"{service_id}."),
                                       secured_kafka.node_user.principal))
    node = Node(NodeConfig(service_id=service_id, bootstrap_servers=secured_kafka.bootstrap_servers,
                           kafka_client=secured_kafka.node_config,
                           access_validator=AccessValidatorSettings("auto")))
    try:
        with pytest.raises(AccessValidatorError, match="grant its principal DESCRIBE on the "
                                                       "cluster, or set it to off"):
            node.start()
    finally:
        node.stop()
