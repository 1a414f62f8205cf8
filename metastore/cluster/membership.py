"""Which nodes a service has, alive or not, found through Kafka.

Each node publishes a heartbeat (its URL, state and applied offset) every few seconds to a compacted
topic keyed by node id, and reads everyone's latest heartbeat. A node is alive while its last
heartbeat is younger than three intervals. This is observation only; the catalog never reads it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from metastore.kafka.admin import Admin
from metastore.kafka.compacted import CompactedTopic
from metastore.kafka.consumer import Record
from metastore.kafka.exceptions import KafkaClientError
from metastore.kafka.settings import KafkaSettings

log = logging.getLogger(__name__)


def membership_topic_name(service_id: str) -> str:
    return f"_metastore-{service_id}-nodes"


@dataclass(frozen=True)
class Heartbeat:
    node_id: str
    url: str
    state: str
    applied_offset: int
    timestamp_ms: int
    queries: dict[str, Any] = field(default_factory=dict)
    """The persistent queries the node runs, with state and lag (metastore.runtime.status)."""
    stores: dict[str, Any] = field(default_factory=dict)
    """The tables the node keeps materialized for pull queries, with how far each has read
    (metastore.runtime.materialized.TableStores.positions)."""
    push_queries: dict[str, Any] = field(default_factory=dict)
    """The push queries the node runs, by id (metastore.runtime.push.PushQueries.listing)."""
    image_fingerprint: str = ""
    """The fingerprint of the catalog the node holds at its applied offset ("": not sent)."""


class Membership:
    def __init__(self, settings: KafkaSettings, admin: Admin, service_id: str, node_id: str,
                 url: str, status: Callable[[], tuple[str, int]], interval: float = 2.0,
                 queries: Callable[[], dict[str, Any]] | None = None,
                 stores: Callable[[], dict[str, Any]] | None = None,
                 push_queries: Callable[[], dict[str, Any]] | None = None,
                 fingerprint: Callable[[], str] | None = None) -> None:
        self._topic = CompactedTopic(settings, admin, membership_topic_name(service_id))
        self._group = f"{service_id}-{node_id}-membership"
        self._node_id = node_id
        self._url = url
        self._status = status
        self._queries = queries
        self._stores = stores
        self._push_queries = push_queries
        self._fingerprint = fingerprint
        self.interval = interval
        self._heartbeats: dict[str, Heartbeat] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._topic.ensure(config={"retention.ms": "-1"})
        for target, name in ((self._publish, "heartbeat"), (self._follow, "membership")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)

    def nodes(self) -> list[tuple[Heartbeat, bool]]:
        """Every node seen, with whether it is alive now."""
        now_ms = int(time.time() * 1000)
        limit = int(self.interval * 3000)
        return [(beat, now_ms - beat.timestamp_ms <= limit)
                for beat in sorted(self._heartbeats.values(), key=lambda b: b.node_id)]

    def _publish(self) -> None:
        producer = self._topic.writer()
        try:
            while not self._stop.is_set():
                state, applied = self._status()
                beat = {"nodeId": self._node_id, "url": self._url, "state": state,
                        "appliedOffset": applied, "timestampMs": int(time.time() * 1000),
                        "queries": _reported(self._queries, "queries"),
                        "stores": _reported(self._stores, "table stores"),
                        "pushQueries": _reported(self._push_queries, "push queries"),
                        "imageFingerprint": self._fingerprint() if self._fingerprint else ""}
                try:
                    producer.send(self._topic.topic, self._node_id.encode(),
                                  json.dumps(beat).encode())
                except KafkaClientError as error:
                    log.warning("heartbeat failed: %s", error)
                self._stop.wait(self.interval)
        finally:
            producer.close(2)

    def _follow(self) -> None:
        reader = self._topic.follow(self._group)
        try:
            while not self._stop.is_set():
                try:
                    _collect(reader.poll(0.5, max_records=100), self._heartbeats)
                except KafkaClientError as error:
                    log.warning("reading heartbeats failed: %s", error)
                    self._stop.wait(0.5)
        finally:
            reader.close()


def _reported(report: Callable[[], dict[str, Any]] | None, what: str) -> dict[str, Any]:
    """What ``report`` gives for the heartbeat; nothing when it fails (the beat goes out)."""
    if report is None:
        return {}
    try:
        return report()
    except Exception as error:  # a part of the node failing must not stop its heartbeats
        log.warning("heartbeat: the %s are left out: %s", what, error)
        return {}


def read_heartbeats(settings: KafkaSettings, admin: Admin, service_id: str, group_id: str,
                    timeout: float | None = None) -> list[Heartbeat]:
    """Every node's latest heartbeat, read once up to the end of the topic, by node id."""
    latest: dict[str, Heartbeat] = {}
    _collect(CompactedTopic(settings, admin, membership_topic_name(service_id)).read(
        group_id, timeout), latest)
    return [latest[node_id] for node_id in sorted(latest)]


def _collect(records: Iterable[Record], heartbeats: dict[str, Heartbeat]) -> None:
    """Keep the heartbeat of each record in ``heartbeats``, by node id (tombstones and undecodable
    values are skipped)."""
    for record in records:
        beat = _decode(record.value)
        if beat is not None:
            heartbeats[beat.node_id] = beat


def _decode(value: bytes | None) -> Heartbeat | None:
    try:
        data: dict[str, Any] = json.loads(value or b"")
        return Heartbeat(str(data["nodeId"]), str(data["url"]), str(data["state"]),
                         int(data["appliedOffset"]), int(data["timestampMs"]),
                         dict(data.get("queries") or {}), dict(data.get("stores") or {}),
                         dict(data.get("pushQueries") or {}),
                         str(data.get("imageFingerprint") or ""))
    except (ValueError, KeyError, TypeError):
        return None
