"""The checks a persistent query's plan makes of its stream's rows, for ksqlDB's record
processing errors.

ksqlDB logs a RECORD_PROCESSING_ERROR to the processing log for each row whose evaluation
throws (a CAST of text that is no number, a division by zero, a function refusing its
arguments) and goes on with NULL, or drops the row where its WHERE failed. The translation
records where its NULL stands for such an exception (:mod:`metastore.functions.failures`);
this module turns those records into the plan's :class:`~metastore.planner.steps.CheckedRows`:
one :class:`~metastore.planner.steps.RecordCheck` per failing node, worded as ksqlDB's logger
words it:

- a node ksqlDB catches where it is (a CAST, a call nested in a call): ``Error processing
  <function or type>``;
- else the clause's expression: ``Error computing expression <expr> for column <name> with
  index <i>`` (the SELECT, logger ``Project``), ``Error evaluating predicate <expr>``
  (``WhereFilter``), ``Error calculating group-by column with index <i>. The source row will be
  excluded from the table.`` (``Aggregate.GroupBy``), ``Error computing new key from expression
  <expr>`` (a PARTITION BY's, ``PartitionBy``: the row keeps a NULL key), ``Error computing
  expression <argument> for column KSQL_INTERNAL_COL_<i> with index <i>`` (an aggregate call's
  argument, ``Aggregate.Prepare``: :mod:`metastore.planner.prepared_columns`).

Each check's condition is over the query's stream view (a query reading one stream, or one
table's changelog, without a join or a table function; a push query's too): the SELECT's,
GROUP BY's, PARTITION BY's and aggregate arguments' only for rows its WHERE keeps. Each
micro-batch counts the rows that fail a check by an observation of that view
(:func:`observed`); the runtime then logs each of them (:mod:`metastore.runtime.record_errors`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from metastore.catalog.model import DataSource
from metastore.functions import failures as failed
from metastore.functions.operators import ksql_text
from metastore.planner.steps import NULL_VALUE, CheckedRows, RecordCheck
from metastore.spark.types import quote
from metastore.sql.statements import ColumnRole

_PREFIX = "__ms_checked"
_SEPARATOR = "\u001f"
FIRST = "first"
"""The observed metric of the first failing row's partition and offset."""


@dataclass(frozen=True)
class ClauseTexts:
    """What ksqlDB's messages quote of a query, written down before its translation: each
    SELECT column's expression and index (key columns have none in a persistent query's
    projection), the WHERE's predicate, and the expression of each key column a PARTITION BY
    computes."""

    columns: dict[str, tuple[str, int]]
    where: str | None
    new_keys: dict[str, str] = field(default_factory=dict)


def clause_texts(projection: Sequence[tuple[str, exp.Expr]], keys: Iterable[str],
                 where: exp.Expr | None, partitioned: bool = False) -> ClauseTexts:
    """The texts of a query whose sink's key columns are ``keys``; ``partitioned``: its
    PARTITION BY computes them (ksqlDB's PartitionBy step, before the projection)."""
    key_names = set(keys)
    values = [(name, expression) for name, expression in projection if name not in key_names]
    new_keys = {name: expression_text(expression) for name, expression in projection
                if name in key_names} if partitioned else {}
    return ClauseTexts({name: (expression_text(expression), index)
                        for index, (name, expression) in enumerate(values)},
                       expression_text(where.this) if isinstance(where, exp.Where) else None,
                       new_keys)


def expression_text(expression: exp.Expr) -> str:
    """``expression`` as ksqlDB's processing log messages print it: columns unqualified."""
    return ksql_text(expression, lambda column: column.name)


def checked_rows(found: Sequence[failed.Failure], texts: ClauseTexts, where: exp.Expr | None,
                 aggregate: bool, alias: str, source: DataSource,
                 reads: tuple[str, ...]) -> CheckedRows | None:
    """The checks of the ``found`` failures of a query over ``source``, whose stream it reads
    as the view ``reads[-1]`` (the last of ``reads``) under ``alias``, ``where`` its translated
    WHERE; None when there is none to make.

    ksqlDB evaluates nothing of a tombstone, nor a row's SELECT and GROUP BY when its WHERE
    dropped it. A node it catches where it is is logged there, once per SELECT column; the
    failures it does not catch are one failure of their clause's expression, one check."""
    users = _users_where(where) if where is not None else None
    kept = _spark(users, alias) if users is not None else None
    parts: dict[tuple[object, ...], dict[str, str]] = {}
    for failure in found:
        named = _logged(failure, texts, aggregate)
        if named is None:
            continue
        condition = _spark(failure.condition, alias)
        if kept is not None and failure.clause != failed.WHERE:
            condition = f"coalesce({kept}, false) AND ({condition})"
        condition = f"NOT {quote(NULL_VALUE)} AND ({condition})"
        place = (*named, "prepared", failure.prepared[1], "") if failure.prepared and \
            aggregate else (*named, failure.clause, failure.index, failure.column)
        key = (*place, condition) if failure.wrapped else place
        parts.setdefault(key, {})[condition] = _spark(failure.cause, alias)
    if not parts:
        return None
    checks = tuple(_check(str(key[0]), str(key[1]), causes) for key, causes in parts.items())
    return CheckedRows(reads[-1], reads, source.topic, record_json(source), checks)


