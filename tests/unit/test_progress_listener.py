"""A query's progress as the listener hands it on: PySpark's event read from Spark's JSON text
of it (a text written by Spark 4.2, with a Kafka source's offsets)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from metastore.runtime.progress_listener import progress_event, source_offsets

SOURCE = {"description": "KafkaV2[Subscribe[events]]",
          "startOffset": {"events": {"0": 5, "1": 7}}, "endOffset": {"events": {"0": 6, "1": 9}},
          "latestOffset": {"events": {"0": 6, "1": 9}}, "numInputRows": 3,
          "inputRowsPerSecond": 5.0, "processedRowsPerSecond": 11.6,
          "metrics": {"avgOffsetsBehindLatest": "0.0"}}
EVENT: dict[str, Any] = {"progress": {
    "id": "06e2d810-291b-435d-99a7-898fc1d75a60", "runId": "df06c1c0-cd61-4465-a38c-d32e98a78bfc",
    "name": "CSAS_OUT_1", "timestamp": "2026-12-04T17:08:04.000Z", "batchId": 3,
    "batchDuration": 432, "numInputRows": 3, "inputRowsPerSecond": 5.0,
    "processedRowsPerSecond": 11.6,
    "durationMs": {"addBatch": 306, "queryPlanning": 97, "triggerExecution": 431},
    "stateOperators": [], "sources": [SOURCE],
    "sink": {"description": "KafkaTable", "numOutputRows": 2},
    "observedMetrics": {"checked": {"failed0": 2, "first": {"partition": 1, "offset": 28}}}}}


def test_a_progress_reads_as_the_parts_that_add_it_up_read_it() -> None:
    progress = progress_event(json.dumps(EVENT)).progress
    assert (progress.name, progress.batchId, progress.numInputRows) == ("CSAS_OUT_1", 3, 3)
    assert progress.durationMs["triggerExecution"] == 431
    assert progress.sink.numOutputRows == 2
    [(start, end)] = source_offsets(progress)
    assert json.loads(start or "") == {"events": {"0": 5, "1": 7}}
    assert json.loads(end or "") == {"events": {"0": 6, "1": 9}}
    checked = progress.observedMetrics["checked"]
    assert checked["failed0"] == 2
    assert (checked["first"]["partition"], checked["first"]["offset"]) == (1, 28)


def test_a_source_rate_spark_leaves_out_is_not_a_number() -> None:
    """Spark writes no rate that is not finite (two triggers in one millisecond)."""
    event = json.loads(json.dumps(EVENT))
    del event["progress"]["sources"][0]["inputRowsPerSecond"]
    del event["progress"]["sources"][0]["processedRowsPerSecond"]
    [source] = progress_event(json.dumps(event)).progress.sources
    assert math.isnan(source.inputRowsPerSecond) and math.isnan(source.processedRowsPerSecond)
    assert source.numInputRows == 3


def test_a_first_micro_batch_has_no_start_offsets() -> None:
    event = json.loads(json.dumps(EVENT))
    event["progress"]["sources"][0]["startOffset"] = None
    [(start, _end)] = source_offsets(progress_event(json.dumps(event)).progress)
    assert json.loads(start or "null") is None


def test_text_that_is_not_an_event_is_refused() -> None:
    with pytest.raises((KeyError, ValueError)):
        progress_event('{"progress": {"id": "x"}}')
