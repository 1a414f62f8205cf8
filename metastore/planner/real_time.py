"""Which persistent queries may run in Spark's real-time mode.

A query asked to run in real-time mode (``metastore.query.real.time``, stored with it) runs as
one long Spark job per batch (``trigger(realTime=...)``): a task per source partition reads
and writes each record as it comes, and the batch checkpoints its offsets when it ends
(``metastore.query.real.time.batch.ms``). Spark 4.2 runs only stateless queries that way, from
Kafka into Kafka's own sink; so a query is accepted in real-time mode only when its plan is
a streaming read, decoding, filters and projections into its sink: no keyed state, no
aggregation, no batch stage (a join of streams), and at least once (an
exactly-once query writes each micro-batch in one transaction, which real-time batches have
not). Validation refuses the others, with the reason, before anything is written
(:func:`check`); the runtime then needs a free task slot per source partition
(:mod:`metastore.runtime.real_time_slots`).
"""

from __future__ import annotations

from collections.abc import Mapping

from metastore.engine import overrides
from metastore.planner.steps import QueryPlan


def check(plan: QueryPlan, query_config: Mapping[str, object]) -> str | None:
    """Why a query with ``query_config`` (its stored settings) and ``plan`` cannot run as it
    asks, in real-time mode; None when it can, or asks for micro-batches."""
    if overrides.real_time_batch_ms(query_config) is None:
        return None
    if overrides.exactly_once(query_config):
        return (f"{overrides.REAL_TIME} needs processing.guarantee at_least_once: real-time "
                "batches are not written in transactions")
    problem = _stateful(plan)
    return None if problem is None else (
        f"{overrides.REAL_TIME} runs stateless queries only, and this one {problem}")


def _stateful(plan: QueryPlan) -> str | None:
    """What in ``plan`` keeps state across records, or None."""
    if plan.batch is not None:
        return "runs a batch stage in each micro-batch"
    if plan.output_mode != "append":
        return "aggregates"
    if plan.table_state or plan.stream_state or any(step.keyed for step in plan.steps):
        return "keeps keyed state"
    return None


__all__ = ["check"]
