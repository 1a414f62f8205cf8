"""ksqlDB's check that a query replacing another (CREATE OR REPLACE ... AS SELECT) keeps its
stream aggregation (``StreamAggregate.validateUpgrade``): the aggregate step's state is kept
across the replacement, so the columns it keeps besides the aggregates and its aggregate calls
must not change. ksqlDB checks it when it registers the new query, after the statement's other
checks. Windowed aggregations and table aggregations are other steps (not compared here).
"""

from __future__ import annotations

from metastore.catalog.analysis import Analysis
from metastore.catalog.exceptions import QueryError
from metastore.sql.statements import SourceKind


def check_aggregate_upgrade(old: Analysis, new: Analysis) -> None:
    """Raise ksqlDB's error when ``new`` cannot replace ``old``'s stream aggregation."""
    before, after = old.aggregate_step, new.aggregate_step
    if before is None or after is None or not (_stream_aggregation(old)
                                               and _stream_aggregation(new)):
        return
    for what, a, b in (("columns not part of aggregate", before.required_columns,
                        after.required_columns),
                       ("aggregate functions", before.functions, after.functions)):
        if a != b:
            shown = [f"[{', '.join(_quoted(what, x) for x in v)}]" for v in (a, b)]
            raise QueryError("Query is not upgradeable. Plan step of type StreamAggregate must "
                             f"have matching {what}. Values differ: {shown[0]} vs. {shown[1]}")


def _stream_aggregation(analysis: Analysis) -> bool:
    return (analysis.windowing is None
            and all(r.source.kind is SourceKind.STREAM for r in analysis.reads))


def _quoted(what: str, text: str) -> str:
    return f"`{text}`" if what.startswith("columns") else text
