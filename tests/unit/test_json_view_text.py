"""The text of a JSON source's view grows with its nesting linearly, so that a wide nested
schema, the processing log's among them, fits the view text a persistent (Hive) catalog keeps."""

from __future__ import annotations

import itertools

from metastore.runtime.processing_log_settings import ProcessingLogSettings
from metastore.spark.views import decode_select
from metastore.testing.check import run_script

HIVE_VIEW_TEXT = 32_700
"""The longest view text Hive's metastore keeps on Derby (LONG VARCHAR): a longer one fails the
view's creation, and with it the node's Spark catalog projection."""


def _view_text(statement: str, name: str) -> str:
    _, image = run_script(statement)
    source = image.source(name)
    assert source is not None
    return decode_select(source, "db.raw")


def _nested(depth: int) -> int:
    sql_type = "INT"
    for _ in range(depth):
        sql_type = f"STRUCT<A INT, B {sql_type}, C STRING>"
    return len(_view_text(f"CREATE STREAM S (K INT KEY, V {sql_type}) WITH (KAFKA_TOPIC='s', "
                          "VALUE_FORMAT='JSON', PARTITIONS=1);", "S"))


def test_each_level_of_nesting_adds_the_same_text() -> None:
    sizes = [_nested(depth) for depth in range(1, 9)]
    steps = {later - earlier for earlier, later in itertools.pairwise(sizes)}
    assert len(steps) == 1, sizes  # the parent object is named once, not written out again


def test_the_processing_log_stream_fits_a_hive_catalog() -> None:
    settings = ProcessingLogSettings()
    text = _view_text(settings.stream_statement("service_"), settings.stream_name)
    assert len(text) < HIVE_VIEW_TEXT / 2
