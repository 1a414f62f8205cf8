"""Topics created for requests that were not written: deleted only when no committed statement uses
them, and created again when a statement another node validated meanwhile was committed over one.

A writer creates a statement's topics before it commits. When the request then fails, the topics
are left unless the log proves nothing uses them, which takes more than reading the log's end:

- another node of the service may have committed a statement over the topic (it saw the topic,
  validated, committed) a moment ago. Its commit returns once the coordinator has logged it; the
  markers that make its records readable follow, so the last stable offset can trail it. The log
  is read only once it is *settled*: a new producer of the service's transactional id, whose
  ``init_transactions`` waits for that commit to complete and aborts any transaction still open,
  then the replica caught up with the last stable offset. A transaction open after that is of a
  newer epoch: its node validates after the settle;
- so another node may validate over the topic between that check and the deletion, and commit
  right after. The log is settled again once the topics are deleted (aborting any transaction
  begun meanwhile, whose node validates again and finds the topic missing), and a topic a source
  now uses is created again, empty, with the partitions, replicas and configuration it was
  created with. When the log cannot be settled again, every deleted topic is created again: a
  topic left over is better than a source without its topic.

What that cannot give back: records written to the topic in the moment between the other node's
commit and the deletion, and the topic's id. Deciding the deletion through the command log
would; the window is the few milliseconds of one settle, and the node logs it at ERROR.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from metastore.catalog.image import Image
from metastore.core.faults import BeforeDeletingUnusedTopics
from metastore.engine.validation import TopicSpec
from metastore.kafka.admin import Admin
from metastore.kafka.exceptions import KafkaClientError

log = logging.getLogger(__name__)

Settle = Callable[[float], bool]
"""Fence the service's earlier producers (their transactions complete or abort), then wait until
the replica has applied the committed log; whether that happened within the patience given."""


class UnusedTopics:
    """Removes the topics failed requests created (best effort: a topic it cannot prove unused
    is left, and logged)."""

    def __init__(self, admin: Admin, settle: Settle, image: Callable[[], Image],
                 before_deleting: BeforeDeletingUnusedTopics | None = None) -> None:
        self._admin = admin
        self._settle = settle
        self._image = image
        self._before_deleting = before_deleting

    def remove(self, requests: Sequence[tuple[str, Mapping[str, TopicSpec]]],
               patience: float = 2.0) -> list[str]:
        """Delete the topics each request (its id, the topics it created) created, unless the
        request is in the log after all or a source uses them; the names it deleted (or asked
        Kafka to) and did not create again. A request without an id cannot be found in the
        log: only the sources protect its topics."""
        created = {name: spec for _, topics in requests for name, spec in topics.items()}
        if not created:
            return []
        if not self._settle(patience):
            log.warning("topics %s, created for requests that were not written, are left: the "
                        "log did not settle", sorted(created))
            return []
        image = self._image()
        unused = sorted({name for request_id, topics in requests
                         if not (request_id and request_id in image.requests)
                         for name in topics} - _used_topics(image))
        if not unused:
            return []
        if self._before_deleting is not None:
            self._before_deleting(unused)
        for name in unused:
            self._delete(name, patience)
        restored = self._restore_used({name: created[name] for name in unused}, patience)
        return [name for name in unused if name not in restored]

    def _delete(self, name: str, patience: float) -> None:
        try:
            if not self._admin.delete_until_gone(name, timeout=patience * 2):
                log.warning("topic %s, created for a request that was not written, is still "
                            "listed after its deletion", name)
        except KafkaClientError as error:
            log.warning("deleting topic %s, created for a request that was not written, failed: "
                        "%s", name, error)

    def _restore_used(self, deleted: Mapping[str, TopicSpec], patience: float) -> list[str]:
        """Create again, empty, each deleted topic a statement committed since uses (each one,
        when the log cannot tell); the names created."""
        if self._settle(patience):
            wanted = sorted(set(deleted) & _used_topics(self._image()))
            why = "a statement committed while it was being deleted uses it"
        else:
            wanted = sorted(deleted)
            why = "the log did not settle after its deletion, so a statement may use it"
        return [name for name in wanted if self._create_again(name, deleted[name], why, patience)]

    def _create_again(self, name: str, spec: TopicSpec, why: str, patience: float) -> bool:
        try:
            if not self._admin.wait_until_gone(name, timeout=patience * 4):  # still being deleted
                log.error("topic %s is still being deleted, and %s: it is not created again",
                          name, why)
                return False
            if self._admin.create(name, spec.partitions, spec.replicas, dict(spec.config),
                                  timeout=patience * 2):
                log.error("topic %s was deleted and created again, empty (a new topic id): %s",
                          name, why)
                return True
        except KafkaClientError as error:
            log.error("topic %s could not be created again, and %s: %s", name, why, error)
        return False


def _used_topics(image: Image) -> set[str]:
    return {source.topic for source in image.sources.values()}