def _check(logger: str, message: str, causes: dict[str, str]) -> RecordCheck:
    """One check of the failures whose conditions are ``causes``' keys: any of them, with the
    cause of the first that holds."""
    if len(causes) == 1:
        [(condition, cause)] = causes.items()
        return RecordCheck(logger, message, condition, cause)
    either = " OR ".join(f"({condition})" for condition in causes)
    which = " ".join(f"WHEN {condition} THEN {cause}" for condition, cause in causes.items())
    return RecordCheck(logger, message, either, f"CASE {which} END")


def _users_where(where: exp.Expr) -> exp.Expr | None:
    """The query's own conditions of its translated WHERE: not those the planner added, on its
    GROUP BY expressions (a GROUP BY check must not be gated by them) and on tombstones."""
    conditions = [condition for condition in _conjuncts(where) if not (
        (condition._meta is not None and failed.GROUP_KEY in condition.meta)
        or any(column.name == NULL_VALUE for column in condition.find_all(exp.Column)))]
    return exp.and_(*conditions, copy=True) if conditions else None


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    if isinstance(condition, exp.Paren) and isinstance(condition.this, exp.And):
        return _conjuncts(condition.this)
    if isinstance(condition, exp.And):
        return [*_conjuncts(condition.left), *_conjuncts(condition.right)]
    return [condition]


def _logged(failure: failed.Failure, texts: ClauseTexts, aggregate: bool
            ) -> tuple[str, str] | None:
    """The logger step and message ksqlDB logs ``failure`` with; None where not checked."""
    if failure.clause == failed.WHERE:
        logger, whole = "WhereFilter", f"Error evaluating predicate {texts.where}"
    elif failure.clause == failed.GROUP:
        logger, whole = "Aggregate.GroupBy", (
            f"Error calculating group-by column with index {failure.index}. The source row "
            "will be excluded from the table.")
    elif failure.prepared is not None and aggregate:
        name, index, text = failure.prepared
        logger, whole = "Aggregate.Prepare", (f"Error computing expression {text} for column "
                                              f"{name} with index {index}")
    elif failure.clause == failed.PROJECT and failure.column in texts.new_keys:
        logger, whole = "PartitionBy", ("Error computing new key from expression "
                                        f"{texts.new_keys[failure.column]}")
    elif failure.clause == failed.PROJECT and not aggregate and failure.column in texts.columns:
        text, index = texts.columns[failure.column]
        logger, whole = "Project", (f"Error computing expression {text} for column "
                                    f"{failure.column} with index {index}")
    else:
        return None
    return logger, f"Error processing {failure.name}" if failure.wrapped else whole


def _spark(expression: exp.Expr, alias: str) -> str:
    """Spark SQL of ``expression`` over the stream view itself: its columns unqualified."""
    def unqualified(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table == alias:
            return exp.column(node.name, quoted=True)
        return node

    return expression.copy().transform(unqualified).sql(dialect="spark", identify=True)


def record_json(source: DataSource) -> str:
    """Spark SQL of a row of ``source``'s stream view as ksqlDB's processing log prints the
    record of a step's input row: a JSON array of its value columns, its header columns,
    ROWTIME, ROWPARTITION, ROWOFFSET and its key columns."""
    names = [*(c.name for c in source.columns if c.role is ColumnRole.VALUE),
             *(c.name for c in source.columns if c.role is ColumnRole.HEADER),
             "ROWTIME", "ROWPARTITION", "ROWOFFSET", *(c.name for c in source.key_columns)]
    values = [f"to_json(named_struct('v', {_quoted(name)}), map('ignoreNullFields', 'false'))"
              for name in names]
    inner = ", ".join(f"substring({value}, 6, length({value}) - 6)" for value in values)
    return f"concat('[', concat_ws(',', {inner}), ']')"


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def observation(checked: CheckedRows) -> str:
    """The name ``checked``'s view is observed under: its view and a digest of its checks, so
    that a micro-batch of a query's earlier plan (replaced) is not read with the new one's."""
    digest = hashlib.sha256(json.dumps([[c.message, c.condition] for c in checked.checks])
                            .encode()).hexdigest()[:16]
    return _SEPARATOR.join((_PREFIX, checked.view, digest))


def observed(checked: CheckedRows) -> tuple[str, tuple[str, ...]]:
    """The observation of ``checked``'s view: per check (in order), the rows failing it
    (``failed<i>``), and the first failing row's partition and offset (:data:`FIRST`)."""
    counts = tuple(f"count_if({check.condition}) AS failed{i}"
                   for i, check in enumerate(checked.checks))
    any_failed = " OR ".join(f"({check.condition})" for check in checked.checks)
    first = (f"min(CASE WHEN {any_failed} THEN struct(ROWPARTITION AS partition, ROWOFFSET AS "
             f"offset) END) AS {FIRST}")
    return observation(checked), (*counts, first)


__all__ = ["ClauseTexts", "checked_rows", "clause_texts", "expression_text",
           "observation", "observed", "record_json"]
