"""The checks a persistent query's plan makes of its stream's rows, for ksqlDB's record
processing errors.

ksqlDB logs a RECORD_PROCESSING_ERROR to the processing log for each row whose evaluation
throws (a CAST of text that is no number, a division by zero, a function refusing its
arguments) and goes on with NULL, or drops the row where its WHERE failed. The translation
records where its NULL stands for such an exception (:mod:`metastore.functions.failures`);
this module turns those records into the plan's :class:`~metastore.planner.steps.CheckedRows`:
one :class:`~metastore.planner.steps.RecordCheck` per failing node, worded as ksqlDB's logger
words it:

- a failure a node around it catches (a CAST, a call passed to a call, a constructor's element:
  :func:`metastore.functions.failures.catcher`): ``Error processing <what>``, one check per
  catching node;
- else the clause's expression: ``Error computing expression <expr> for column <name> with
  index <i>`` (the SELECT, logger ``Project``), ``Error evaluating predicate <expr>``
  (``WhereFilter``), ``Error calculating group-by column with index <i>. The source row will be
  excluded from the table.`` (``Aggregate.GroupBy``), ``Error computing new key from expression
  <expr>`` (a PARTITION BY's, ``PartitionBy``: the row keeps a NULL key), ``Error computing
  expression <argument> for column KSQL_INTERNAL_COL_<i> with index <i>`` (an aggregate call's
  argument, ``Aggregate.Prepare``: :mod:`metastore.planner.prepared_columns`).

Each check's condition is over the query's stream view (a query reading one stream, or one
table's changelog, without a table function; a push query's too), or over the view of a
stream's joins with tables (its columns, and each table's under their names in that view): the
SELECT's, GROUP BY's, PARTITION BY's and aggregate arguments' only for rows its WHERE keeps.
Each micro-batch counts the rows that fail a check by an observation of that view
(:func:`observed`); the runtime then logs each of them (:mod:`metastore.runtime.record_errors`):
a stream view's by reading the micro-batch's offsets again, a join's from the observation
itself, which carries at most :data:`CARRIED_ROWS` failing rows of each check.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from sqlglot import exp

from metastore.catalog.model import DataSource
from metastore.functions import failures as failed
from metastore.functions.library import is_aggregate
from metastore.functions.operators import ksql_text
from metastore.planner.steps import NULL_VALUE, CheckedRows, Observed, RecordCheck
from metastore.spark.types import quote
from metastore.sql.statements import ColumnRole

_PREFIX = "__ms_checked"
_SEPARATOR = "\u001f"
FIRST = "first"
"""The observed metric of the first failing row's partition and offset."""
PARTITION_BY = "PartitionBy"
"""The step of ksqlDB's logger of a PARTITION BY's new key."""
CARRIED = "rows"
"""The prefix of the observed metric of a check's failing rows, when the observation carries
them (``rows<i>``: an array of structs, each its ``record`` and ``cause``)."""
CARRIED_ROWS = 20
"""The most failing rows of one check a micro-batch's observation of a join's view carries (the
count is exact), each record and cause cut at :data:`CARRIED_RECORD_CHARS`: a micro-batch's
entries, which Spark also keeps in the query's recent progress, are bounded in the driver's
memory whatever the topic holds."""
CARRIED_RECORD_CHARS = 16_384


@dataclass(frozen=True)
class CheckedJoin:
    """A table a stream's checked view joins: its alias in the query, its source, and the name
    each of its columns (its pseudo columns too) has in the view."""

    alias: str
    source: DataSource
    names: Mapping[str, str]


@dataclass(frozen=True)
class ClauseTexts:
    """What ksqlDB's messages quote of a query, written down before its translation: each
    SELECT column's expression and index (key columns have none in a persistent query's
    projection), the WHERE's predicate, and the expression of each key column a PARTITION BY
    computes (``key_only``: those whose expression reads only the source's key columns, which
    ksqlDB evaluates over the key alone)."""

    columns: dict[str, tuple[str, int]]
    where: str | None
    new_keys: dict[str, str] = field(default_factory=dict)
    key_only: frozenset[str] = frozenset()
    aggregated: dict[str, tuple[str, int]] = field(default_factory=dict)
    """An aggregation's SELECT columns as its ``Aggregate.Project`` step computes them (see
    :func:`with_aggregates`)."""
    having: str | None = None


