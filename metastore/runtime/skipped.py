"""Records a query skipped because it cannot read them, counted per query and source.

A query's streaming read of a source drops the records it cannot decode in a step Spark
observes (:mod:`metastore.planner.observed_reads`): each micro-batch's progress then carries
how many records it skipped and where the first one was. :class:`SkippedRecords`, which
each query's progress listener (:mod:`metastore.runtime.progress_listener`) feeds, adds those
up per query and source, and logs one
warning per micro-batch that skipped any, naming the query, the topic, the partition and the
offset, and hands the micro-batch's offsets to the processing log
(:mod:`metastore.runtime.processing_log`). With ``ksql.fail.on.deserialization.error`` true, a
query fails on such a record instead.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from metastore.planner.observed_reads import observed_read
from metastore.runtime import progress_listener
from metastore.runtime.processing_log import SkippedBatch, batch_offsets

log = logging.getLogger(__name__)

class SkippedRecords:
    """Counts of skipped records by query name and source, from the observed progress."""

    def __init__(self) -> None:
        self._report: Callable[[SkippedBatch], None] | None = None
        self._lock = threading.Lock()
        self._counts: dict[str, dict[str, int]] = defaultdict(dict)
        self._last_ms: dict[str, dict[str, int]] = defaultdict(dict)
        """When each query last skipped a record of each source (its micro-batch's start)."""
        self._transient: dict[str, int] = {}
        """Push queries' skips by source: they come and go, so they are not kept per query."""
        self._from_start: dict[str, bool] = {}
        """Whether each running query reads its sources from the start (for the processing
        log, where the progress does not say where a first micro-batch began)."""

    def of(self, query: str) -> dict[str, int]:
        """Records ``query`` skipped so far on this node, by source (none skipped: empty)."""
        with self._lock:
            return dict(self._counts.get(query, {}))

    def last_of(self, query: str) -> dict[str, int]:
        """When ``query`` last skipped a record of each source on this node, in epoch ms."""
        with self._lock:
            return dict(self._last_ms.get(query, {}))

    def report_to(self, report: Callable[[SkippedBatch], None]) -> None:
        """Hand each micro-batch's skips, with the offsets it read, to ``report`` (the
        processing log)."""
        self._report = report

    def started(self, query: str, from_start: bool) -> None:
        """``query`` starts (again), reading its sources from the start or not."""
        with self._lock:
            self._from_start[query] = from_start

    def stopped(self, query: str) -> None:
        """A push query ended: nothing more of it is counted."""
        with self._lock:
            self._from_start.pop(query, None)

    def total(self) -> int:
        """Records skipped on this node, by its persistent queries and push queries alike."""
        with self._lock:
            return (sum(sum(by_source.values()) for by_source in self._counts.values())
                    + sum(self._transient.values()))

    def count(self, query: str, metrics: Mapping[str, Any], transient: bool = False,
              sources: Sequence[tuple[str | None, str | None]] = (),
              at_ms: int | None = None) -> None:
        """Add one micro-batch's observed metrics of ``query`` (a push query when
        ``transient``); ``sources``: the start and end offsets (Spark's JSON) of each source it
        read, for the processing log; ``at_ms``: when the micro-batch started."""
        for name, row in metrics.items():
            observed = observed_read(name)
            skipped = int(row["skipped"] or 0) if observed is not None else 0
            if observed is None or not skipped:
                continue
            source, topic = observed
            with self._lock:
                counts = self._transient if transient else self._counts[query]
                counts[source] = counts.get(source, 0) + skipped
                if at_ms is not None and not transient:
                    self._last_ms[query][source] = at_ms
            first = row["first"]
            log.warning("query %s skipped %d record(s) of %s it cannot deserialize (topic %s, "
                        "the first at partition %s, offset %s)", query, skipped, source, topic,
                        first["partition"] if first else "?", first["offset"] if first else "?")
            self._log(query, source, topic, sources, first)

    def _log(self, query: str, source: str, topic: str,
             sources: Sequence[tuple[str | None, str | None]], first: Any) -> None:
        """Hand a micro-batch's unreadable records of ``source`` to the processing log."""
        with self._lock:
            from_start = self._from_start.get(query, False)
        offsets = batch_offsets(sources, topic, (int(first["partition"]), int(first["offset"]))
                                if first else None, from_start)
        if self._report is not None and offsets is not None:
            self._report(SkippedBatch(query, source, topic, *offsets))

    def hear(self, progress: Any, transient: bool = False) -> None:
        """Count one micro-batch's progress (PySpark's ``StreamingQueryProgress``)."""
        if progress.name and progress.observedMetrics:
            self.count(progress.name, progress.observedMetrics, transient,
                       progress_listener.source_offsets(progress),
                       progress_listener.started_ms(progress))


__all__ = ["SkippedRecords"]
