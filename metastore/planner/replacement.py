"""Whether a query's new plan can take over the checkpoint of the stored plan it replaces.

CREATE OR REPLACE keeps the query's id, so the new plan starts from the running query's
checkpoint: its source offsets, its Spark state and its keyed state. ksqlDB's own rules
(:mod:`metastore.engine.upgrades`) compare the two queries as ksqlDB plans them; this compares
the stored plans themselves, as Spark restores a checkpoint ("Recovery Semantics after Changes
in a Streaming Query" in Spark's guide): the same streaming reads in the same order, the same
keyed stateful operators with the same state layout (their classes, columns, windows, grace and
retention), and the same kind of state and output (the output mode, the batch stage, kept
table and stream state, a windowed sink's key). Filters and projections may change. A plan
written by an earlier planner version is compared the same way, so a release that keeps its
keyed state differently refuses the replacement instead of starting it on state it cannot read.
Spark's own stateful operators inside a plan's SQL (a streaming aggregation's buffers, a
stream-stream join's buffers) are not compared here: ksqlDB's rules refuse every replacement
that would change them within a release, and Spark checks their state's schema when the
replacement starts (the query is ERROR with Spark's reason if it differs).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from metastore.catalog.exceptions import UpgradeError
from metastore.planner.steps import KeyedOperator, QueryPlan, Step, streaming_topics


def check_replacement(running: QueryPlan, replacement: QueryPlan, sink: str) -> None:
    """Raise :class:`UpgradeError` when ``replacement`` cannot go on from the checkpoint of
    the plan ``running`` keeps."""
    for what, before, after in _kept(running, replacement):
        if before != after:
            raise UpgradeError(
                f"Query is not upgradeable. The running query's stored plan has {what} "
                f"{before}, the replacement's {after}: the replacement could not go on from the "
                "query's checkpoint. Drop the query and create it again, or create a new "
                "query.", sink)


def _kept(running: QueryPlan, replacement: QueryPlan) -> list[tuple[str, object, object]]:
    """What a checkpoint holds, in each plan: what must be equal."""
    return [
        ("the streaming reads", streaming_topics(running), streaming_topics(replacement)),
        ("the keyed state", _keyed(running), _keyed(replacement)),
        ("the output mode", running.output_mode, replacement.output_mode),
        ("a batch stage", running.batch is not None, replacement.batch is not None),
        ("table state", running.table_state, replacement.table_state),
        ("stream state", running.stream_state, replacement.stream_state),
        ("window key bytes", running.window_key_bytes, replacement.window_key_bytes),
    ]


def _steps(plan: QueryPlan) -> tuple[Step, ...]:
    return plan.steps + (plan.batch.steps if plan.batch is not None else ())


def _keyed(plan: QueryPlan) -> list[str]:
    """Each keyed operator with the fields its state depends on (not its views' names, which
    carry the query's id)."""
    return [_layout(step.keyed) for step in _steps(plan) if step.keyed is not None]


def _layout(operator: KeyedOperator) -> str:
    fields: dict[str, Any] = {field.name: getattr(operator, field.name)
                              for field in dataclasses.fields(operator)
                              if not field.name.endswith(("view", "views"))}
    shown = ", ".join(f"{name}={value!r}" for name, value in fields.items())
    return f"{type(operator).__name__}({shown})"