ColumnText = Callable[[exp.Column], str]
"""How a query's messages name a column (:meth:`~metastore.engine.scope.Scope.column_text`)."""


def clause_texts(projection: Sequence[tuple[str, exp.Expr]], keys: Iterable[str],
                 where: exp.Expr | None, partitioned: bool = False,
                 column_text: ColumnText | None = None,
                 source_keys: Collection[str] = (), projects_keys: bool = False) -> ClauseTexts:
    """The texts of a query whose sink's key columns are ``keys``; ``partitioned``: its
    PARTITION BY computes them (ksqlDB's PartitionBy step, before the projection) from a
    source whose key columns are ``source_keys`` (none after a join, whose key is the join's);
    ``column_text``: how its columns are named (after a join, ``ALIAS_COLUMN``);
    ``projects_keys``: its projection holds its key columns too, which count in a column's
    index (a push query's: ksqlDB's transient queries return their keys in the value)."""
    key_names = set(keys)
    values = [(name, expression) for name, expression in projection
              if projects_keys or name not in key_names]
    partitions = [(name, expression) for name, expression in projection
                  if name in key_names] if partitioned else []
    return ClauseTexts({name: (expression_text(expression, column_text), index)
                        for index, (name, expression) in enumerate(values)},
                       expression_text(where.this, column_text)
                       if isinstance(where, exp.Where) else None,
                       {name: expression_text(expression, column_text)
                        for name, expression in partitions},
                       frozenset(name for name, expression in partitions
                                 if source_keys and reads_key_only(expression, source_keys)))


AGGREGATE_VARIABLE = "KSQL_AGG_VARIABLE_"
"""How ksqlDB's aggregated rows name each aggregate call's result."""
AGGREGATED_LOGGERS = frozenset({"Aggregate.Project", "Aggregate.HavingFilter"})
"""The steps ksqlDB evaluates over an aggregation's aggregated rows, not its input rows."""


def with_aggregates(texts: ClauseTexts, projection: Sequence[tuple[str, exp.Expr]],
                    having: exp.Expr | None, column_text: ColumnText | None = None
                    ) -> ClauseTexts:
    """``texts`` of an aggregation, with its SELECT's value columns (each at its index in
    ``texts.columns``) and its HAVING as ksqlDB's AggregateExpressionRewriter writes them over
    the aggregated row: each aggregate call, in the order met (the SELECT's columns, then the
    HAVING), is ``KSQL_AGG_VARIABLE_<n>``."""
    numbers = itertools.count()

    def named(column: exp.Column) -> str:
        if not column.table and column.name.startswith(AGGREGATE_VARIABLE):
            return column.name
        return column_text(column) if column_text is not None else column.name

    def rewritten(expression: exp.Expr) -> str:
        return expression_text(expression.copy().transform(
            lambda node: exp.column(f"{AGGREGATE_VARIABLE}{next(numbers)}")
            if is_aggregate(node) else node), named)

    columns = [(name, rewritten(expression)) for name, expression in projection]  # numbers all
    return replace(texts, aggregated={name: (text, texts.columns[name][1])
                                      for name, text in columns if name in texts.columns},
                   having=rewritten(having) if having is not None else None)


def bound_by_lambda(column: exp.Column) -> bool:
    """Whether ``column`` is the variable of a lambda around it, not a source's column."""
    lambda_ = column.find_ancestor(exp.Lambda)
    while lambda_ is not None:
        if not column.table and any(variable.name == column.name
                                    for variable in lambda_.expressions):
            return True
        lambda_ = lambda_.find_ancestor(exp.Lambda)
    return False


def reads_key_only(expression: exp.Expr, keys: Collection[str]) -> bool:
    """Whether ``expression`` reads no column but the ``keys`` (ksqlDB's
    ``partitionByInvolvesKeyColsOnly``: a PARTITION BY of it is evaluated over the key alone)."""
    return all(column.name in keys for column in expression.find_all(exp.Column))


