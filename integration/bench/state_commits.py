"""`state-commits`: how a micro-batch commits its RocksDB keyed state, as snapshots of the
stores' files or as changelogs of what it changed (a node's way since 2026-12-04,
:data:`metastore.runtime.job.CHANGELOG_CHECKPOINTING`).

The keyed plans of ``stateful``'s three queries (SESSION, EMIT FINAL, LEFT JOIN of streams
without grace), each run by :func:`metastore.runtime.job.start` in one ``local[1]`` session
like a node's over a backlog of 20,000 records (5,000 with ``--quick``), then 8 rounds of 1,000
(4 with ``--quick``), each round a run of what the topic holds on the query's checkpoint. Both
ways in each of two trials, in turn and then the other way round, so that a drift of the
machine weighs on both. A round's figure is its micro-batches' ``triggerExecution``; printed:
each query's and way's median round.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from integration.bench import stateful
from integration.bench.common import kafka
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings

WAYS = ("snapshot", "changelog")
UNSET = "spark.sql.metastore.bench.unset"
"""The setting a snapshot round sets instead of changelog checkpointing (which is off unless
set)."""


def _plan(bootstrap: str, name: str, statement: str) -> tuple[Any, tuple[str, str]]:
    stamp = f"{name}-{time.time_ns()}"
    topics = (f"left-{stamp}", f"right-{stamp}")
    admin = Admin(KafkaSettings(bootstrap))
    for topic in (*topics, f"out-{stamp}"):
        admin.create(topic, 1)
    image = stateful.accepted(stateful.STREAMS.format(left=topics[0], right=topics[1])
                              + statement.format(plan="KEYED", sink=f"out-{stamp}"))
    return stateful.plan_of(image, "OUT_KEYED"), topics


def _rounds(spark: Any, bootstrap: str, root: Path, name: str, statement: str,
            sizes: list[int]) -> list[float]:
    """Seconds of each round after the backlog."""
    plan, topics = _plan(bootstrap, name, statement)
    checkpoint = root / f"{name}-{time.time_ns()}"
    seconds = []
    for number, size in enumerate(sizes):
        stateful.produce(bootstrap, topics, sum(sizes[:number]), size)
        seconds.append(stateful.run_round(spark, plan, checkpoint, bootstrap))
    return seconds[1:]


def run(quick: bool) -> dict[str, Any]:
    from metastore.runtime import job
    from metastore.spark.session import start_session

    sizes = [5_000, *[1_000] * 4] if quick else [20_000, *[1_000] * 8]
    changelog = job.CHANGELOG_CHECKPOINTING
    found: dict[str, dict[str, list[float]]] = {name: {} for name in stateful.QUERIES}
    with kafka() as bootstrap, tempfile.TemporaryDirectory(prefix="metastore-bench-") as root:
        spark = start_session("local[1]", "bench-state-commits", Path(root) / "spark")
        try:
            for trial in (WAYS, WAYS[::-1]):
                for way in trial:
                    job.CHANGELOG_CHECKPOINTING = changelog if way == "changelog" else UNSET
                    for name, statement in stateful.QUERIES.items():
                        print(f"state-commits: {name}, {way}", file=sys.stderr, flush=True)
                        found[name].setdefault(way, []).extend(
                            _rounds(spark, bootstrap, Path(root), name, statement, sizes))
        finally:
            job.CHANGELOG_CHECKPOINTING = changelog
            spark.stop()
    return {"backlog": sizes[0], "rounds_per_trial": len(sizes) - 1, "records_per_round": 1_000,
            **{name: {way: {"round_p50_ms": round(statistics.median(values) * 1000),
                            "samples_ms": [round(v * 1000) for v in values]}
                      for way, values in ways.items()} for name, ways in found.items()}}
