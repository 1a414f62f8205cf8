"""ksqlDB's rules on what a query may do with the sources it reads, checked once its sources and
columns are known and before its expressions are planned (its ``Analyzer.validate``,
``Analyzer``'s table-function visitor, ``PushQueryValidator`` and ``QueryAnalyzer``), in that
order:

- table functions (``EXPLODE``...) in the SELECT do not nest, do not combine with aggregation
  and are not inside a CASE;
- a source with the KAFKA value format cannot be joined nor grouped (both need a repartition or
  changelog topic, which KAFKA values cannot carry);
- a persistent query does not read a windowed table;
- a table function does not read a table (its FROM source).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlglot import exp

from metastore.catalog.exceptions import QueryError
from metastore.catalog.model import DataSource
from metastore.functions import library as functions
from metastore.sql.statements import SourceKind

KAFKA_VALUE_FORMAT_LIMITATION = (
    "The KAFKA format is primarily intended for use as a key format. It can be used as a value "
    "format, but can not be used in any operation that requires a repartition or changelog "
    "topic.\nRemoving this limitation requires enhancements to the core of KSQL. This will come "
    "in a future release. Until then, avoid using the KAFKA format for values.\nIf you have an "
    "existing topic with KAFKA formatted values you can duplicate the data and serialize using "
    "Avro or JSON with a statement such as: \n\n'CREATE STREAM <new-stream-name> "
    "WITH(VALUE_FORMAT='Avro') AS SELECT * FROM <existing-kafka-formated-stream-name>;'\nFor "
    "more info see https://github.com/confluentinc/ksql/issues/3060")


def check_sources(reads: Sequence[tuple[str, DataSource]], select: Sequence[exp.Expr],
                  grouped: bool, joined: bool, persistent: bool,
                  text: Callable[[exp.Expr], str]) -> None:
    """``reads``: each (alias, source) the query reads, its FROM first; ``select``: its SELECT
    expressions as written; ``grouped``: it has a GROUP BY; ``text`` writes an expression as
    ksqlDB's messages do."""
    uses_table_functions = _check_table_functions(select, grouped, text)
    kafka = ", ".join(alias for alias, source in reads if source.value_format == "KAFKA")
    if kafka and (joined or grouped):
        operation = "JOIN" if joined else "GROUP BY"
        raise QueryError(f"Source(s) {kafka} are using the 'KAFKA' value format. This format "
                         f"does not yet support {operation}.\n{KAFKA_VALUE_FORMAT_LIMITATION}")
    if persistent and any(s.kind is SourceKind.TABLE and s.window is not None for _, s in reads):
        raise QueryError("KSQL does not support persistent queries on windowed tables.")
    if uses_table_functions and reads and reads[0][1].kind is SourceKind.TABLE:
        raise QueryError("Table source is not supported with table functions")


def _check_table_functions(select: Sequence[exp.Expr], grouped: bool,
                           text: Callable[[exp.Expr], str]) -> bool:
    """ksqlDB's TableFunctionVisitor over each SELECT expression in order; whether any calls a
    table function. A query aggregates from its first aggregate call on (ksqlDB's implicit
    GROUP BY), or throughout with a GROUP BY."""
    found = False
    aggregating = grouped
    for expression in select:
        aggregating = aggregating or any(functions.is_aggregate(node)
                                         for node in expression.find_all(exp.Anonymous))
        for node in expression.find_all(exp.Anonymous):
            if not functions.is_table_function(node):
                continue
            found = True
            outer = next((a for a in _ancestors(node) if functions.is_table_function(a)), None)
            if outer is not None:
                raise QueryError(f"Table functions cannot be nested: "
                                 f"{functions.function_name(outer)}"
                                 f"({functions.function_name(node)}())")
            if aggregating:
                raise QueryError("Table functions cannot be used with aggregations.")
            case = next((a for a in _ancestors(node) if isinstance(a, exp.Case)), None)
            if case is not None:
                raise QueryError(f"Table functions cannot be used in CASE: {text(case)}")
    return found


def _ancestors(node: exp.Expr) -> list[exp.Expr]:
    found = []
    parent = node.parent
    while parent is not None:
        found.append(parent)
        parent = parent.parent
    return found
