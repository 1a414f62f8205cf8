"""Topic administration: describe, create, and read the configuration that matters."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from confluent_kafka.cimpl import NewTopic

from metastore.kafka.acls import CLUSTER, TOPIC, AclImage, AclRule
from metastore.kafka.exceptions import KafkaClientError, KafkaTopicError, KafkaUnavailableError
from metastore.kafka.producer import PERMANENT_CODES, classify
from metastore.kafka.settings import KafkaSettings, create_client


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int
    replication: int


REFUSED_TOPIC_CODES = PERMANENT_CODES | frozenset({
    KafkaError.INVALID_PARTITIONS,
    KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.INVALID_REPLICA_ASSIGNMENT,
    KafkaError.INVALID_REQUEST, KafkaError.UNSUPPORTED_VERSION})
"""Topic creation refusals no retry can change; every other error (a timeout, throttling, a
controller moving) is retried while the request's deadline allows."""

_ACL_RESOURCES = {ResourceType.TOPIC: TOPIC, ResourceType.BROKER: CLUSTER}
"""The resources whose ACLs decide a statement's topic access (librdkafka names the cluster
resource BROKER)."""


def _brokers_restarting(error: KafkaError) -> bool:
    """A replication factor refused only because the brokers that would hold the replicas are
    fenced (registered, not yet caught up with the controller, as after a restart): the refusal
    passes once they are unfenced, unlike a factor above the cluster's size."""
    return (error.code() == KafkaError.INVALID_REPLICATION_FACTOR
            and "currently fenced" in error.str())


