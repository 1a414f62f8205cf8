"""The CLI's DESCRIBE text names each query beside the source, with its processing guarantee
when the query runs exactly-once."""

from __future__ import annotations

import pytest

from cli.render import render_description


def test_describe_names_an_exactly_once_writer_with_its_guarantee(
        capsys: pytest.CaptureFixture[str]) -> None:
    render_description({
        "name": "ORDERS", "type": "STREAM", "topic": "orders", "partitions": 2,
        "keyFormat": "KAFKA", "valueFormat": "JSON", "fields": [],
        "readQueries": [{"id": "CSAS_AFTER_3", "processingGuarantee": "at_least_once"}],
        "writeQueries": [{"id": "CSAS_ORDERS_1", "processingGuarantee": "exactly_once_v2"}]})
    printed = capsys.readouterr().out
    assert "Queries that read from this source: CSAS_AFTER_3\n" in printed
    assert "Queries that write into this source: CSAS_ORDERS_1 (exactly_once_v2)\n" in printed
