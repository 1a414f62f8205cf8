"""Which persistent queries may run in Spark's real-time mode.

A query asked to run in real-time mode (``metastore.query.real.time``, stored with it) runs as
one long Spark job per batch (``trigger(realTime=...)``): a task per source partition reads
and writes each record as it comes, and the batch checkpoints its offsets when it ends
(``metastore.query.real.time.batch.ms``). Spark 4.2 runs only stateless queries that way, from
Kafka into Kafka's own sink; so a query is accepted in real-time mode only when it reads one
stream, without aggregation or join, and its plan is that stream's read, decoding, filters and
projections into its sink; and at least once (an exactly-once query writes each micro-batch in
one transaction, which real-time batches have not). Validation refuses the others, with the
reason, before anything is written (:func:`check`); the runtime then needs a free task slot per
source partition (:mod:`metastore.runtime.real_time_slots`).
"""

from __future__ import annotations

from collections.abc import Mapping

from metastore.engine import overrides
from metastore.engine.analysis import Analysis
from metastore.planner.steps import QueryPlan
from metastore.sql.statements import SourceKind


def check(plan: QueryPlan, analysis: Analysis, query_config: Mapping[str, object]) -> str | None:
    """Why a query with ``query_config`` (its stored settings), analysed as ``analysis`` and
    planned as ``plan``, cannot run as it asks, in real-time mode; None when it can, or asks
    for micro-batches."""
    if overrides.real_time_batch_ms(query_config) is None:
        return None
    if overrides.exactly_once(query_config):
        return (f"{overrides.REAL_TIME} needs processing.guarantee at_least_once (the "
                "request's, or else the node's default): real-time batches are not written in "
                "transactions")
    problem = _stateful(analysis) or _keeps_state(plan)
    return None if problem is None else (
        f"{overrides.REAL_TIME} runs stateless queries only, and this one {problem}")


def _stateful(analysis: Analysis) -> str | None:
    """What of the query keeps state across records, as its user wrote it, or None."""
    if analysis.aggregate:
        return "aggregates"
    if analysis.joins:
        return "joins"
    if any(read.source.kind is SourceKind.TABLE for read in analysis.reads):
        return "reads a table"
    return None


def _keeps_state(plan: QueryPlan) -> str | None:
    """Whether ``plan`` is anything but one stream's read, decoding, filters and projections
    into its sink, in append mode: None when it is (whatever a later planner adds, a stateful
    step is refused here rather than by Spark when the query starts)."""
    reads = [step for step in plan.steps if step.topic is not None]
    if plan.batch is not None or plan.output_mode != "append" or plan.table_state \
            or plan.stream_state or len(reads) != 1 or not reads[0].streaming \
            or any(step.keyed is not None or step.watermark_ms is not None
                   for step in plan.steps):
        return "keeps state between records"
    return None


__all__ = ["check"]