class Admin:
    def __init__(self, settings: KafkaSettings, timeout: float = 10.0) -> None:
        self._admin = create_client(AdminClient, settings.config())
        self._timeout = timeout

    def describe(self, topic: str, timeout: float | None = None) -> TopicInfo | None:
        """The topic's shape, or None when it does not exist."""
        try:
            metadata = self._admin.list_topics(topic=topic, timeout=timeout or self._timeout)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"listing topic {topic} failed: {exc}") from exc
        found = metadata.topics.get(topic)
        if found is None or (found.error is not None and found.error.code() in (
                KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC)):
            return None
        if found.error is not None:
            raise KafkaTopicError(topic, f"topic {topic}: {found.error.str()}")
        partitions = found.partitions
        replication = len(next(iter(partitions.values())).replicas) if partitions else 0
        return TopicInfo(name=topic, partitions=len(partitions), replication=replication)

    def topic_id(self, topic: str) -> str:
        """The topic's id: it changes when a topic is deleted and created again."""
        try:
            description = self._admin.describe_topics(TopicCollection([topic]))[topic].result(
                self._timeout)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise KafkaTopicError(topic, f"topic {topic} does not exist") from exc
            raise KafkaUnavailableError(f"describing topic {topic} failed: {exc}") from exc
        return str(description.topic_id)

    def list_topics(self, internal: bool = False) -> list[TopicInfo]:
        """Every topic, by name; ``internal``: Kafka's own (``__consumer_offsets``...) too."""
        try:
            metadata = self._admin.list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"listing topics failed: {exc}") from exc
        return sorted(
            (TopicInfo(name, len(t.partitions),
                       len(next(iter(t.partitions.values())).replicas) if t.partitions else 0)
             for name, t in metadata.topics.items() if internal or not name.startswith("__")),
            key=lambda info: info.name)

    def topic_consumers(self) -> dict[str, tuple[int, int]]:
        """Per topic: how many consumers are assigned its partitions (one per partition
        assigned) and in how many groups, over every consumer group (ksqlDB's
        ``ListTopicsExecutor.getTopicConsumerAndGroupCounts``)."""
        try:
            listed = self._admin.list_consumer_groups(
                request_timeout=self._timeout).result(self._timeout)
            group_ids = [group.group_id for group in listed.valid]
            described = (self._admin.describe_consumer_groups(
                group_ids, request_timeout=self._timeout) if group_ids else {})
            consumers: dict[str, int] = {}
            groups: dict[str, set[str]] = {}
            for group_id, future in described.items():
                for member in future.result(self._timeout).members:
                    assignment = member.assignment
                    for partition in (assignment.topic_partitions if assignment else []):
                        consumers[partition.topic] = consumers.get(partition.topic, 0) + 1
                        groups.setdefault(partition.topic, set()).add(group_id)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"describing consumer groups failed: {exc}") from exc
        return {topic: (count, len(groups[topic])) for topic, count in consumers.items()}

    def create(self, topic: str, partitions: int, replication: int | None = None,
               config: Mapping[str, str] | None = None, timeout: float | None = None) -> bool:
        """Create ``topic``; False when it already existed.

        A refusal that no retry can change (an invalid name or configuration, a policy, missing
        authorization) is a :class:`KafkaTopicError` with ``retriable`` False; a timeout or an
        unavailable controller is :class:`KafkaUnavailableError`.
        """
        wait = timeout or self._timeout
        new = NewTopic(topic, num_partitions=partitions,
                       replication_factor=replication if replication is not None else -1,
                       config=dict(config or {}))
        try:
            future = self._admin.create_topics([new], operation_timeout=wait)[topic]
            future.result(timeout=wait)
        except TimeoutError as exc:
            raise KafkaUnavailableError(f"creating topic {topic} timed out after {wait} s") from exc
        except KafkaException as exc:
            error = exc.args[0]
            if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            if isinstance(error, KafkaError) and (error.code() not in REFUSED_TOPIC_CODES
                                                  or _brokers_restarting(error)):
                raise KafkaUnavailableError(f"creating topic {topic} failed: {exc}") from exc
            reason = error.str() if isinstance(error, KafkaError) else str(exc)
            raise KafkaTopicError(topic, f"Could not create the Kafka topic {topic}: {reason}") from exc
        except ValueError as exc:  # refused by the client before sending, e.g. a bad name
            raise KafkaTopicError(topic, f"Could not create the Kafka topic {topic}: {exc}") from exc
        return True

    def delete(self, topic: str, timeout: float | None = None) -> None:
        wait = timeout or self._timeout
        try:
            self._admin.delete_topics([topic], operation_timeout=wait)[topic].result(timeout=wait)
        except TimeoutError as exc:
            raise KafkaUnavailableError(f"deleting topic {topic} timed out after {wait} s") from exc
        except KafkaException as exc:
            error = exc.args[0]
            if isinstance(error, KafkaError) and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return
            raise KafkaTopicError(topic, f"deleting topic {topic} failed: {exc}") from exc

    def delete_until_gone(self, topic: str, timeout: float) -> bool:
        """Delete ``topic`` and wait, at most ``timeout`` seconds, until the metadata this client
        reads no longer lists it: the controller answers before the brokers' metadata follows, so
        a topic just deleted can still be described for a moment. Whether it is gone."""
        deadline = time.monotonic() + timeout
        self.delete(topic, timeout=timeout)
        return self.wait_until_gone(topic, max(deadline - time.monotonic(), 0))

    def wait_until_gone(self, topic: str, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds, until the metadata this client reads no longer
        lists ``topic``; whether it is gone."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self.describe(topic, timeout=left) is None:
                return True
            time.sleep(0.02)

    def start_deleting(self, topics: Sequence[str]) -> list[Future[None]]:
        """Ask the controller to delete ``topics`` and return without waiting for it: the
        deletions' futures, to wait for before the client goes. The request carries a positive
        timeout: with a timeout of 0, Kafka 4.1's KRaft controller answers it as done and
        deletes nothing."""
        if not topics:
            return []
        return list(self._admin.delete_topics(list(topics),
                                              operation_timeout=self._timeout).values())

    def delete_records(self, topic: str, before: int, partition: int = 0,
                       timeout: float | None = None) -> None:
        """Delete the records of ``topic``/``partition`` below offset ``before``: the partition
        then starts at ``before``."""
        wait = timeout or self._timeout
        try:
            futures = self._admin.delete_records([TopicPartition(topic, partition, before)],
                                                 request_timeout=wait)
            for future in futures.values():
                future.result(wait)
        except KafkaException as exc:
            raise classify(exc.args[0], "delete_records") from exc

    def topic_config(self, topic: str) -> dict[str, str]:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        try:
            entries = self._admin.describe_configs([resource])[resource].result(
                timeout=self._timeout)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() in PERMANENT_CODES:
                raise classify(error, f"describing the configuration of topic {topic}") from exc
            raise KafkaTopicError(topic, f"describing topic {topic} failed: {exc}") from exc
        return {name: entry.value for name, entry in entries.items() if entry.value is not None}

    def broker_count(self, timeout: float | None = None) -> int:
        try:
            return len(self._admin.list_topics(timeout=timeout or self._timeout).brokers)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"listing brokers failed: {exc}") from exc

    def describe_acls(self) -> AclImage | None:
        """The cluster's topic and cluster ACLs, or None when its brokers run no authorizer.

        DescribeAcls needs DESCRIBE on the cluster, and librdkafka answers a refused or
        authorizer-less DescribeAcls with no bindings rather than its error: so the authorizer
        is looked up first (a broker's ``authorizer.class.name``, which a principal refused
        DescribeConfigs only meets where one runs), then the principal's cluster operations."""
        if not self._authorizer_runs():
            return None
        if AclOperation.DESCRIBE not in self._cluster_operations():
            raise KafkaClientError("reading the cluster's ACLs (DescribeAcls) is not allowed: "
                                   "the principal lacks DESCRIBE on the cluster")
        anything: Any = None  # the filter's "any name, principal and host"
        every = AclBindingFilter(ResourceType.ANY, anything, ResourcePatternType.ANY, anything,
                                 anything, AclOperation.ANY, AclPermissionType.ANY)
        try:
            bindings = self._admin.describe_acls(every, request_timeout=self._timeout).result(
                self._timeout)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"reading the cluster's ACLs failed: {exc}") from exc
        return AclImage(tuple(
            AclRule(_ACL_RESOURCES[binding.restype], binding.resource_pattern_type.name,
                    binding.name, binding.principal, binding.host, binding.operation.name,
                    binding.permission_type == AclPermissionType.ALLOW)
            for binding in bindings if binding.restype in _ACL_RESOURCES))

    def _authorizer_runs(self) -> bool:
        try:
            broker = next(iter(self._admin.list_topics(timeout=self._timeout).brokers))
            resource = ConfigResource(ConfigResource.Type.BROKER, str(broker))
            entries = self._admin.describe_configs([resource])[resource].result(
                timeout=self._timeout)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() in PERMANENT_CODES:
                return True  # refused: an authorizer refused it
            raise KafkaUnavailableError(f"describing a broker failed: {exc}") from exc
        entry = entries.get("authorizer.class.name")
        return entry is not None and bool(entry.value)

    def _cluster_operations(self) -> list[AclOperation]:
        try:
            cluster = self._admin.describe_cluster(
                include_authorized_operations=True, request_timeout=self._timeout).result(
                self._timeout)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"describing the cluster failed: {exc}") from exc
        return list(cluster.authorized_operations or ())

    def cluster_id(self) -> str | None:
        try:
            return self._admin.list_topics(timeout=self._timeout).cluster_id
        except KafkaException:
            return None