def expression_text(expression: exp.Expr, column_text: ColumnText | None = None) -> str:
    """``expression`` as ksqlDB's processing log messages print it: columns unqualified, or
    as ``column_text`` names them."""
    return ksql_text(expression, column_text or (lambda column: column.name))


def checked_rows(found: Sequence[failed.Failure], texts: ClauseTexts, where: exp.Expr | None,
                 aggregate: bool, alias: str, source: DataSource, reads: tuple[str, ...],
                 joined: Sequence[CheckedJoin] = (),
                 alias_of: Callable[[exp.Column], str | None] = lambda _: None
                 ) -> CheckedRows | None:
    """The checks of the ``found`` failures of a query over ``source``, whose stream it reads
    as the view ``reads[-1]`` (the last of ``reads``) under ``alias``, ``where`` its translated
    WHERE; None when there is none to make. With ``joined`` tables, ``reads[-1]`` is the view
    of the stream's joins with them (``alias_of`` gives the source of an unqualified column):
    its failing rows are carried by the observation.

    ksqlDB evaluates nothing of a tombstone (a WHERE drops it) but a PARTITION BY over key
    columns only without a WHERE (of the key alone, whose values it logs as the record), nor a
    row's SELECT and GROUP BY when its WHERE dropped it. The failures a node around them
    catches are one check per catching node; those nothing catches are one failure of their
    clause's expression, one check."""
    names = _ViewNames(alias, {table.alias: table.names for table in joined}, alias_of)
    users = split_where(where)[0] if where is not None else None
    kept = names.spark(users) if users is not None else None
    keys_record = _json_array([_json_value(c.name) for c in source.key_columns])
    parts: dict[tuple[object, ...], dict[str, str]] = {}
    records: dict[tuple[object, ...], str | None] = {}
    for failure in found:
        named = _logged(failure, texts, aggregate)
        if named is None or named[0] in AGGREGATED_LOGGERS:
            continue
        key_alone = named[0] == PARTITION_BY and failure.column in texts.key_only
        condition = names.spark(failure.condition)
        if kept is not None and failure.clause != failed.WHERE:
            condition = f"coalesce({kept}, false) AND ({condition})"
        if kept is not None or not key_alone:  # a key alone is evaluated for a tombstone too
            condition = f"NOT {quote(NULL_VALUE)} AND ({condition})"
        place = (*named, "prepared", failure.prepared[1], "") if failure.prepared and \
            aggregate else (*named, failure.clause, failure.index, failure.column)
        key = _add(parts, place, failure, condition, names.spark(failure.cause))
        records[key] = keys_record if key_alone else None
    if not parts:
        return None
    checks = tuple(_check(str(key[0]), str(key[1]), causes, records[key])
                   for key, causes in parts.items())
    if joined:
        record = _json_array([*_record_values(source, {}), *(
            value for table in joined for value in _record_values(table.source, table.names))])
        return CheckedRows(reads[-1], (), source.topic, record, checks, CARRIED_ROWS)
    return CheckedRows(reads[-1], reads, source.topic, record_json(source), checks)


@dataclass(frozen=True)
class SelectedChecks:
    """Checks a query's SELECT computes itself, where no view before it holds the rows they
    check: an aggregation's over its aggregated rows (ksqlDB's ``Aggregate.HavingFilter`` and
    ``Aggregate.Project``, after its aggregate step), a stream-stream join's over its joined
    rows. ``columns``: the Spark SQL items the SELECT adds (each check's condition and cause),
    over its own expressions; ``checked``: the checks of the view of that SELECT, whose
    observation carries the failing rows."""

    columns: tuple[str, ...]
    checked: CheckedRows
    where_fails: str | None = None
    """Spark SQL of whether the row's WHERE throws, where it can."""


