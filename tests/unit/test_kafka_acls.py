"""Kafka's ACL decisions as the node takes them for a user it has no Kafka credentials of
(:mod:`metastore.kafka.acls`), and the validator's settings and cache
(:mod:`metastore.server.acl_validator`)."""

from __future__ import annotations

import pytest

from metastore.catalog.exceptions import ConnectorAuthorizationError, TopicAuthorizationError
from metastore.core.exceptions import PropertyValueError
from metastore.engine.access import CONNECT, CREATE, READ, WRITE, Need
from metastore.kafka.acls import AclImage, AclRule
from metastore.kafka.exceptions import KafkaUnavailableError
from metastore.server.acl_validator import (
    AccessValidatorError,
    AccessValidatorSettings,
    KafkaAclValidator,
    start_validator,
)

ALICE = "User:alice"


def rule(operation: str, name: str = "orders", *, pattern: str = "LITERAL",
         principal: str = ALICE, host: str = "*", allow: bool = True,
         resource: str = "TOPIC") -> AclRule:
    return AclRule(resource, pattern, name, principal, host, operation, allow)


@pytest.mark.parametrize(("rules", "operation", "topic", "allowed"), [
    ((rule("READ"),), "READ", "orders", True),
    ((rule("READ"),), "WRITE", "orders", False),
    ((rule("READ"),), "READ", "orders2", False),
    ((rule("READ"),), "DESCRIBE", "orders", True),
    ((rule("ALL"),), "DELETE", "orders", True),
    ((rule("READ", "*"),), "READ", "anything", True),
    ((rule("WRITE", "ord", pattern="PREFIXED"),), "WRITE", "orders", True),
    ((rule("WRITE", "ord", pattern="PREFIXED"),), "WRITE", "xorders", False),
    ((rule("READ", principal="User:*"),), "READ", "orders", True),
    ((rule("READ", principal="User:bob"),), "READ", "orders", False),
    ((rule("READ", "*"), rule("READ", allow=False)), "READ", "orders", False),
    ((rule("ALL", "*"), rule("ALL", "ord", pattern="PREFIXED", allow=False)), "READ",
     "orders", False),
    ((rule("READ"), rule("DESCRIBE", allow=False)), "READ", "orders", True),
    ((rule("READ", host="10.0.0.1"),), "READ", "orders", False),
    ((rule("READ"), rule("READ", host="10.0.0.1", allow=False)), "READ", "orders", False),
    ((rule("CREATE", "kafka-cluster", resource="CLUSTER"),), "CREATE", "new", True),
    ((rule("CREATE", "kafka-cluster", resource="CLUSTER"),), "WRITE", "new", False),
    ((rule("CREATE", "ne", pattern="PREFIXED"),), "CREATE", "new", True),
    ((), "READ", "orders", False),
    ((rule("READ"), rule("READ", principal="User:*", allow=False)), "READ", "orders", False),
    ((rule("READ"), rule("ALL", "*", allow=False)), "READ", "orders", False),
    ((rule("READ", "kafka-cluster", resource="CLUSTER"),), "READ", "orders", False),
    ((rule("CREATE", "kafka-cluster"),), "CREATE", "new", False),
    ((rule("CREATE", "kafka-cluster", resource="CLUSTER"), rule("CREATE", "new", allow=False)),
     "CREATE", "new", True),
    ((rule("ALTER"),), "DESCRIBE", "orders", True),
])
def test_the_broker_decides_as_its_standard_authorizer(
        rules: tuple[AclRule, ...], operation: str, topic: str, allowed: bool) -> None:
    assert AclImage(rules).allows(ALICE, operation, topic) is allowed


