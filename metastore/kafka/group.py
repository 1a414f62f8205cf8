"""A consumer-group member that takes part in partition assignment only.

The group coordinator hands the partitions of a topic out among the members; a member that
stops heartbeating loses its partitions after ``session_timeout_ms``. :class:`GroupMember` never
fetches records and never commits offsets: it polls to serve the group, and rebalances call its
callbacks with the partition numbers that were added, revoked or lost. The cooperative-sticky
assignor moves only the partitions that must move.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from metastore.kafka.exceptions import KafkaClientError
from metastore.kafka.settings import KafkaSettings, create_client

PartitionsCallback = Callable[[frozenset[int]], None]
"""Called with partition numbers, inside :meth:`GroupMember.poll` or :meth:`GroupMember.close`."""


def _relay(callback: PartitionsCallback) -> Callable[[Any, list[TopicPartition]], None]:
    def relay(_consumer: Any, partitions: list[TopicPartition]) -> None:
        callback(frozenset(p.partition for p in partitions))

    return relay


class GroupMember:
    """A member of ``group_id``, subscribed to ``topic``.

    ``on_assign`` receives the partitions added to this member, ``on_revoke`` those it must give
    up (the rebalance completes only once it returns), ``on_lost`` (by default ``on_revoke``)
    those taken away after this member was presumed dead.
    """

    def __init__(self, settings: KafkaSettings, group_id: str, topic: str,
                 on_assign: PartitionsCallback, on_revoke: PartitionsCallback,
                 on_lost: PartitionsCallback | None = None, client_id: str | None = None,
                 session_timeout_ms: int = 10_000, max_poll_interval_ms: int = 300_000) -> None:
        self.group_id = group_id
        self.topic = topic
        identity = {} if client_id is None else {"client_id": client_id}
        self._consumer = create_client(Consumer, settings.config(
            group_id=group_id, enable_auto_commit=False, auto_offset_reset="latest",
            partition_assignment_strategy="cooperative-sticky",
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=max(session_timeout_ms // 4, 100),
            max_poll_interval_ms=max_poll_interval_ms, **identity))
        try:
            self._consumer.subscribe([topic], on_assign=_relay(on_assign),
                                     on_revoke=_relay(on_revoke),
                                     on_lost=_relay(on_lost or on_revoke))
        except KafkaException as exc:
            self._consumer.close()
            raise KafkaClientError(f"joining group {group_id} failed: {exc}") from exc

    def poll(self, timeout: float) -> None:
        """Serve the group for up to ``timeout`` seconds; rebalances call the callbacks here."""
        try:
            self._consumer.poll(timeout)  # no record is ever written to the topic
        except KafkaException as exc:
            raise KafkaClientError(f"polling group {self.group_id} failed: {exc}",
                                   retriable=True) from exc

    def close(self) -> None:
        """Leave the group: what this member still owns is revoked through the callback first."""
        try:
            self._consumer.close()
        except (KafkaException, RuntimeError) as exc:
            raise KafkaClientError(f"leaving group {self.group_id} failed: {exc}") from exc
