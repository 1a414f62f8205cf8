"""Where a node's persistent queries run and how far their state is behind, as ksqlDB's
``/clusterStatus`` reports each host's ``activeStandbyPerQuery`` and ``hostStoreLags``.

From the queries a node's heartbeat reports (:class:`metastore.runtime.runner.QueryState` as
JSON): each running query's source partitions are its active partitions; a query that keeps
state (an aggregation, a join: its last micro-batch reported state rows) has one store, named
after the query's sink in ``<query id>#<store>`` as ksqlDB keys its stores, whose lag per
source partition is the log end offset less the offset the query's last micro-batch reached.
There are no standbys: a query's state is in its checkpoint, which the next owner reads.

A table a node keeps materialized for pull queries (:mod:`metastore.runtime.materialized`) is a
store of that node too, ``<table>#materialized``, whose lag per partition is the topic's end
offset less the offset the store has read up to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STORE = "state"
"""The name of a query's one store: its Spark state (``<query id>#state``)."""
TABLE_STORE = "materialized"
"""The name of a table's store for pull queries (``<table>#materialized``)."""


def running(queries: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The queries of a heartbeat that run (well-formed entries only)."""
    return {str(query_id): state for query_id, state in queries.items()
            if isinstance(state, Mapping) and state.get("state") == "RUNNING"}


def active_standby(queries: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """ksqlDB's ``activeStandbyPerQuery`` of a host running ``queries``."""
    return {query_id: {"activeStores": [STORE] if _keeps_state(state) else [],
                       "activePartitions": [{"topic": topic, "partition": partition}
                                            for topic, partition, _ in _positions(state)],
                       "standByStores": [], "standByPartitions": []}
            for query_id, state in sorted(queries.items())}


def store_lags(queries: Mapping[str, Mapping[str, Any]], tables: Mapping[str, Any],
               updated_ms: int) -> dict[str, Any]:
    """ksqlDB's ``hostStoreLags`` of a host running ``queries`` and keeping ``tables``
    materialized (``{table: {partition: [read up to, end]}}``), as of ``updated_ms``. A
    query reading several topics sums their partitions of one number (ksqlDB's lags are per
    partition of a store)."""
    lags: dict[str, Any] = {}
    for table, partitions in sorted(tables.items()):
        if isinstance(partitions, Mapping):
            read = {str(p): _lag(marks[0], marks[1]) for p, marks in sorted(partitions.items())
                    if isinstance(marks, list) and len(marks) == 2
                    and all(isinstance(m, int) for m in marks)}
            lags[f"{table}#{TABLE_STORE}"] = {"lagByPartition": read, "size": len(read)}
    for query_id, state in sorted(queries.items()):
        if not _keeps_state(state):
            continue
        by_partition: dict[str, dict[str, int]] = {}
        for _topic, partition, (_start, current, end) in _positions(state):
            lag = by_partition.setdefault(str(partition), {
                "currentOffsetPosition": 0, "endOffsetPosition": 0, "offsetLag": 0})
            lag["currentOffsetPosition"] += current
            lag["endOffsetPosition"] += end
            lag["offsetLag"] += max(end - current, 0)
        lags[f"{query_id}#{STORE}"] = {"lagByPartition": by_partition,
                                       "size": len(by_partition)}
    return {"stateStoreLags": lags, "updateTimeMs": updated_ms}


def _lag(current: int, end: int) -> dict[str, int]:
    return {"currentOffsetPosition": current, "endOffsetPosition": end,
            "offsetLag": max(end - current, 0)}


def _keeps_state(state: Mapping[str, Any]) -> bool:
    statistics = state.get("statistics")
    return isinstance(statistics, Mapping) and statistics.get("stateRows") is not None


def _positions(state: Mapping[str, Any]) -> list[tuple[str, int, tuple[int, int, int]]]:
    """(topic, partition, (log start, consumer, log end)) of each source partition."""
    offsets = state.get("offsets")
    found: list[tuple[str, int, tuple[int, int, int]]] = []
    if not isinstance(offsets, Mapping):
        return found
    for topic, partitions in sorted(offsets.items()):
        if not isinstance(partitions, Mapping):
            continue
        for partition, marks in partitions.items():
            if (isinstance(marks, list) and len(marks) == 3 and str(partition).isdigit()
                    and all(isinstance(mark, int) for mark in marks)):
                found.append((str(topic), int(partition), (marks[0], marks[1], marks[2])))
    return sorted(found)


__all__ = ["active_standby", "running", "store_lags"]
