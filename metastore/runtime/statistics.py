"""What each persistent query has done on this node, from Spark's progress of its micro-batches.

Per query: the records it read from each source topic (in all, per second over the last
:data:`RATE_WINDOW_MS`, and when it last read one), the records it wrote when they are counted (Spark's
Kafka sink counts its own; an exactly-once query's writer, or a batch stage's, tells
:meth:`QueryStatistics.wrote`),
its last micro-batch's duration and the rows its state keeps. :class:`QueryStatistics` adds up
the progress events of the queries' listeners (:mod:`metastore.runtime.progress_listener`); an
idle query's rates fall to 0 as its last records leave the window.

The owner publishes its queries' figures in its heartbeat with their states, so that any node
reports them (DESCRIBE EXTENDED, SHOW QUERIES, ``metastore status``), and its own
``/metrics`` exports them per query.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from metastore.runtime import progress_listener

RATE_WINDOW_MS = 30_000
"""A rate is the records of the micro-batches that ended in the last 30 s, over 30 s: as
Kafka's metrics measure one (ksqlDB's ``messages-per-sec``, over 30 s samples), so it does not
fall to 0 between two micro-batches."""


_KEPT_BATCHES = 10_000
"""The micro-batches a flow keeps for its rate at most, should nobody measure it."""


@dataclass
class Flow:
    """Records through one topic: in all, per second (:data:`RATE_WINDOW_MS`, as of
    :meth:`measure`), the last one's time (epoch ms, its micro-batch's start)."""

    total: int = 0
    per_second: float = 0.0
    last_ms: int | None = None
    recent: list[tuple[int, int]] = field(default_factory=list, compare=False, repr=False)
    """Each micro-batch's end (epoch ms) and records, of those the window may still hold."""

    def add(self, records: int, at_ms: int | None, took_ms: int = 0) -> None:
        """Add a micro-batch's ``records``, one that started at ``at_ms`` and took ``took_ms``."""
        self.total += records
        if at_ms is not None:
            self.recent.append((at_ms + took_ms, records))
            if len(self.recent) > _KEPT_BATCHES:
                del self.recent[0]
            if records > 0:
                self.last_ms = at_ms

    def measure(self, now_ms: int) -> None:
        """Set :attr:`per_second` to the rate of the window that ends at ``now_ms``."""
        start = now_ms - RATE_WINDOW_MS
        self.recent = [(at, records) for at, records in self.recent if at > start]
        self.per_second = sum(records for _, records in self.recent) * 1000 / RATE_WINDOW_MS

    def to_json(self) -> dict[str, Any]:
        return {"total": self.total, "perSecond": round(self.per_second, 2),
                "lastMs": self.last_ms}

    @staticmethod
    def from_json(data: Any) -> Flow:
        if not isinstance(data, dict):
            return Flow()
        last = data.get("lastMs")
        return Flow(int(data.get("total") or 0), float(data.get("perSecond") or 0.0),
                    int(last) if isinstance(last, int | float) else None)


@dataclass
class QueryFigures:
    """One query's figures on this node."""

    consumed: dict[str, Flow] = field(default_factory=dict)
    """By source topic."""
    produced: Flow | None = None
    """Records written to its sink, when they are counted (not by a push query)."""
    batches: int = 0
    batch_ms: int | None = None
    state_rows: int | None = None

    def consumed_total(self) -> float:
        return float(sum(flow.total for flow in self.consumed.values()))

    def consumed_per_second(self) -> float:
        return sum(flow.per_second for flow in self.consumed.values())

    def produced_total(self) -> float | None:
        return float(self.produced.total) if self.produced is not None else None

    def produced_per_second(self) -> float | None:
        return self.produced.per_second if self.produced is not None else None

    def batch_seconds(self) -> float | None:
        return self.batch_ms / 1000 if self.batch_ms is not None else None

    def kept_rows(self) -> float | None:
        return float(self.state_rows) if self.state_rows is not None else None

    def to_json(self) -> dict[str, Any]:
        return {"consumed": {topic: flow.to_json() for topic, flow in sorted(self.consumed.items())},
                "produced": self.produced.to_json() if self.produced is not None else None,
                "batches": self.batches, "batchMs": self.batch_ms, "stateRows": self.state_rows}

    @staticmethod
    def from_json(data: Any) -> QueryFigures:
        """Figures a heartbeat carried (anything malformed reads as none)."""
        if not isinstance(data, dict):
            return QueryFigures()
        consumed = data.get("consumed")
        produced = data.get("produced")
        return QueryFigures(
            consumed={str(t): Flow.from_json(f) for t, f in consumed.items()}
            if isinstance(consumed, dict) else {},
            produced=Flow.from_json(produced) if isinstance(produced, dict) else None,
            batches=int(data.get("batches") or 0), batch_ms=_int_or_none(data.get("batchMs")),
            state_rows=_int_or_none(data.get("stateRows")))


