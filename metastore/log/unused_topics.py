"""Topics created for requests that were not written: deleted only when no committed statement uses
them, and created again when one another node validated meanwhile was committed over one.

A writer creates a statement's topics before it commits. When the request then fails, the topics
are left unless the log proves nothing uses them, which takes more than reading the log's end:

- another node of the service may have committed a statement over the topic (it saw the topic,
  validated, committed) a moment ago. Its commit returns once the coordinator has logged it; the
  markers that make its records readable follow, so the last stable offset can trail it. The log
  is read only once it is *settled*: a new producer of the service's transactional id (whose
  ``init_transactions`` waits for that commit to complete, and aborts any transaction still
  open) and a last stable offset equal to the high watermark;
- another node may validate over the topic between that check and the deletion and commit right
  after. So the log is settled again once the topics are gone (aborting any transaction begun
  meanwhile, whose node validates again and finds the topic missing), and a topic a source now
  uses is created again as it was, empty, as the statement over it found it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from metastore.catalog.image import Image
from metastore.catalog.validation import TopicSpec
from metastore.kafka.admin import Admin
from metastore.kafka.exceptions import KafkaClientError

log = logging.getLogger(__name__)

Settle = Callable[[float], bool]
"""Fence the service's other producers, then wait until the log has no open transaction and the
replica has applied all of it; whether that happened within the patience given."""


class UnusedTopics:
    """Removes the topics failed requests created (best effort: a topic it cannot prove unused,
    or cannot delete, is left and logged)."""

    def __init__(self, admin: Admin, settle: Settle, image: Callable[[], Image],
                 before_deleting: Callable[[Collection[str]], None] | None = None) -> None:
        self._admin = admin
        self._settle = settle
        self._image = image
        self._before_deleting = before_deleting

    def remove(self, requests: Sequence[tuple[str, Mapping[str, TopicSpec]]],
               patience: float = 2.0) -> list[str]:
        """Delete the topics each request (its id, the topics it created) created, unless the
        request is in the log after all or a source uses them; the names deleted and not
        restored."""
        created = {name: spec for _, topics in requests for name, spec in topics.items()}
        if not created:
            return []
        if not self._settle(patience):
            log.warning("topics %s, created for requests that were not written, are left: the "
                        "log did not settle", sorted(created))
            return []
        image = self._image()
        used = _used_topics(image)
        unused = sorted({name for request_id, topics in requests
                         if not (request_id and request_id in image.requests)
                         for name in topics} - used)
        if unused and self._before_deleting is not None:
            self._before_deleting(unused)
        deleted = [name for name in unused if self._delete(name, patience)]
        if not deleted:
            return []
        restored = self._restore_used({name: created[name] for name in deleted}, patience)
        return [name for name in deleted if name not in restored]

    def _delete(self, name: str, patience: float) -> bool:
        try:
            if self._admin.delete_until_gone(name, timeout=patience * 2):
                return True
            log.warning("topic %s, created for a request that was not written, is still listed "
                        "after its deletion", name)
        except KafkaClientError as error:
            log.warning("deleting topic %s, created for a request that was not written, failed: "
                        "%s", name, error)
        return False

    def _restore_used(self, deleted: Mapping[str, TopicSpec], patience: float) -> list[str]:
        """Create again, empty, each deleted topic a statement committed since uses."""
        if not self._settle(patience):
            log.error("topics %s were deleted, and the log did not settle after: a statement "
                      "committed over one meanwhile would find it missing", sorted(deleted))
            return []
        used = _used_topics(self._image())
        restored = []
        for name in sorted(set(deleted) & used):
            spec = deleted[name]
            try:
                self._admin.create(name, spec.partitions, spec.replicas, dict(spec.config),
                                   timeout=patience * 2)
            except KafkaClientError as error:
                log.error("topic %s, which a statement committed while it was being deleted "
                          "uses, could not be created again: %s", name, error)
                continue
            log.warning("topic %s was created again: a statement committed while it was being "
                        "deleted uses it", name)
            restored.append(name)
        return restored


def _used_topics(image: Image) -> set[str]:
    return {source.topic for source in image.sources.values()}
