"""The ACLs of docs/kafka-acls.md are enough for a node, and nothing outside them is allowed.

A secured broker (SASL/PLAIN over TLS, StandardAuthorizer, deny when no ACL matches) grants the
node user exactly the documented ACLs. Nodes logging in as that user start (creating the command topic),
write (creating and deleting data topics), replay and bootstrap from a snapshot, heartbeat, and
the broker's authorizer log shows that nothing they did was denied. Outside the grants the same
user is refused promptly, with an authorization error.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from metastore.cluster.membership import Membership
from metastore.core.exceptions import MetastoreError
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from metastore.server.node import Node, NodeConfig
from tests.broker.conftest import SecuredKafka
from tests.support.servers import start_server
from tests.support.waiting import eventually

Op = AclOperation
PREFIXED, LITERAL = ResourcePatternType.PREFIXED, ResourcePatternType.LITERAL
DENIED = r"(?i)authorization failed"


@dataclass(frozen=True)
class Grant:
    """One row of the table in docs/kafka-acls.md."""

    resource: ResourceType
    pattern: ResourcePatternType
    name: str
    operations: tuple[AclOperation, ...]


def node_grants(service_id: str, data_prefix: str) -> list[Grant]:
    """The documented ACLs of a node principal of ``service_id`` (nodes without Spark)."""
    return [
        Grant(ResourceType.TOPIC, PREFIXED, f"_metastore-{service_id}-",
              (Op.CREATE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.READ, Op.WRITE)),
        Grant(ResourceType.TRANSACTIONAL_ID, LITERAL, service_id, (Op.DESCRIBE, Op.WRITE)),
        Grant(ResourceType.GROUP, PREFIXED, f"{service_id}-", (Op.DESCRIBE,)),
        Grant(ResourceType.GROUP, PREFIXED, f"_metastore-{service_id}-", (Op.DESCRIBE,)),
        Grant(ResourceType.TOPIC, PREFIXED, data_prefix, (Op.CREATE, Op.DESCRIBE, Op.DELETE)),
    ]


def bindings(grants: list[Grant], principal: str) -> list[AclBinding]:
    return [AclBinding(grant.resource, grant.name, grant.pattern, principal, "*", operation,
                       AclPermissionType.ALLOW)
            for grant in grants for operation in grant.operations]


@dataclass(frozen=True)
class Service:
    """A service id whose node principal holds the documented ACLs, and its data prefix."""

    service_id: str
    data_prefix: str
    kafka: SecuredKafka


@pytest.fixture
def service(secured_kafka: SecuredKafka) -> Service:
    service_id = f"acl{uuid.uuid4().hex[:8]}"
    data_prefix = f"{service_id}."
    grants = node_grants(service_id, data_prefix)
    secured_kafka.create_acls(bindings(grants, secured_kafka.node_user.principal))
    return Service(service_id, data_prefix, secured_kafka)


@pytest.fixture
def secured_node(service: Service, tmp_path: Path) -> Iterator[Callable[..., Node]]:
    """Started nodes of the service, logged in as the node user: ``secured_node("node-1")``."""
    created: list[Node] = []

    def create(node_id: str, service_id: str | None = None, ready: bool = True) -> Node:
        node = Node(NodeConfig(
            service_id=service_id or service.service_id,
            bootstrap_servers=service.kafka.bootstrap_servers, node_id=node_id,
            kafka_client=service.kafka.node_config, data_dir=tmp_path / node_id))
        created.append(node)
        node.start()
        if ready:
            assert node.replica.wait_ready(30), f"{node_id} did not become READY"
        return node

    yield create
    for node in created:
        node.stop()


@pytest.fixture
def heartbeats(service: Service) -> Iterator[Callable[[Node], Membership]]:
    """Membership (what ``metastore server`` runs beside a node), heartbeating every 0.5 s."""
    started: list[Membership] = []

    def create(node: Node) -> Membership:
        membership = Membership(
            node.settings, node.admin, service.service_id, node.config.node_id,
            f"http://{node.config.node_id}", lambda: (node.state.value, node.replica.position - 1),
            interval=0.5)
        membership.start()
        started.append(membership)
        return membership

    yield create
    for membership in started:
        membership.stop()


def admin_of(kafka: SecuredKafka) -> Admin:
    return Admin(KafkaSettings(kafka.bootstrap_servers,
                               kafka.security.client_config(kafka.security.admin)))


def status(entities: list[dict[str, object]]) -> list[object]:
    commands = [entity.get("commandStatus") for entity in entities]
    return [command.get("status") if isinstance(command, dict) else None for command in commands]


def caught_up(*nodes: Node) -> bool:
    positions = {node.replica.position for node in nodes}
    return len(positions) == 1 and positions == {nodes[0].end_offset()}


def test_nodes_work_with_only_the_documented_acls(
        service: Service, secured_node: Callable[..., Node],
        heartbeats: Callable[[Node], Membership]) -> None:
    kafka, admin = service.kafka, admin_of(service.kafka)
    command_topic = f"_metastore-{service.service_id}-command-log"
    log_mark = kafka.log_mark()
    assert admin.describe(command_topic) is None

    first = secured_node("node-1")
    assert admin.describe(command_topic) is not None
    stream_topic = f"{service.data_prefix}pageviews"
    assert status(first.execute(
        f"CREATE STREAM pageviews (id INT KEY, url STRING) WITH (KAFKA_TOPIC='{stream_topic}', "
        "VALUE_FORMAT='JSON', PARTITIONS=2);")) == ["SUCCESS"]
    described = admin.describe(stream_topic)
    assert described is not None and described.partitions == 2
    assert status(first.execute(
        f"CREATE TABLE views_by_id (id INT PRIMARY KEY, url STRING) WITH "
        f"(KAFKA_TOPIC='{stream_topic}', VALUE_FORMAT='JSON');")) == ["SUCCESS"]

    second = secured_node("node-2")  # no snapshot yet: it replays the log
    assert second.status()["startup"]["resumedFrom"] is None
    assert second.replica.image.source("PAGEVIEWS") is not None
    assert second.replica.image.fingerprint == first.replica.image.fingerprint
    members = [heartbeats(first), heartbeats(second)]
    assert status(second.execute("DROP TABLE views_by_id;")) == ["SUCCESS"]
    assert status(second.execute("DROP STREAM pageviews DELETE TOPIC;")) == ["SUCCESS"]
    eventually(lambda: admin.describe(stream_topic) is None, 10, "the topic to be deleted",
               interval=0.1)
    eventually(lambda: caught_up(first, second), 10, "both nodes to reach the log's end",
               interval=0.1)
    assert first.replica.image.fingerprint == second.replica.image.fingerprint
    eventually(lambda: {beat.node_id for beat, alive in members[0].nodes() if alive}
               == {"node-1", "node-2"}, 10, "the nodes to see each other's heartbeats",
               interval=0.1)

    first.stop()  # a clean stop publishes a snapshot
    third = secured_node("node-3")
    assert (third.status()["startup"]["resumedFrom"] or "").startswith("snapshot")
    assert third.replica.image.fingerprint == second.replica.image.fingerprint
    denied = [line for line in kafka.denials_since(log_mark)
              if kafka.node_user.name in line and not names_another_tests_resource(line, service)]
    assert denied == [], "\n".join(denied)


def test_the_node_principal_is_refused_outside_its_grants(
        service: Service, secured_node: Callable[..., Node]) -> None:
    kafka = service.kafka
    outside = f"outside-{uuid.uuid4().hex[:8]}"
    admin = kafka.admin_client()
    for future in admin.create_topics([NewTopic(outside, 1, 1)]).values():
        future.result(10)
    node = secured_node("node-1")
    end = node.end_offset()
    statements = [
        f"CREATE STREAM outside (id INT KEY) WITH (KAFKA_TOPIC='{outside}', VALUE_FORMAT='JSON');",
        f"CREATE STREAM fresh (id INT KEY) WITH (KAFKA_TOPIC='{outside}-new', "
        "VALUE_FORMAT='JSON', PARTITIONS=1);",
    ]
    for statement in statements:
        started = time.monotonic()
        with pytest.raises(MetastoreError, match=DENIED):
            node.execute(statement)
        assert time.monotonic() - started < 10, "refused only after retrying"
    assert node.end_offset() == end
    assert dict(node.replica.image.sources) == {}
    assert admin_of(kafka).describe(f"{outside}-new") is None

    assert produce_error(kafka, outside) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert subscribe_error(kafka, outside, f"{service.service_id}-outside") == \
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    started = time.monotonic()
    with pytest.raises(MetastoreError, match=DENIED):
        secured_node("stranger", service_id=f"{service.service_id}x", ready=False)
    assert time.monotonic() - started < 10


def test_a_node_without_describe_configs_fails_to_start_at_once(
        secured_kafka: SecuredKafka) -> None:
    """Without DescribeConfigs on its topics a node cannot check the command log's shape: it
    says so at once instead of retrying for 30 s as for a topic the broker has not heard of."""
    service_id = f"acl{uuid.uuid4().hex[:8]}"
    own = f"_metastore-{service_id}-"
    grants = [replace(g, operations=tuple(o for o in g.operations if o is not Op.DESCRIBE_CONFIGS))
              if g.name == own else g for g in node_grants(service_id, f"{service_id}.")]
    secured_kafka.create_acls(bindings(grants, secured_kafka.node_user.principal))
    node = Node(NodeConfig(service_id=service_id, bootstrap_servers=secured_kafka.bootstrap_servers,
                           kafka_client=secured_kafka.node_config))
    started = time.monotonic()
    try:
        with pytest.raises(MetastoreError, match=DENIED):
            node.start()
        assert time.monotonic() - started < 10
    finally:
        node.stop()


def test_a_server_logs_in_with_the_settings_of_its_config_file(service: Service,
                                                                 tmp_path: Path) -> None:
    kafka = service.kafka
    log_mark = kafka.log_mark()
    config = tmp_path / "node.toml"
    config.write_text("[kafka]\n" + "".join(
        f'"{key}" = "{value}"\n' for key, value in kafka.node_config.items()))
    server = start_server(kafka.bootstrap_servers, tmp_path, service.service_id, "node-1",
                          "--spark-master", "none", "--data-dir", str(tmp_path / "data"),
                          "--config", str(config))
    try:
        response = httpx.post(f"{server.url}/ksql", timeout=30, json={"ksql": (
            f"CREATE STREAM clicks (id INT KEY) WITH (KAFKA_TOPIC='{service.data_prefix}clicks', "
            "VALUE_FORMAT='JSON', PARTITIONS=1);")})
        assert response.status_code == 200, response.text
        eventually(lambda: heartbeat_seen(server.url), 10, "a heartbeat of node-1", interval=0.1)
    finally:
        assert server.stop() == 0, server.output()
    denied = [line for line in kafka.denials_since(log_mark)
              if kafka.node_user.name in line and not names_another_tests_resource(line, service)]
    assert denied == [], "\n".join(denied)


def names_another_tests_resource(denial: str, service: Service) -> bool:
    """Whether an authorizer line names a resource another test of this module made: its
    ``outside-`` topic, or a resource of another service id (a ``stranger`` is this service id
    and ``x``). Their clients' metadata refreshes may still be denied after they end."""
    named = re.search(r"on resource = \w+:\w+:(\S+)", denial)
    if named is None:
        return False
    name = named.group(1)
    ids = set(re.findall(r"acl[0-9a-f]{8}x?", name))
    return name.startswith("outside-") or bool(ids - {service.service_id})


