"""A query's figures from Spark's progress events: records per source topic, rates over the
last 30 s (as Kafka's metrics measure them: an idle query's fall to 0 as its records leave the
window), the last record's time, records written when Spark counts them or the query's own
writer says, state rows; the figures survive a heartbeat's JSON, and malformed JSON reads as
none."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from metastore.runtime import progress_listener
from metastore.runtime.statistics import RATE_WINDOW_MS, QueryFigures, QueryStatistics

STARTED_MS = 1_796_292_000_000
"""2026-12-03T10:00:00Z, the first micro-batch's start in these tests."""


def progress(name: str, records: int, *, written: int = -1, state_rows: int | None = None,
             timestamp: str = "2026-12-03T10:00:00.000Z", rate: float = 50.0,
             batch_id: int = 0) -> Any:
    source = SimpleNamespace(endOffset=json.dumps({"orders": {"0": records}}),
                             startOffset=None, numInputRows=records, inputRowsPerSecond=rate)
    operators = [] if state_rows is None else [SimpleNamespace(numRowsTotal=state_rows)]
    return SimpleNamespace(name=name, batchId=batch_id, timestamp=timestamp, sources=[source],
                           sink=SimpleNamespace(numOutputRows=written), batchDuration=120,
                           processedRowsPerSecond=rate * 2, stateOperators=operators,
                           observedMetrics={})


def test_progress_adds_up_per_source_topic_with_the_last_records_time() -> None:
    statistics = QueryStatistics()
    statistics.hear(progress("CSAS_A_1", 10, written=4))
    statistics.hear(progress("CSAS_A_1", 0, timestamp="2026-12-03T10:00:05.000Z", rate=0.0))
    figures = statistics.of("CSAS_A_1", now_ms=STARTED_MS + 6_000)
    assert figures is not None
    orders = figures.consumed["orders"]
    assert (orders.total, orders.per_second) == (10, round(10 * 1000 / RATE_WINDOW_MS, 2)), (
        "the window holds both micro-batches: an empty one does not zero the rate")
    assert orders.last_ms == STARTED_MS, "the last micro-batch that read a record"
    assert figures.produced is not None and figures.produced.total == 4
    assert (figures.batches, figures.batch_ms, figures.state_rows) == (2, 120, None)


def test_an_unknown_sink_count_and_state_rows_and_idleness() -> None:
    statistics = QueryStatistics()
    statistics.hear(progress("CTAS_B_2", 7, state_rows=3))
    figures = statistics.of("CTAS_B_2", now_ms=STARTED_MS + 120 + RATE_WINDOW_MS)
    assert figures is not None
    assert figures.produced is None, "a foreachBatch sink's records Spark does not count"
    assert figures.state_rows == 3
    assert figures.consumed["orders"].per_second == 0.0, "idle for 30 s after its batch ended"
    assert figures.consumed["orders"].total == 7
    statistics.forget("CTAS_B_2")
    assert statistics.of("CTAS_B_2") is None


def test_a_querys_own_writer_counts_what_spark_does_not() -> None:
    statistics = QueryStatistics()
    statistics.wrote("CSAS_F_6", 0, 6)  # an exactly-once writer, before the batch's progress
    statistics.wrote("CSAS_F_6", 1, 2)  # the next one's, before the first's progress is heard
    statistics.hear(progress("CSAS_F_6", 9))
    statistics.hear(progress("CSAS_F_6", 0, timestamp="2026-12-03T10:00:01.000Z"))
    figures = statistics.of("CSAS_F_6", now_ms=STARTED_MS + 2_000)
    assert figures is not None and figures.produced is not None
    assert figures.produced.total == 6, "each micro-batch's count with its own progress"
    assert figures.produced.per_second == round(6 * 1000 / RATE_WINDOW_MS, 2)
    statistics.hear(progress("CSAS_F_6", 3, batch_id=1))
    figures = statistics.of("CSAS_F_6", now_ms=STARTED_MS + 2_000)
    assert figures is not None and figures.produced is not None
    assert figures.produced.total == 8


def test_figures_survive_a_heartbeat_and_malformed_ones_read_as_none() -> None:
    statistics = QueryStatistics()
    statistics.hear(progress("CSAS_C_3", 5, written=5, state_rows=2))
    figures = statistics.of("CSAS_C_3")
    assert figures is not None
    carried = json.loads(json.dumps(figures.to_json()))
    assert QueryFigures.from_json(carried) == figures
    assert QueryFigures.from_json("nonsense") == QueryFigures()
    assert QueryFigures.from_json({"consumed": [1], "batches": None}) == QueryFigures()


def test_a_failing_part_costs_the_listeners_other_parts_nothing() -> None:
    statistics = QueryStatistics()

    def broken(_progress: Any) -> None:
        raise ValueError("a bug in one part")

    listener = progress_listener.listener(broken, statistics.hear)
    listener.onQueryStarted(SimpleNamespace(id="4f1c", name="CSAS_D_4"))
    listener.onQueryProgress(SimpleNamespace(progress=progress("CSAS_D_4", 5)))
    figures = statistics.of("CSAS_D_4")
    assert figures is not None and figures.consumed["orders"].total == 5


def test_a_topic_read_twice_in_one_micro_batch_counts_once() -> None:
    statistics = QueryStatistics()
    twice = progress("CSAS_E_5", 4)
    twice.sources = [*twice.sources, *twice.sources]  # a self-join
    statistics.hear(twice)
    figures = statistics.of("CSAS_E_5")
    assert figures is not None and figures.consumed["orders"].total == 4