CHECKED_PREFIX = "__ms_checked"
"""The prefix of the names of the columns a checked SELECT adds."""
CHECKED_VALUE = "__ms_checked_value"
"""The columns of a checked SELECT that hold the values of the record its entries log."""
CHECKED_KEPT = "__ms_checked_kept"
"""The column of a checked join's view that says whether its WHERE keeps the row."""
CHECKED_ORDER = "__ms_checked_order"
"""The column of a checked SELECT's view its observation carries the first failing rows by."""
CHECKED_CONDITION = "__ms_checked_condition"
CHECKED_CAUSE = "__ms_checked_cause"


def selected_rows(found: Sequence[failed.Failure], texts: ClauseTexts, kept: str | None,
                  view: str, topic: str, values: int, aggregated: bool,
                  present: str | None = None) -> SelectedChecks | None:
    """The checks of the ``found`` failures of the rows a SELECT computes, in the view ``view``
    of that SELECT, whose ``values`` columns ``__ms_checked_value<i>`` are the record ksqlDB
    logs; None when there is none to make. ``aggregated``: its aggregation's HAVING and SELECT
    (outside the aggregate calls' arguments) over its aggregated rows, ``kept`` its HAVING;
    else its WHERE's and SELECT's, ``kept`` its WHERE (Spark SQL). A row ``kept`` does not keep
    is not projected, and none is evaluated where ``present`` (Spark SQL) does not hold."""
    parts: dict[tuple[object, ...], dict[str, str]] = {}
    for failure in found:
        named = _logged(failure, texts, aggregated)
        if named is None or (named[0] in AGGREGATED_LOGGERS) != aggregated:
            continue
        condition = failure.condition.sql(dialect="spark", identify=True)
        if kept is not None and named[0] not in ("Aggregate.HavingFilter", "WhereFilter"):
            condition = f"coalesce({kept}, false) AND ({condition})"
        if present is not None:
            condition = f"coalesce({present}, false) AND ({condition})"
        _add(parts, (*named, failure.clause, failure.index, failure.column), failure, condition,
             failure.cause.sql(dialect="spark", identify=True))
    if not parts:
        return None
    columns: list[str] = []
    checks: list[RecordCheck] = []
    where_fails: list[str] = []
    for index, (place, causes) in enumerate(parts.items()):
        check = _check(str(place[0]), str(place[1]), causes, None)
        condition, cause = quote(f"{CHECKED_CONDITION}{index}"), quote(f"{CHECKED_CAUSE}{index}")
        columns += [f"{check.condition} AS {condition}", f"{check.cause} AS {cause}"]
        checks.append(RecordCheck(check.logger, check.message, condition, cause))
        if check.logger == "WhereFilter":
            where_fails.append(f"({check.condition})")
    record = _json_array([_json_value(f"{CHECKED_VALUE}{index}") for index in range(values)])
    return SelectedChecks(tuple(columns), CheckedRows(view, (), topic, record, tuple(checks),
                                                      CARRIED_ROWS),
                          " OR ".join(where_fails) or None)


def record_columns(source: DataSource) -> list[str]:
    """The columns of ``source``'s row in the record ksqlDB prints (see :func:`record_json`)."""
    return [*(c.name for c in source.columns if c.role is ColumnRole.VALUE),
            *(c.name for c in source.columns if c.role is ColumnRole.HEADER),
            "ROWTIME", "ROWPARTITION", "ROWOFFSET", *(c.name for c in source.key_columns)]


def _add(parts: dict[tuple[object, ...], dict[str, str]], place: tuple[object, ...],
         failure: failed.Failure, condition: str, cause: str) -> tuple[object, ...]:
    """Add ``failure`` at ``place`` (its logger, message and where it sits) to the check of its
    clause's expression, or, one ksqlDB catches in a node around it, to that node's check (one
    entry for the failures it catches); its key."""
    key = (*place, failure.caught_at) if failure.wrapped else place
    parts.setdefault(key, {})[condition] = cause
    return key


