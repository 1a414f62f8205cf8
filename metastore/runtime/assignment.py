"""Which node runs which persistent query: a Kafka consumer group over the service's Spark nodes.

Every node that runs Spark joins the group ``_metastore-<service id>-queries``, subscribed to the
compacted topic ``_metastore-<service id>-query-assignment`` (16 partitions by default; nothing
is ever written to it: its partitions are only the units the group coordinator hands out). A
query belongs to partition ``sha256(query id) mod partitions``, the same on every node, and a
node runs exactly the queries of the partitions it is assigned. Kafka's group protocol (member
liveness by session timeout, one owner per partition per generation) is the membership and
assignment mechanism; nothing here votes or elects.

Rebalances use the cooperative-sticky assignor: a node joining or leaving moves only the
partitions that must move, and the queries of every other partition keep running. A partition is
handed over only after its previous owner gave it up: the revoke callback stops the partition's
Spark queries before it returns, and only then does the rebalance complete. A node that dies
keeps its partitions until its session times out (``session_timeout_ms``); then the survivors
are assigned them and start the queries from their checkpoints.

The consumer is polled by a thread of its own every 0.5 s (callbacks run inside that poll);
it never reads records. Nodes without Spark never join.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable

from metastore.kafka.admin import Admin
from metastore.kafka.exceptions import KafkaClientError
from metastore.kafka.group import GroupMember
from metastore.kafka.settings import KafkaSettings
from metastore.planner.exceptions import AssignmentError

log = logging.getLogger(__name__)

DEFAULT_PARTITIONS = 16
DEFAULT_SESSION_TIMEOUT_MS = 10_000

Partitions = frozenset[int]


def assignment_topic_name(service_id: str) -> str:
    return f"_metastore-{service_id}-query-assignment"


def group_name(service_id: str) -> str:
    return f"_metastore-{service_id}-queries"


def partition_of(query_id: str, partitions: int) -> int:
    """The assignment partition of a query: a stable hash, equal on every node and release."""
    digest = hashlib.sha256(query_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % partitions


class QueryAssignment:
    """This node's membership of the query group, and the partitions it owns right now."""

    def __init__(self, settings: KafkaSettings, admin: Admin, service_id: str, node_id: str,
                 on_assigned: Callable[[Partitions], None],
                 on_revoked: Callable[[Partitions], None],
                 partitions: int = DEFAULT_PARTITIONS,
                 session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS) -> None:
        self._settings = settings
        self._admin = admin
        self.topic = assignment_topic_name(service_id)
        self.group = group_name(service_id)
        self._node_id = node_id
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self.partitions = partitions
        """The topic's partition count (what query ids are hashed over), as found at start."""
        self.session_timeout_ms = session_timeout_ms
        self._owned: Partitions = frozenset()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def owned(self) -> Partitions:
        return self._owned

    def start(self, visible_within: float = 10.0) -> None:
        self._admin.create(self.topic, partitions=self.partitions,
                           config={"cleanup.policy": "compact"})
        deadline = time.monotonic() + visible_within
        info = self._admin.describe(self.topic)
        while info is None or info.partitions < 1:  # a new topic reaches every broker shortly
            if time.monotonic() > deadline:
                raise AssignmentError(f"the query assignment topic {self.topic} is not usable")
            time.sleep(0.2)
            info = self._admin.describe(self.topic)
        self.partitions = info.partitions
        self._thread = threading.Thread(target=self._run, name="query-assignment", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Leave the group; the revoke callback stops this node's queries first."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)

    # -- the polling thread ----------------------------------------------------------------------
    def _assign(self, added: Partitions) -> None:
        self._owned = self._owned | added
        log.info("query partitions assigned %s, owned %s", sorted(added), sorted(self._owned))
        self._on_assigned(self._owned)

    def _revoke(self, removed: Partitions) -> None:
        log.info("query partitions revoked %s", sorted(removed))
        self._owned = self._owned - removed  # first, so no reconcile starts them again
        self._on_revoked(removed)  # stops their queries before the rebalance completes

    def _run(self) -> None:
        member = GroupMember(self._settings, self.group, self.topic, on_assign=self._assign,
                             on_revoke=self._revoke, client_id=f"{self._node_id}-queries",
                             session_timeout_ms=self.session_timeout_ms)
        try:
            while not self._stop.is_set():
                try:
                    member.poll(0.5)  # serves the group: rebalances call the callbacks
                except KafkaClientError as error:
                    log.warning("query assignment poll failed: %s", error)
        finally:
            try:
                member.close()  # revokes what is still owned, through the callback
            except KafkaClientError as error:
                log.warning("closing the query assignment consumer: %s", error)
            if self._owned:
                self._on_revoked(self._owned)
                self._owned = frozenset()
