"""What the Spark runtime can run: a pure check of a persistent query, made at validation.

``runtime_problem(analysis, sink)`` depends only on the query's analysis (the parsed query and
the catalog sources it reads, :func:`metastore.engine.analysis.analyse`) and the sink being
created or written, never on Kafka, Spark or the clock, so every node reaches the same verdict
and a statement accepted into the log is one the runtime can run. Supported: projections,
filters, every function :mod:`metastore.functions` declares a Spark translation for (scalar
functions, lambdas, and ``GROUP BY`` aggregates of streams and of tables, ``HAVING``), TUMBLING,
HOPPING and SESSION windows, projections and filters of windowed sources (their records keep
their windows), ``PARTITION BY``, stream-table joins (inner or left), stream-stream joins
(INNER, LEFT, RIGHT, FULL OUTER, with their WITHIN and GRACE PERIOD; of windowed streams
too; aggregated, but for an outer one with a GRACE PERIOD or beside another stream-stream
join, and EMIT FINAL) and table-table joins (on primary keys or a foreign key, whose
left table may have several key columns; aggregated too).
Anything else is refused with the reason, before it is written:
:func:`check_runtime` is the :class:`~metastore.engine.validation.RuntimeCheck` a validator is
given.
"""

from __future__ import annotations

from sqlglot import exp

from metastore.catalog.model import DataSource
from metastore.engine.analysis import Analysis
from metastore.formats.protobuf.schema import source_problem as protobuf_source_problem
from metastore.functions import library as functions
from metastore.functions.registry import UntranslatableError
from metastore.planner.exceptions import UnsupportedByRuntimeError
from metastore.planner.outer_at_once import at_once_join, stream_join_windows
from metastore.spark.views import KAFKA_TYPES, decode_problem
from metastore.sql.statements import Query, SourceKind

SINK_VALUE_FORMATS = frozenset({"KAFKA", "JSON", "DELIMITED", "PROTOBUF_NOSR", "PROTOBUF", "AVRO",
                                "JSON_SR"})
SINK_KEY_FORMATS = SINK_VALUE_FORMATS | {"NONE"}
KAFKA_FORMAT_TYPES = KAFKA_TYPES
_REFUSED_NODES: dict[type[exp.Expr], str] = {
    exp.Subquery: "sub-queries", exp.Window: "OVER (...) window functions",
    exp.DPipe: "the || operator (use CONCAT)",
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
    if query.emit_final and query.window is None:
        return "EMIT FINAL is supported for windowed aggregations only"
    if query.window is not None and query.window.kind == "SESSION" and query.select.args.get(
            "joins"):
        return "SESSION windows over a join are not supported"
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
    problem = _windowed_source_problem(analysis)
    if problem is not None or not analysis.joins:
        return problem
    if analysis.reads[0].source.kind is SourceKind.TABLE:
        return _table_joins(analysis)
    windows = {window.join for window in analysis.query.join_windows}
    for index, join in enumerate(analysis.joins):
        side, kind = join.side, join.kind
        shown = " ".join(part for part in (side, kind) if part)
        if join.right.source.kind is SourceKind.STREAM:
            problem = _stream_join_problem(analysis, index in windows, side, kind, shown)
            if problem is not None:
                return problem
        elif side not in ("", "LEFT") or kind == "CROSS" or (kind == "OUTER" and side != "LEFT"):
            return f"{shown} joins of a table are not supported (INNER and LEFT are)"
    return None


def _windowed_source_problem(analysis: Analysis) -> str | None:
    """A windowed source's records keep their windows only through a projection."""
    windowed = next((read.source for read in analysis.reads if read.source.window is not None),
                    None)
    if windowed is None:
        return None
    tables = [read.source for read in analysis.reads if read.source.kind is SourceKind.TABLE]
    if analysis.joins and tables:  # both sides are windowed, or the join is refused
        return f"joins of a windowed table ({tables[0].name}) are not supported"
    if analysis.aggregate:
        return f"aggregating a windowed source ({windowed.name}) is not supported"
    if analysis.query.partition_by:
        return f"PARTITION BY over a windowed source ({windowed.name}) is not supported"
    return None


def _stream_join_problem(analysis: Analysis, within: bool, side: str | None, kind: str | None,
                         shown: str) -> str | None:
    if not within:
        return "a stream-stream join needs a WITHIN clause"
    if kind == "CROSS":
        return f"{shown} joins are not supported"
    if analysis.aggregate and analysis.query.emit_final:
        return "EMIT FINAL over a stream-stream join is not supported"
    if analysis.aggregate and side and at_once_join(
            analysis, stream_join_windows(analysis)) is None:
        return ("aggregating an outer stream-stream join with a GRACE PERIOD, or with "
                "another stream-stream join, is not supported (Spark writes such a "
                "join's unmatched records in append output mode only)")
    return None


def _table_joins(analysis: Analysis) -> str | None:
    """Table-table joins run on the tables' primary keys or a foreign key (each micro-batch
    joins again the keys it changed), aggregated or not."""
    for join in analysis.joins:
        if join.kind == "CROSS":
            return "CROSS joins are not supported"
        if len(join.right.source.key_columns) != 1:
            return "a table-table join of a table without one key column is not supported"
    if len(analysis.reads[0].source.key_columns) != 1 and not analysis.foreign_key_join:
        # a foreign-key join's left rows are keyed by all their key columns
        return "a table-table join of a table without one key column is not supported"
    return None


def _expressions(query: Query) -> str | None:
    """Why some expression has no Spark translation: a refused construct, a function declared
    without one, or a call whose arguments its translation refuses (a dry run of the planner's
    translation, on a copy)."""
    select = query.select
    outside = [select.args.get(clause) for clause in ("where", "group", "having", "joins")]
    for clause in [*outside, *query.partition_by]:
        for node in clause.walk() if isinstance(clause, exp.Expr) else (
                n for part in clause or [] for n in part.walk()):
            if functions.is_table_function(node):
                return (f"Table functions ({functions.function_name(node)}) are only supported "
                        "in the SELECT projection")
    trees: list[exp.Expr] = [query.select, *query.partition_by]
    for tree in trees:
        for node in tree.walk():
            for refused, what in _REFUSED_NODES.items():
                if isinstance(node, refused):
                    return f"{what} are not supported"
            if isinstance(node, exp.Anonymous):
                name = functions.function_name(node)
                problem = functions.spark_problem(name)
                if problem is not None:
                    return problem
                if name == "COUNT" and any(isinstance(a, exp.Distinct) for a in node.expressions):
                    return "COUNT(DISTINCT ...) is not supported (COUNT_DISTINCT is)"
    context = functions.SparkContext(row_offset=exp.column("ROWOFFSET"))
    try:
        for tree in trees:
            functions.to_spark(tree.copy(), context)
    except UntranslatableError as error:
        return str(error)
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
                            "(INTEGER, BIGINT, DOUBLE, STRING and BYTES can)")
    problem = protobuf_source_problem(sink)
    if problem is not None:
        return f"the sink cannot be written: {problem}"
    return None