def _check(logger: str, message: str, causes: dict[str, str], record: str | None
           ) -> RecordCheck:
    """One check of the failures whose conditions are ``causes``' keys: any of them, with the
    cause of the first that holds; ``record``: the record it logs, where not the row's."""
    if len(causes) == 1:
        [(condition, cause)] = causes.items()
        return RecordCheck(logger, message, condition, cause, record)
    either = " OR ".join(f"({condition})" for condition in causes)
    which = " ".join(f"WHEN {condition} THEN {cause}" for condition, cause in causes.items())
    return RecordCheck(logger, message, either, f"CASE {which} END", record)


def drop_thrown_predicates(select: exp.Select, found: Sequence[failed.Failure]) -> None:
    """Make ``select`` drop a row whose WHERE throws, and delete a group whose HAVING throws,
    as ksqlDB's ``WhereFilter`` and ``HavingFilter`` take such a predicate for false: the NULL
    that stands for the exception here could let an OR, an IS NULL or a COALESCE around it
    keep the row. Each predicate (the SELECT's WHERE, or the WHERE or HAVING the planner moved
    into a row's deletion, marked by :data:`~metastore.functions.failures.CLAUSE`) is ANDed
    with NOT any of its ``found`` failures nothing inside it catches (a lambda's call that fails
    on an element among them)."""
    for clause in (failed.WHERE, failed.HAVING):
        thrown = [f.condition.copy() for f in found if f.clause == clause and not f.wrapped]
        if not thrown:
            continue
        guard = exp.Not(this=exp.func("coalesce", exp.paren(exp.or_(*thrown, copy=False),
                                                             copy=False), exp.false()))
        moved = failed.moved_clause(select, clause)
        if moved is not None:
            moved.set("this", exp.and_(exp.paren(moved.this, copy=False), guard, copy=False))
        else:
            assert clause == failed.WHERE and select.args.get("where") is not None, clause
            select.where(guard, copy=False)


def split_where(where: exp.Expr) -> tuple[exp.Expr | None, exp.Expr | None]:
    """The query's own conditions of its translated WHERE, and those the planner added: on its
    GROUP BY expressions (a GROUP BY check must not be gated by them) and on tombstones."""
    users: list[exp.Expr] = []
    planners: list[exp.Expr] = []
    for condition in conjuncts(where):
        added = (condition._meta is not None and failed.GROUP_KEY in condition.meta) or any(
            column.name == NULL_VALUE for column in condition.find_all(exp.Column))
        (planners if added else users).append(condition)
    return (exp.and_(*users, copy=True) if users else None,
            exp.and_(*planners, copy=True) if planners else None)


def conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    """The conditions ``condition`` ANDs."""
    if isinstance(condition, exp.Paren) and isinstance(condition.this, exp.And):
        return conjuncts(condition.this)
    if isinstance(condition, exp.And):
        return [*conjuncts(condition.left), *conjuncts(condition.right)]
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
        logger, whole = PARTITION_BY, ("Error computing new key from expression "
                                        f"{texts.new_keys[failure.column]}")
    elif failure.clause == failed.PROJECT and not aggregate and failure.column in texts.columns:
        text, index = texts.columns[failure.column]
        logger, whole = "Project", (f"Error computing expression {text} for column "
                                    f"{failure.column} with index {index}")
    elif failure.clause == failed.PROJECT and aggregate and failure.column in texts.aggregated:
        text, index = texts.aggregated[failure.column]
        logger, whole = "Aggregate.Project", (f"Error computing expression {text} for column "
                                              f"{failure.column} with index {index}")
    elif failure.clause == failed.HAVING and texts.having is not None:
        logger, whole = "Aggregate.HavingFilter", f"Error evaluating predicate {texts.having}"
    else:
        return None
    return logger, f"Error processing {failure.name}" if failure.wrapped else whole


@dataclass(frozen=True)
class _ViewNames:
    """The checked view's column of each column a query's expression names: the stream's
    (under ``alias``) by its own name, a joined table's (qualified, or named alone:
    ``alias_of`` its source) by its name in the view."""

    alias: str
    tables: Mapping[str, Mapping[str, str]]
    alias_of: Callable[[exp.Column], str | None]

    def spark(self, expression: exp.Expr) -> str:
        """Spark SQL of ``expression`` over the checked view."""
        def in_view(node: exp.Expr) -> exp.Expr:
            if not isinstance(node, exp.Column) or bound_by_lambda(node):
                return node
            table = node.table or (self.alias_of(node) if self.tables else None) or ""
            if table in self.tables:
                return exp.column(self.tables[table][node.name], quoted=True)
            if node.table == self.alias:
                return exp.column(node.name, quoted=True)
            return node

        return expression.copy().transform(in_view).sql(dialect="spark", identify=True)


