"""Kafka's ACLs, and the decision its StandardAuthorizer takes from them, for a principal whose
credentials the node does not hold: the topic and cluster bindings a node reads with DescribeAcls
(:meth:`metastore.kafka.admin.Admin.describe_acls`), and whether they let a principal do an
operation on a topic.

The broker's rules, as :class:`AclImage` applies them:
- a binding applies to a topic when its pattern is LITERAL and names the topic or is ``*``, or
  is PREFIXED and the topic starts with it; to a principal when it names it or ``User:*``;
- a DENY for the operation (or ALL) wins over every ALLOW;
- an ALLOW of the operation, or of ALL, allows it (READ, WRITE, DELETE and ALTER also allow
  DESCRIBE);
- CREATE on the cluster allows creating any topic, as the broker's CreateTopics checks it;
- nothing else allows (``allow.everyone.if.no.acl.found=false``).

Two of the broker's settings are out of a client's sight (DescribeConfigs hides settings of the
authorizer's): ``super.users``, whose principals need bindings of their own here, and
``allow.everyone.if.no.acl.found=true``, which is read as false. A binding for one host cannot be
matched either, since a REST user has no Kafka connection: the stricter reading is taken, a DENY
for any host denies and an ALLOW for one host does not allow.
"""

from __future__ import annotations

from dataclasses import dataclass

ALL = "ALL"
DESCRIBE = "DESCRIBE"
CREATE = "CREATE"
TOPIC, CLUSTER = "TOPIC", "CLUSTER"
LITERAL, PREFIXED = "LITERAL", "PREFIXED"
WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"
_IMPLYING_DESCRIBE = frozenset({"READ", "WRITE", "DELETE", "ALTER"})


@dataclass(frozen=True)
class AclRule:
    """One binding: ``allow`` or deny ``operation`` on the resources of ``resource`` (TOPIC,
    CLUSTER) that ``name`` matches by ``pattern`` (LITERAL, PREFIXED), to ``principal`` from
    ``host``."""

    resource: str
    pattern: str
    name: str
    principal: str
    host: str
    operation: str
    allow: bool

    def names(self, resource: str, name: str) -> bool:
        if resource != self.resource:
            return False
        if self.pattern == PREFIXED:
            return name.startswith(self.name)
        return self.pattern == LITERAL and self.name in (name, WILDCARD)

    def grants(self, operation: str) -> bool:
        return (self.operation in (operation, ALL)
                or (operation == DESCRIBE and self.operation in _IMPLYING_DESCRIBE))

    def applies_to(self, principal: str) -> bool:
        return self.principal in (principal, "User:*")


@dataclass(frozen=True)
class AclImage:
    """The bindings of a cluster at one moment."""

    rules: tuple[AclRule, ...]

    def allows(self, principal: str, operation: str, topic: str) -> bool:
        """Whether ``principal`` may do ``operation`` (READ, WRITE, CREATE, DELETE, ...) on
        ``topic``."""
        if operation == CREATE and self.allows_on_cluster(principal, operation):
            return True
        return self._decides(principal, operation, TOPIC, topic)

    def allows_on_cluster(self, principal: str, operation: str) -> bool:
        """Whether ``principal`` may do ``operation`` on the cluster itself."""
        return self._decides(principal, operation, CLUSTER, CLUSTER_NAME)

    def _decides(self, principal: str, operation: str, resource: str, name: str) -> bool:
        relevant = [rule for rule in self.rules
                    if rule.applies_to(principal) and rule.names(resource, name)]
        if any(not rule.allow and rule.operation in (operation, ALL) for rule in relevant):
            return False
        return any(rule.allow and rule.host == WILDCARD and rule.grants(operation)
                   for rule in relevant)


__all__ = ["AclImage", "AclRule"]
