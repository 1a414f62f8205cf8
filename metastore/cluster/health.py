"""The node's view of its dependencies for ``/healthcheck``: is Kafka answering, is the command
log there.

A load balancer may probe a node many times a second: :class:`HealthProbe` asks Kafka at most
once per ``ttl`` seconds, with a short timeout, and answers the cached result in between; while
one probe is in flight, other callers get the previous result instead of waiting for it. Reasons
are for an unauthenticated caller: they say what failed, never Kafka's own error text (which
names brokers); that goes to the node's log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from metastore.kafka.admin import Admin
from metastore.kafka.exceptions import KafkaTopicError, KafkaUnavailableError

_log = logging.getLogger(__name__)

PROBE_TTL_SECONDS = 2.0
PROBE_TIMEOUT_SECONDS = 2.5


@dataclass(frozen=True)
class KafkaHealth:
    """What the last probe found; ``reason`` says what is wrong, when anything is."""

    kafka_reachable: bool
    """Kafka answered a metadata request in time."""
    command_topic_exists: bool
    """The command topic exists (False when Kafka did not answer: unknown)."""
    reason: str | None = None

    @property
    def healthy(self) -> bool:
        return self.kafka_reachable and self.command_topic_exists


class HealthProbe:
    """Checks that Kafka answers and the command topic exists, caching the answer."""

    def __init__(self, admin: Admin, topic: str, ttl: float = PROBE_TTL_SECONDS,
                 timeout: float = PROBE_TIMEOUT_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._admin = admin
        self._topic = topic
        self._ttl = ttl
        self._timeout = timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._last: KafkaHealth | None = None
        self._checked_at = 0.0
        self.probes = 0
        """Metadata requests made so far."""

    def check(self) -> KafkaHealth:
        """The current health: fresh when the cached one is older than the TTL."""
        last = self._last
        if last is not None and self._clock() - self._checked_at < self._ttl:
            return last
        if not self._lock.acquire(blocking=last is None):
            assert last is not None
            return last
        try:
            if self._last is not None and self._clock() - self._checked_at < self._ttl:
                return self._last
            result = self._probe()
            self._last, self._checked_at = result, self._clock()
            return result
        finally:
            self._lock.release()

    def _probe(self) -> KafkaHealth:
        self.probes += 1
        try:
            found = self._admin.describe(self._topic, timeout=self._timeout)
        except KafkaUnavailableError as error:
            _log.warning("health probe: Kafka did not answer: %s", error.message)
            return KafkaHealth(False, False, f"Kafka did not answer within {self._timeout:g} s")
        except KafkaTopicError as error:
            _log.warning("health probe: %s", error.message)
            return KafkaHealth(True, False, f"the command topic {self._topic} cannot be read")
        if found is None:
            return KafkaHealth(True, False, f"the command topic {self._topic} does not exist")
        return KafkaHealth(True, True)


__all__ = ["HealthProbe", "KafkaHealth"]