class QueryStatistics:
    """Figures of this node's persistent queries, by query id (a Spark query's name)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._figures: dict[str, QueryFigures] = {}
        self._written: dict[tuple[str, int], int] = {}
        """Records a query's own writer wrote, by query and micro-batch, until its progress."""

    def of(self, query: str, now_ms: int | None = None) -> QueryFigures | None:
        """A copy of ``query``'s figures, its rates those of the window ending ``now_ms``
        (now), or None before its first micro-batch here."""
        at = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            figures = self._figures.get(query)
            if figures is None:
                return None
            for flow in (*figures.consumed.values(), figures.produced):
                if flow is not None:
                    flow.measure(at)
            return QueryFigures.from_json(figures.to_json())

    def forget(self, query: str) -> None:
        """``query`` no longer runs here (terminated, dropped, or moved to another node): its
        counts start from 0 if it runs here again."""
        with self._lock:
            self._figures.pop(query, None)
            self._written = {key: n for key, n in self._written.items() if key[0] != query}

    def wrote(self, query: str, batch_id: int, records: int) -> None:
        """``query``'s own writer (not Spark's Kafka sink) wrote ``records`` in micro-batch
        ``batch_id``, whose progress comes later."""
        with self._lock:
            self._written[query, batch_id] = records

    def hear(self, progress: Any) -> None:
        """Add one micro-batch's progress (PySpark's ``StreamingQueryProgress``)."""
        name = progress.name
        if not name:
            return
        at_ms = progress_listener.started_ms(progress)
        took_ms = int(progress.batchDuration or 0)
        with self._lock:
            figures = self._figures.setdefault(name, QueryFigures())
            read: dict[str, int] = {}
            for source in progress.sources or []:  # a self-join reads one topic twice
                topic = _topic(source.endOffset)
                if topic is not None and topic not in read:
                    read[topic] = int(source.numInputRows or 0)
            for topic, records in read.items():
                figures.consumed.setdefault(topic, Flow()).add(records, at_ms, took_ms)
            sink = progress.sink
            written = getattr(sink, "numOutputRows", -1) if sink is not None else -1
            if written is None or written < 0:  # a foreachBatch sink's: its writer's count
                written = self._written.pop((name, int(progress.batchId)), -1)
            if written is not None and written >= 0:
                figures.produced = figures.produced or Flow()
                figures.produced.add(int(written), at_ms, took_ms)
            figures.batches += 1
            figures.batch_ms = took_ms
            operators = progress.stateOperators or []
            figures.state_rows = (sum(int(o.numRowsTotal or 0) for o in operators)
                                  if operators else None)


def _topic(end_offset: Any) -> str | None:
    """The topic a Kafka source's end offsets (Spark's JSON) name."""
    try:
        offsets = json.loads(end_offset) if isinstance(end_offset, str) else end_offset
    except ValueError:
        return None
    return next(iter(offsets), None) if isinstance(offsets, dict) else None


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


__all__ = ["Flow", "QueryFigures", "QueryStatistics"]
