"""A query's figures from Spark's progress events: records per source topic, rates, the last
record's time, records written when Spark counts them, state rows; idle rates fall to 0 (the
listener knows an idle query by its id); the figures survive a heartbeat's JSON, and
malformed JSON reads as none."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from metastore.runtime import progress_listener
from metastore.runtime.statistics import QueryFigures, QueryStatistics


def progress(name: str, records: int, *, written: int = -1, state_rows: int | None = None,
             timestamp: str = "2026-12-03T10:00:00.000Z", rate: float = 50.0) -> Any:
    source = SimpleNamespace(endOffset=json.dumps({"orders": {"0": records}}),
                             startOffset=None, numInputRows=records, inputRowsPerSecond=rate)
    operators = [] if state_rows is None else [SimpleNamespace(numRowsTotal=state_rows)]
    return SimpleNamespace(name=name, timestamp=timestamp, sources=[source],
                           sink=SimpleNamespace(numOutputRows=written), batchDuration=120,
                           processedRowsPerSecond=rate * 2, stateOperators=operators,
                           observedMetrics={})


def test_progress_adds_up_per_source_topic_with_the_last_records_time() -> None:
    statistics = QueryStatistics()
    statistics.hear(progress("CSAS_A_1", 10, written=4))
    statistics.hear(progress("CSAS_A_1", 0, timestamp="2026-12-03T10:00:05.000Z", rate=0.0))
    figures = statistics.of("CSAS_A_1")
    assert figures is not None
    orders = figures.consumed["orders"]
    assert (orders.total, orders.per_second) == (10, 0.0)
    assert orders.last_ms == 1_796_292_000_000, "the last micro-batch that read a record"
    assert figures.produced is not None and figures.produced.total == 4
    assert (figures.batches, figures.batch_ms, figures.state_rows) == (2, 120, None)


def test_an_unknown_sink_count_and_state_rows_and_idleness() -> None:
    statistics = QueryStatistics()
    statistics.hear(progress("CTAS_B_2", 7, state_rows=3))
    statistics.idle("CTAS_B_2")
    figures = statistics.of("CTAS_B_2")
    assert figures is not None
    assert figures.produced is None, "an exactly-once writer's records are not counted by Spark"
    assert figures.state_rows == 3
    assert figures.consumed["orders"].per_second == 0.0
    statistics.forget("CTAS_B_2")
    assert statistics.of("CTAS_B_2") is None


def test_figures_survive_a_heartbeat_and_malformed_ones_read_as_none() -> None:
    statistics = QueryStatistics()
    statistics.hear(progress("CSAS_C_3", 5, written=5, state_rows=2))
    figures = statistics.of("CSAS_C_3")
    assert figures is not None
    carried = json.loads(json.dumps(figures.to_json()))
    assert QueryFigures.from_json(carried) == figures
    assert QueryFigures.from_json("nonsense") == QueryFigures()
    assert QueryFigures.from_json({"consumed": [1], "batches": None}) == QueryFigures()


def test_the_listener_names_an_idle_query_by_its_id_and_a_failing_part_costs_no_other() -> None:
    statistics = QueryStatistics()

    def broken(_progress: Any) -> None:
        raise ValueError("a bug in one part")

    listener = progress_listener.listener(broken, statistics.hear, idle=statistics.idle)
    listener.onQueryStarted(SimpleNamespace(id="4f1c", name="CSAS_D_4"))
    listener.onQueryProgress(SimpleNamespace(progress=progress("CSAS_D_4", 5)))
    listener.onQueryIdle(SimpleNamespace(id="4f1c"))  # Spark's idle event has no name
    figures = statistics.of("CSAS_D_4")
    assert figures is not None and figures.consumed["orders"].total == 5
    assert figures.consumed["orders"].per_second == 0.0


def test_a_topic_read_twice_in_one_micro_batch_counts_once() -> None:
    statistics = QueryStatistics()
    twice = progress("CSAS_E_5", 4)
    twice.sources = [*twice.sources, *twice.sources]  # a self-join
    statistics.hear(twice)
    figures = statistics.of("CSAS_E_5")
    assert figures is not None and figures.consumed["orders"].total == 4
