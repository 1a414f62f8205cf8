"""The task slots a node's real-time queries hold.

A query in Spark's real-time mode (:mod:`metastore.planner.real_time`) holds a task slot per
source partition for as long as it runs: with fewer free slots than partitions, Spark would read
some partitions and leave the others unread, silently. So a node starts a real-time query only
when its Spark has a slot for each of the query's source partitions beside those its other
real-time queries hold, and keeps one slot for everything else it runs in micro-batches (its
other queries, push and pull queries, the processing log). A node on ``local[1]`` therefore
runs none: the query is ERROR with the reason (a USER error: give the node more cores, with
``--spark-master local[N]`` or workers, or run the query in micro-batches), and is tried again
with the query's backoff, as a slot may have come free.
"""

from __future__ import annotations

import os
import re
import threading
from typing import TYPE_CHECKING

from metastore.planner.exceptions import RealTimeSlotsError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KEPT_SLOTS = 1
"""The slots a node keeps for what it runs in micro-batches."""


def task_slots(spark: SparkSession) -> int:
    """The tasks the node's Spark runs at once: its cores over ``spark.task.cpus``, where its
    cores are ``local[N]``'s N (``local[*]``: the machine's), else Spark's default parallelism
    (the cores of the executors registered now, at least 2, unless ``spark.default.parallelism``
    says otherwise)."""
    context = spark.sparkContext
    local = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", (context.master or "").strip())
    if local is None:
        cores = int(context.defaultParallelism)
    else:
        threads = local.group(1) or "1"
        cores = (os.cpu_count() or 1) if threads == "*" else int(threads)
    cores_per_task = int(context.getConf().get("spark.task.cpus", "1") or "1")
    return cores // max(cores_per_task, 1)


class RealTimeSlots:
    """The slots each running real-time query of a node holds."""

    def __init__(self) -> None:
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, query_id: str, needed: int, slots: int) -> None:
        """Hold ``needed`` of the node's ``slots`` for ``query_id`` (any it held before are
        given back first); raises :class:`RealTimeSlotsError` when they are not free."""
        with self._lock:
            self._held.pop(query_id, None)
            free = slots - KEPT_SLOTS - sum(self._held.values())
            if needed > free:
                raise RealTimeSlotsError(query_id, needed, max(free, 0), slots, KEPT_SLOTS)
            self._held[query_id] = needed

    def give_back(self, query_id: str) -> None:
        """``query_id`` stopped: its slots are free."""
        with self._lock:
            self._held.pop(query_id, None)

    def held(self) -> int:
        """The slots the node's real-time queries hold."""
        with self._lock:
            return sum(self._held.values())


__all__ = ["KEPT_SLOTS", "RealTimeSlots", "task_slots"]
