"""What the Spark runtime can run: a pure check of a persistent query, made at validation.

``runtime_problem(analysis, sink)`` depends only on the query's analysis (the parsed query and
the catalog sources it reads, :func:`metastore.catalog.analysis.analyse`) and the sink being
created or written, never on Kafka, Spark or the clock, so every node reaches the same verdict
and a statement accepted into the log is one the runtime can run. Supported: projections,
filters, the scalar functions of :data:`SCALAR_FUNCTIONS`, ``GROUP BY`` with the aggregates of
:data:`AGGREGATE_FUNCTIONS`, TUMBLING and HOPPING windows, ``PARTITION BY``, and stream-table
joins (inner or left, each joined source a table). Anything else is refused with the reason,
before it is written: :func:`check_runtime` is the
:class:`~metastore.catalog.validation.RuntimeCheck` a validator is given.
"""

from __future__ import annotations

from sqlglot import exp

from metastore.catalog.analysis import Analysis, function_name
from metastore.catalog.model import DataSource
from metastore.queries.exceptions import UnsupportedByRuntimeError
from metastore.spark.views import decode_problem
from metastore.sql import types as ty
from metastore.sql.statements import Query, SourceKind

SCALAR_FUNCTIONS = frozenset({
    "ABS", "ARRAY", "ARRAY_CONTAINS", "AS_VALUE", "CASE", "CAST", "CEIL", "COALESCE", "CONCAT",
    "CONCAT_WS", "EXP", "FLOOR", "GREATEST", "IF", "LEAST", "LENGTH", "LN", "LOWER", "NULLIF",
    "PAD", "REPLACE", "ROUND", "SPLIT", "SQRT", "SUBSTRING", "TRIM", "UPPER",
})
"""ksqlDB scalar functions whose Spark SQL transpilation has ksqlDB's meaning."""

AGGREGATE_FUNCTIONS = frozenset({
    "COUNT", "SUM", "MIN", "MAX", "AVG", "LATEST_BY_OFFSET", "EARLIEST_BY_OFFSET",
})

SINK_KEY_FORMATS = frozenset({"KAFKA", "JSON", "DELIMITED", "NONE"})
SINK_VALUE_FORMATS = frozenset({"KAFKA", "JSON", "DELIMITED"})
KAFKA_FORMAT_TYPES = (ty.INTEGER, ty.BIGINT, ty.STRING, ty.BYTES)
_REFUSED_NODES: dict[type[exp.Expr], str] = {
    exp.Subquery: "sub-queries", exp.Window: "OVER (...) window functions",
    exp.DPipe: "the || operator (use CONCAT)", exp.Lambda: "lambda functions",
}


def runtime_problem(analysis: Analysis, sink: DataSource) -> str | None:
    """Why the Spark runtime cannot run the analysed query into ``sink``, or None when it can."""
    query = analysis.query
    return _clauses(query) or _shape(analysis) or _expressions(query) or _sink(sink)


def check_runtime(analysis: Analysis, sink: DataSource) -> None:
    """Refuse, before it is written, a persistent query the Spark runtime could not run."""
    problem = runtime_problem(analysis, sink)
    if problem is not None:
        raise UnsupportedByRuntimeError(explain(problem), sink.name)


def explain(problem: str) -> str:
    return f"The Spark runtime cannot run this query: {problem}."


def _clauses(query: Query) -> str | None:
    select = query.select
    if query.emit_final:
        return "EMIT FINAL is not supported (results are emitted as they change)"
    if query.window is not None and query.window.kind not in ("TUMBLING", "HOPPING"):
        return f"{query.window.kind} windows are not supported (TUMBLING and HOPPING are)"
    if select.args.get("having") is not None:
        return "HAVING is not supported"
    if select.args.get("limit") is not None:
        return "LIMIT is not supported in a persistent query"
    if select.args.get("order") is not None:
        return "ORDER BY is not supported in a persistent query"
    if select.args.get("distinct") is not None:
        return "SELECT DISTINCT is not supported"
    return None


def _shape(analysis: Analysis) -> str | None:
    for read in analysis.reads:
        source = read.source
        problem = decode_problem(source)
        if problem is not None:
            return f"{source.name} cannot be read: {problem}"
        if source.timestamp_column is not None:
            column = source.column(source.timestamp_column)
            if column is not None and column.type == ty.STRING:
                return (f"{source.name}'s TIMESTAMP column {column.name} is a STRING "
                        "(TIMESTAMP_FORMAT); declare it BIGINT or TIMESTAMP")
    first = analysis.reads[0].source
    if not analysis.joins:
        if first.kind is SourceKind.TABLE:
            return (f"reading the changelog of TABLE {first.name} is not supported; a table can "
                    "be the right side of a stream-table join")
        return None
    if first.kind is SourceKind.TABLE:
        return "table-table joins are not supported (stream-table joins are)"
    for join in analysis.joins:
        if join.right.source.kind is SourceKind.STREAM:
            return "stream-stream joins are not supported (stream-table joins are)"
        side, kind = join.side, join.kind
        if side not in ("", "LEFT") or kind == "CROSS" or (kind == "OUTER" and side != "LEFT"):
            shown = " ".join(part for part in (side, kind) if part)
            return f"{shown} joins are not supported (INNER and LEFT are)"
    return None


def _expressions(query: Query) -> str | None:
    for node in query.select.walk():
        for refused, what in _REFUSED_NODES.items():
            if isinstance(node, refused):
                return f"{what} are not supported"
        if isinstance(node, exp.Func) and not isinstance(node, exp.Connector | exp.JSONExtract):
            name = function_name(node)
            if name in AGGREGATE_FUNCTIONS:
                args = [a for a in node.iter_expressions() if not isinstance(a, exp.Star)]
                if name in ("LATEST_BY_OFFSET", "EARLIEST_BY_OFFSET") and len(args) > 1:
                    return f"{name} with more than one argument is not supported"
                if name == "COUNT" and isinstance(node.this, exp.Distinct):
                    return "COUNT(DISTINCT ...) is not supported"
                continue
            if name not in SCALAR_FUNCTIONS:
                shown = name if name not in ("PAD",) else "LPAD/RPAD"
                return (f"the function {shown} is not supported (supported: "
                        f"{', '.join(sorted(SCALAR_FUNCTIONS | AGGREGATE_FUNCTIONS))})")
    return None


def _sink(sink: DataSource) -> str | None:
    if sink.key_format not in SINK_KEY_FORMATS:
        return f"the sink's key format {sink.key_format} cannot be written"
    if sink.value_format not in SINK_VALUE_FORMATS:
        return f"the sink's value format {sink.value_format} cannot be written"
    for side, fmt, columns in (("key", sink.key_format, sink.key_columns),
                               ("value", sink.value_format, sink.value_columns)):
        if fmt == "KAFKA":
            for column in columns:
                if column.type not in KAFKA_FORMAT_TYPES:
                    return (f"KAFKA {side}s of type {column.type.sql()} cannot be written "
                            "(INTEGER, BIGINT, STRING and BYTES can)")
        if fmt == "JSON":
            for column in columns:
                if not isinstance(column.type, ty.Primitive) and any(
                        nested in (ty.TIMESTAMP, ty.DATE, ty.TIME, ty.BYTES) or isinstance(
                            nested, ty.DecimalType) for nested in column.type.walk()):
                    return (f"column {column.name}: TIMESTAMP, DATE, TIME, BYTES and DECIMAL "
                            "values nested in ARRAY, MAP or STRUCT cannot be written as JSON")
    return None
