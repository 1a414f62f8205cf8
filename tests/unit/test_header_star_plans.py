"""SELECT * selects a source's header columns; a query written before it did keeps its sink's
columns, since every node compiles a running query's plan again from its stored SELECT."""

from __future__ import annotations

from dataclasses import replace

from metastore.planner.plan import compile_query
from metastore.testing.check import run_script

SCRIPT = ("CREATE STREAM HS (A INT KEY, B INT, H ARRAY<STRUCT<KEY STRING, VALUE BYTES>> HEADERS) "
          "WITH (kafka_topic='hs', value_format='JSON');"
          "CREATE STREAM X AS SELECT * FROM HS;")


def test_select_star_writes_the_header_column_into_the_sink() -> None:
    results, image = run_script(SCRIPT)
    assert all(r.ok for r in results), results
    assert [c.name for c in image.sources["X"].value_columns] == ["B", "H"]
    plan = compile_query(next(iter(image.queries.values())), image)
    assert "named_struct('B', `B`, 'H', transform(`H`" in plan.sql  # BYTES as base64


def test_a_sink_written_before_keeps_its_columns() -> None:
    _results, image = run_script(SCRIPT)
    sink = image.sources["X"]
    older = replace(sink, columns=tuple(c for c in sink.columns if c.name != "H"))
    image = replace(image, sources={**image.sources, "X": older})
    plan = compile_query(next(iter(image.queries.values())), image)
    assert "named_struct('B', `B`)" in plan.sql