def record_json(source: DataSource) -> str:
    """Spark SQL of a row of ``source``'s stream view as ksqlDB's processing log prints the
    record of a step's input row: a JSON array of its value columns, its header columns,
    ROWTIME, ROWPARTITION, ROWOFFSET and its key columns."""
    return _json_array(_record_values(source, {}))


def _record_values(source: DataSource, names: Mapping[str, str]) -> list[str]:
    """Spark SQL of each value of ``source``'s row in the record ksqlDB prints (see
    :func:`record_json`), a JSON text each; ``names``: its columns' names in the view, where
    they are not their own (a joined table's)."""
    return [_json_value(names.get(name, name)) for name in record_columns(source)]


def _json_value(column: str) -> str:
    """Spark SQL of the JSON text of ``column``'s value (``null`` for NULL)."""
    value = f"to_json(named_struct('v', {_quoted(column)}), map('ignoreNullFields', 'false'))"
    return f"substring({value}, 6, length({value}) - 6)"


def _json_array(values: Sequence[str]) -> str:
    return f"concat('[', concat_ws(',', {', '.join(values)}), ']')"


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


_SOURCE_ORDER = "named_struct('partition', ROWPARTITION, 'offset', ROWOFFSET)"


def observation(checked: CheckedRows) -> str:
    """The name ``checked``'s view is observed under: its view and a digest of its checks, so
    that a micro-batch of a query's earlier plan (replaced) is not read with the new one's."""
    digest = hashlib.sha256(json.dumps([[c.message, c.condition] for c in checked.checks])
                            .encode()).hexdigest()[:16]
    return _SEPARATOR.join((_PREFIX, checked.view, digest))


def observed(checked: CheckedRows, order: str = _SOURCE_ORDER) -> Observed:
    """The observation of ``checked``'s view: per check (in order), the rows failing it
    (``failed<i>``), and the first failing row's partition and offset (:data:`FIRST`), or, when
    the observation carries the failing rows, each check's (``rows<i>``, :data:`CARRIED`): the
    first by ``order``, Spark SQL over the view (by default its rows' source offsets)."""
    counts = tuple(f"count_if({check.condition}) AS failed{i}"
                   for i, check in enumerate(checked.checks))
    if checked.carried:
        return observation(checked), (*counts, *(
            f"min_by(CASE WHEN {check.condition} THEN named_struct('record', substring("
            f"{check.record or checked.record}, 1, {CARRIED_RECORD_CHARS}), 'cause', "
            f"substring({check.cause}, 1, {CARRIED_RECORD_CHARS})) END, CASE WHEN "
            f"{check.condition} THEN {order} END, {checked.carried}) AS {CARRIED}{i}"
            for i, check in enumerate(checked.checks)))
    any_failed = " OR ".join(f"({check.condition})" for check in checked.checks)
    first = (f"min(CASE WHEN {any_failed} THEN struct(ROWPARTITION AS partition, ROWOFFSET AS "
             f"offset) END) AS {FIRST}")
    return observation(checked), (*counts, first)


__all__ = ["AGGREGATED_LOGGERS", "AGGREGATE_VARIABLE", "CARRIED", "CARRIED_ROWS", "CHECKED_KEPT",
           "CHECKED_ORDER", "CHECKED_PREFIX", "CHECKED_VALUE", "FIRST", "CheckedJoin",
           "ClauseTexts", "ColumnText", "SelectedChecks", "bound_by_lambda", "checked_rows",
           "clause_texts", "conjuncts", "drop_thrown_predicates", "expression_text",
           "observation", "observed", "reads_key_only", "record_columns", "record_json",
           "selected_rows", "split_where", "with_aggregates"]
