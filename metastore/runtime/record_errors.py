"""Rows a query could not process, as ksqlDB's record processing errors, counted per query
(persistent queries and push queries alike).

A plan that checks its stream rows, or an aggregation's aggregated rows
(:mod:`metastore.planner.record_checks`), has each micro-batch count the rows failing each
check in an observation of the view that holds them.
:class:`RecordErrors`, which each persistent query's progress listener feeds, adds those counts
up per query, logs a warning per micro-batch that had any, and hands the micro-batch's offsets
with the checks that failed to the processing log (:mod:`metastore.runtime.processing_log`),
which runs the stream's steps again over those offsets and logs each failing row.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from metastore.planner.record_checks import CARRIED, FIRST, observation
from metastore.planner.steps import CheckedRows, QueryPlan
from metastore.runtime import progress_listener
from metastore.runtime.processing_log import CarriedRows, FailedRows, batch_offsets

log = logging.getLogger(__name__)


class RecordErrors:
    """Counts of the rows each query of this node could not process."""

    def __init__(self) -> None:
        self._report: Callable[[FailedRows | CarriedRows], None] | None = None
        self._lock = threading.Lock()
        self._counts: dict[str, int] = defaultdict(int)
        self._plans: dict[str, QueryPlan] = {}
        self._ended = 0
        """The rows of the push queries that ended: counted in the node's total, kept by none."""

    def report_to(self, report: Callable[[FailedRows | CarriedRows], None]) -> None:
        """Hand each micro-batch's failing rows to ``report`` (the processing log)."""
        self._report = report

    def started(self, query: str, plan: QueryPlan) -> None:
        """``query`` starts (again) with ``plan``."""
        with self._lock:
            self._plans[query] = plan

    def stopped(self, query: str) -> None:
        """The push query ``query`` ended: nothing more of it is counted, nor kept by id."""
        with self._lock:
            self._plans.pop(query, None)
            self._ended += self._counts.pop(query, 0)

    def of(self, query: str) -> int:
        """Rows ``query`` could not process on this node so far."""
        with self._lock:
            return self._counts.get(query, 0)

    def total(self) -> int:
        """Rows this node's queries could not process so far."""
        with self._lock:
            return sum(self._counts.values()) + self._ended

    def hear(self, progress: Any) -> None:
        """Count one micro-batch's progress (PySpark's ``StreamingQueryProgress``)."""
        if progress.name and progress.observedMetrics:
            self.count(progress.name, progress.observedMetrics,
                       progress_listener.source_offsets(progress))

    def count(self, query: str, metrics: Mapping[str, Any],
              sources: Sequence[tuple[str | None, str | None]] = ()) -> None:
        """Add one micro-batch's observed metrics of ``query``; ``sources``: the start and end
        offsets (Spark's JSON) of each source it read, for the processing log."""
        with self._lock:
            plan = self._plans.get(query)
        checks = {observation(checked): checked for checked in (
            (plan.checked, plan.aggregated) if plan is not None else ()) if checked is not None}
        for name, row in metrics.items():
            checked = checks.get(name)
            if checked is None:
                continue  # not a check, or one of the query's earlier plan
            failed = tuple(int(row[f"failed{i}"] or 0) for i in range(len(checked.checks)))
            if not any(failed):
                continue
            with self._lock:
                self._counts[query] += sum(failed)
            log.warning("query %s could not process %d row(s) of topic %s (%s)", query,
                        sum(failed), checked.topic, "; ".join(
                            f"{check.message}: {n}" for check, n in zip(
                                checked.checks, failed, strict=True) if n))
            assert plan is not None
            if checked.carried:
                self._log_carried(plan, checked, row)
            else:
                self._log(plan, checked, failed, sources, row[FIRST])

    def _log_carried(self, plan: QueryPlan, checked: CheckedRows, row: Any) -> None:
        """Hand the failed rows the micro-batch's observation carried to the log, logged
        now."""
        rows = tuple(tuple((item["record"], item["cause"]) for item in row[f"{CARRIED}{i}"] or ()
                           if item is not None) for i in range(len(checked.checks)))
        if self._report is not None:
            self._report(CarriedRows(plan.query_id, checked, rows, int(time.time() * 1000)))

    def _log(self, plan: QueryPlan, checked: CheckedRows, failed: tuple[int, ...],
             sources: Sequence[tuple[str | None, str | None]], first: Any) -> None:
        """Hand the micro-batch's failed rows, with the offsets it read, to the log."""
        offsets = batch_offsets(sources, checked.topic, (int(first["partition"]), int(
            first["offset"])) if first else None, plan.earliest)
        steps = tuple(step for step in plan.steps if step.view in checked.reads)
        if self._report is not None and offsets is not None:
            self._report(FailedRows(plan.query_id, checked, steps, failed, *offsets))


__all__ = ["RecordErrors"]