def heartbeat_seen(url: str) -> bool:
    hosts = httpx.get(f"{url}/clusterStatus", timeout=5).json()["clusterStatus"]
    return any(host["nodeId"] == "node-1" and host["lastStatusUpdateMs"] > 0 and
               host["state"] == "READY" for host in hosts.values())


def produce_error(kafka: SecuredKafka, topic: str) -> int | None:
    """The error code of producing one record to ``topic`` as the node user."""
    producer = Producer(kafka.state.client_config(kafka.node_user))
    errors: list[KafkaError] = []
    producer.produce(topic, b"denied", on_delivery=lambda error, _message: errors.append(error))
    producer.flush(15)
    return errors[0].code() if errors and errors[0] is not None else None


def subscribe_error(kafka: SecuredKafka, topic: str, group: str) -> int:
    """The first topic error a consumer of ``topic``, logged in as the node user, reports."""
    consumer = Consumer({**kafka.state.client_config(kafka.node_user), "group.id": group})
    consumer.subscribe([topic])

    def topic_error() -> int | None:
        message = consumer.poll(0.5)
        error = message.error() if message is not None else None
        if error is not None and error.code() != KafkaError.GROUP_AUTHORIZATION_FAILED:
            return int(error.code())
        return None

    try:
        return eventually(topic_error, 10, f"an error consuming {topic}", interval=0)
    finally:
        consumer.close()