def test_the_validator_refuses_what_the_acls_do_not_give_and_reads_them_again_when_stale(
        ) -> None:
    images = [AclImage((rule("READ"),)), AclImage((rule("READ"), rule("WRITE")))]
    reads: list[AclImage] = []
    now = [0.0]

    def read() -> AclImage:
        reads.append(images[len(reads)])
        return reads[-1]

    validator = KafkaAclValidator(read, expiry=30, clock=lambda: now[0])
    validator.check("alice", [Need(READ, "orders")])
    with pytest.raises(TopicAuthorizationError) as refused:
        validator.check("alice", [Need(READ, "orders"), Need(WRITE, "orders"),
                                  Need(CREATE, "orders")])
    assert str(refused.value) == "Authorization denied to Write on topic(s): [orders]"
    now[0] = 29.0
    with pytest.raises(TopicAuthorizationError):
        validator.check("alice", [Need(WRITE, "orders")])
    now[0] = 30.0
    validator.check("alice", [Need(WRITE, "orders")])
    assert len(reads) == 2
    with pytest.raises(TopicAuthorizationError, match=r"Read on topic\(s\): \[orders\]"):
        validator.check("bob", [Need(READ, "orders")])


def test_a_connector_needs_alter_on_the_cluster_it_acts_on_as_connect() -> None:
    validator = KafkaAclValidator(lambda: AclImage((rule("ALL", "*"),)), expiry=30)
    with pytest.raises(ConnectorAuthorizationError, match=r"connector\(s\): \[SINK\]"):
        validator.check("alice", [Need(CONNECT, "SINK")])
    cluster = rule("ALTER", "kafka-cluster", resource="CLUSTER")
    KafkaAclValidator(lambda: AclImage((cluster,)), expiry=30).check(
        "alice", [Need(CONNECT, "SINK")])


def test_a_failed_read_keeps_the_last_acls_and_an_on_node_without_an_authorizer_refuses(
        ) -> None:
    answers: list[AclImage | Exception | None] = [
        AclImage((rule("READ"),)), KafkaUnavailableError("down"), None]
    now = [0.0]

    def read() -> AclImage | None:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    validator = KafkaAclValidator(read, expiry=10, mode="on", clock=lambda: now[0])
    validator.check("alice", [Need(READ, "orders")])
    now[0] = 10.0
    validator.check("alice", [Need(READ, "orders")])  # the read fails: the last ACLs count
    now[0] = 15.0
    validator.check("alice", [Need(READ, "orders")])  # backed off: no read before 20 s
    now[0] = 20.0
    with pytest.raises(TopicAuthorizationError):
        validator.check("alice", [Need(READ, "orders")])
    assert answers == []
    with pytest.raises(KafkaUnavailableError):
        KafkaAclValidator(_down, expiry=10).check("alice", [])
    KafkaAclValidator(lambda: None, expiry=10, mode="auto").check("bob", [Need(WRITE, "x")])


def _down() -> AclImage:
    raise KafkaUnavailableError("down")


def test_settings_take_ksqldbs_names_and_check_only_authenticated_users() -> None:
    assert AccessValidatorSettings.of({}, users_authenticated=True) == \
        AccessValidatorSettings("auto", 30.0)
    assert AccessValidatorSettings.of({"ksql.access.validator.enable": "auto"}, False).mode == \
        "off"
    assert AccessValidatorSettings.of({"ksql.authorization.cache.expiry.time.secs": "0"},
                                      True).cache_expiry == 0
    for properties, authenticated, reason in (
            ({"ksql.access.validator.enable": "yes"}, True, "on, off or auto"),
            ({"ksql.access.validator.enable": "on"}, False, "needs --auth-file"),
            ({"ksql.authorization.cache.expiry.time.secs": "-1"}, True, "0 to 86400"),
            ({"ksql.authorization.cache.expiry.time.secs": "soon"}, True, "0 to 86400")):
        with pytest.raises(PropertyValueError, match=reason):
            AccessValidatorSettings.of(properties, authenticated)


def test_a_validator_asked_for_starts_only_where_it_can_check() -> None:
    assert start_validator(AccessValidatorSettings("auto"), lambda: None) is None
    assert start_validator(AccessValidatorSettings("off"), _unreadable) is None
    with pytest.raises(AccessValidatorError, match="runs no authorizer"):
        start_validator(AccessValidatorSettings("on"), lambda: None)
    with pytest.raises(AccessValidatorError, match="grant its principal DESCRIBE on the cluster"):
        start_validator(AccessValidatorSettings("auto"), _unreadable)
    assert start_validator(AccessValidatorSettings("on"), lambda: AclImage(())) is not None


def _unreadable() -> AclImage:
    raise TopicAuthorizationError("Describe", ["kafka-cluster"])
