"""ksqlDB's rules for replacing a source or the query that writes it (CREATE OR REPLACE, ALTER).

Three checks, in the order ksqlDB makes them for ``CREATE OR REPLACE ... AS SELECT``:

- the sink's writers (its ``QueryIdUtil.buildId``, while planning): a sink more than one query
  writes (its C*AS and INSERT INTOs) cannot have its query replaced, :func:`check_single_writer`;
- the source (``StructuredDataSource.canUpgradeTo``, raised by ``MetaStoreImpl.putSource`` when the
  statement's DDL runs, for every CREATE OR REPLACE and ALTER): the same name, type, topic (its
  name, formats and windowing) and timestamp column, and a schema that keeps every existing
  column in its namespace, at its index and with its type: key columns identical, value
  columns only added at the end, :func:`check_source_upgrade`;
- the query (``ExecutionStep.validateUpgrade``, raised by ``QueryRegistryImpl`` when the new query
  replaces the running one), :func:`check_query_upgrade`: both queries' execution plans are
  walked from their sinks; the old plan's enforcing steps (sources, re-keying, grouping, the
  stream aggregation, the sink) must be matched by the new plan's, passive ones (filters,
  projections) may come and go, and a step ksqlDB has not made upgradeable (joins, windowed
  and table aggregations, table functions, windowed sources, suppression) refuses the upgrade.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from sqlglot import exp

from metastore.catalog.exceptions import UpgradeError
from metastore.catalog.model import Column, DataSource
from metastore.engine.analysis import Analysis
from metastore.functions import library as functions
from metastore.functions.operators import ksql_text
from metastore.sql import types as ty
from metastore.sql.statements import ColumnRole, SourceKind

PLAN_PACKAGE = "io.confluent.ksql.execution.plan"
"""Where ksqlDB's execution steps live: its messages name a step's class by it."""


# -- the sink's writers -------------------------------------------------------------------------
def check_single_writer(sink: str, writers: Sequence[str]) -> None:
    """``writers``: the queries writing into ``sink``, its C*AS's first, then its INSERTs."""
    if len(writers) > 1:
        raise UpgradeError(f"REPLACE for sink {sink} is not supported because there are multiple "
                           f"queries writing into it: [{', '.join(writers)}]", sink)


# -- the source ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _SchemaColumn:
    """A column as ksqlDB's LogicalSchema holds it: its namespace and index within it count."""

    name: str
    type: ty.SqlType
    namespace: str
    index: int
    header_key: str | None

    def __str__(self) -> str:
        text = ty.field_text(self.name, self.type)
        if self.namespace == "HEADERS" and self.header_key is not None:
            return f"{text} HEADER('{self.header_key}')"
        return text if self.namespace == "VALUE" else f"{text} {self.namespace}"


def logical_schema(columns: Sequence[Column]) -> tuple[_SchemaColumn, ...]:
    """``columns`` as ksqlDB's LogicalSchema: KEY and PRIMARY KEY are both the key namespace."""
    seen: dict[str, int] = {}
    schema = []
    for column in columns:
        namespace = "KEY" if column.is_key else (
            "VALUE" if column.role is ColumnRole.VALUE else "HEADERS")
        index = seen.get(namespace, 0)
        seen[namespace] = index + 1
        schema.append(_SchemaColumn(column.name, column.type, namespace, index,
                                    column.header_key))
    return tuple(schema)


def schema_text(columns: Sequence[Column]) -> str:
    """A schema as ksqlDB prints one: ```ID` INTEGER KEY, `V` STRING``."""
    return ", ".join(str(c) for c in logical_schema(columns))


def check_source_upgrade(existing: DataSource, replacement: DataSource) -> None:
    """ksqlDB's ``canUpgradeTo``: every property that differs, joined, then the schema's."""
    issues = [_not_upgradeable(existing, what, before, after)
              for what, before, after in _properties(existing, replacement) if before != after]
    problem = _schema_problem(logical_schema(existing.columns),
                              logical_schema(replacement.columns))
    if problem is not None:
        issues.append(_not_upgradeable(existing, "schema", schema_text(existing.columns),
                                       schema_text(replacement.columns)) + f". ({problem})")
    if issues:
        raise UpgradeError("Cannot upgrade data source: " + "\n\tAND ".join(issues),
                           existing.name)


def _not_upgradeable(source: DataSource, what: str, before: str, after: str) -> str:
    return (f"DataSource '`{source.name}`' has {what} = {before} which is not upgradeable to "
            f"{after}")


def _properties(old: DataSource, new: DataSource) -> list[tuple[str, str, str]]:
    """ksqlDB's upgrade-relevant properties besides the schema, in its order, as it prints them
    (the name, compared too, is the same by construction)."""
    return [("type", _type_text(old), _type_text(new)),
            ("topic", _topic_text(old), _topic_text(new)),
            ("timestampColumn", _timestamp_text(old), _timestamp_text(new))]


def _type_text(source: DataSource) -> str:
    return "KSTREAM" if source.kind is SourceKind.STREAM else "KTABLE"


def _format_text(name: str, source: DataSource, side: str) -> str:
    delimiter = source.property(f"{side}_DELIMITER")
    properties = f"{{delimiter={delimiter}}}" if delimiter is not None else "{}"
    return f"FormatInfo{{format={name}, properties={properties}}}"


def _features_text(source: DataSource) -> str:
    wrapping = source.property("WRAP_SINGLE_VALUE")
    if wrapping is None:
        return "[]"
    return "[WRAP_SINGLES]" if wrapping.lower() == "true" else "[UNWRAP_SINGLES]"


def _window_text(source: DataSource) -> str:
    if source.window is None:
        return "Optional.empty"
    size = f"Optional[{source.window.size_ms}]" if source.window.size_ms is not None else (
        "Optional.empty")
    return f"Optional[WindowInfo{{type={source.window.kind}, size={size}}}]"


def _topic_text(source: DataSource) -> str:
    """ksqlDB's KsqlTopic: the topic's name and the source's key and value formats."""
    return (f"KsqlTopic{{kafkaTopicName='{source.topic}', keyFormat=KeyFormat{{format="
            f"{_format_text(source.key_format, source, 'KEY')}, window={_window_text(source)}}}, "
            f"valueFormat=ValueFormat{{format={_format_text(source.value_format, source, 'VALUE')}"
            f", features={_features_text(source)}}}}}")


def _timestamp_text(source: DataSource) -> str:
    if source.timestamp_column is None:
        return "Optional.empty"
    stamp_format = source.property("TIMESTAMP_FORMAT")
    shown = f"Optional[{stamp_format}]" if stamp_format is not None else "Optional.empty"
    return (f"Optional[TimestampColumn{{column=`{source.timestamp_column}`, "
            f"format={shown}}}]")


def _schema_problem(old: tuple[_SchemaColumn, ...], new: tuple[_SchemaColumn, ...]) -> str | None:
    """The key columns must be identical; every other column kept (the columns ksqlDB lists:
    the old schema's that the new one lacks, in order)."""
    old_keys = [c for c in old if c.namespace == "KEY"]
    new_keys = {c for c in new if c.namespace == "KEY"}
    missing = [c for c in old_keys if c not in new_keys]
    if missing:
        return ("Key columns must be identical. The following key columns are changed, missing "
                f"or reordered: [{', '.join(str(c) for c in missing)}]")
    kept = set(new)
    missing = [c for c in old if c not in kept]
    if missing:
        return ("The following columns are changed, missing or reordered: "
                f"[{', '.join(str(c) for c in missing)}]")
    return None


# -- the query ----------------------------------------------------------------------------------
class Role(Enum):
    """How a step takes part in ksqlDB's upgrade walk (its ``ExecutionStep.StepType``)."""

    ENFORCING = "enforcing"
    """The new plan must have a matching step where the old one has it."""
    PASSIVE = "passive"
    """May be added or removed."""
    UNSUPPORTED = "unsupported"
    """ksqlDB has not made the step upgradeable: reaching it refuses the upgrade."""


@dataclass(frozen=True)
class Step:
    """One step of a persistent query's execution plan, as far as upgrades look at it: ksqlDB's
    class name, its role and the properties an enforcing step must match, in ksqlDB's order."""

    name: str
    role: Role
    matched: tuple[tuple[str, str], ...] = ()
    sources: tuple[Step, ...] = ()

    @property
    def is_source(self) -> bool:
        return self.name in ("StreamSource", "TableSource")


_TYPED_ENFORCING = frozenset({"StreamSink", "StreamSource"})
"""The enforcing steps that declare their step type; the others only match their own kind of
step, and asking them for their type fails as for a step that is not upgradeable."""


def check_query_upgrade(old: Analysis, new: Analysis) -> None:
    """Raise ksqlDB's error when the query analysed as ``new`` cannot replace ``old``."""
    _validate(plan(old), plan(new))


def _validate(step: Step, to: Step) -> None:
    """ksqlDB's ``validateUpgrade`` of ``step`` to ``to``: a passive step hands over to the other
    plan (so both plans' passive steps are skipped), an enforcing one matches ``to`` and goes
    on with both sources."""
    if step.role is Role.UNSUPPORTED:
        raise UpgradeError(f"Upgrades not yet supported for {step.name}")
    if step.role is Role.PASSIVE:
        _validate(to, step.sources[0])
        return
    if step.is_source:
        _validate_source(step, to)
        return
    _must_match(step, to)
    _validate(step.sources[0], to.sources[0])


def _validate_source(step: Step, to: Step) -> None:
    """A source step: the other plan's steps down to its source must be passive ones. (ksqlDB
    looks at the first of them only, and loops when the second is not the source; this goes on
    down.)"""
    found = to
    while found.name != step.name:
        if not found.sources:
            raise UpgradeError(f"Query is not upgradeable. The root source node of the upgrade "
                               f"tree must be {step.name}, but was class {PLAN_PACKAGE}."
                               f"{found.name}")
        if len(found.sources) > 1:
            raise UpgradeError("Query is not upgradeable. Cannot change a non-join source into "
                               "a join source.")
        if found.role is not Role.PASSIVE:
            if found.name not in _TYPED_ENFORCING:  # its step type is asked for, and it has none
                raise UpgradeError(f"Upgrades not yet supported for {found.name}")
            raise UpgradeError(f"Query is not upgradeable. Cannot add a class {PLAN_PACKAGE}."
                               f"{found.name} step that is not in the original query plan.")
        found = found.sources[0]
    _must_match(step, found)


def _must_match(step: Step, to: Step) -> None:
    pairs = [("class", f"class {PLAN_PACKAGE}.{step.name}", f"class {PLAN_PACKAGE}.{to.name}")]
    if step.name == to.name:
        theirs = dict(to.matched)
        pairs += [(what, mine, theirs.get(what, "")) for what, mine in step.matched]
    for what, mine, other in pairs:
        if mine != other:
            raise UpgradeError(f"Query is not upgradeable. Plan step of type {step.name} must "
                               f"have matching {what}. Values differ: {mine} vs. {other}")


# -- plans --------------------------------------------------------------------------------------
def plan(analysis: Analysis) -> Step:
    """The steps ksqlDB's planner builds for a persistent query (LogicalPlanner, then the
    SchemaKStream/SchemaKTable steps): its source or joins, WHERE, table functions, then the
    aggregation, or PARTITION BY and the projection, and the sink."""
    select = analysis.query.select
    step, kind = _input(analysis)
    if select.args.get("where") is not None:
        step = _passive(f"{_prefix(kind)}Filter", step)
    if analysis.aggregate:
        step = _aggregation(analysis, step, kind)
    else:
        if kind is SourceKind.STREAM and any(
                functions.is_table_function(node) for item in select.expressions
                for node in item.find_all(exp.Anonymous)):
            step = Step("StreamFlatMap", Role.UNSUPPORTED, sources=(step,))
        keys = analysis.query.partition_by
        if keys and _repartitions(keys, analysis):
            step = Step(f"{_prefix(kind)}SelectKey", Role.ENFORCING,
                        (("keyExpressions", _texts(keys)),), (step,))
        step = _passive(f"{_prefix(kind)}Select", step)
    return Step(f"{_prefix(analysis.kind)}Sink", Role.ENFORCING, sources=(step,))


def _prefix(kind: SourceKind) -> str:
    return "Stream" if kind is SourceKind.STREAM else "Table"


def _passive(name: str, source: Step) -> Step:
    return Step(name, Role.PASSIVE, sources=(source,))


def _input(analysis: Analysis) -> tuple[Step, SourceKind]:
    """The query's source step, or its joins (each joins what the earlier ones produce)."""
    first = analysis.reads[0].source
    step, kind = _source(first), first.kind
    nodes = list(analysis.query.select.args.get("joins") or [])
    for index, join in enumerate(analysis.joins):
        right = join.right.source
        if kind is SourceKind.STREAM:
            name = "StreamStreamJoin" if right.kind is SourceKind.STREAM else "StreamTableJoin"
        elif index < len(nodes) and _foreign_key(nodes[index], analysis, index + 1):
            name = "ForeignKeyTableTableJoin"
        else:
            name = "TableTableJoin"
        step = Step(name, Role.UNSUPPORTED, sources=(step, _source(right)))
        if right.kind is SourceKind.STREAM:
            kind = SourceKind.STREAM
    return step, kind


def _source(source: DataSource) -> Step:
    if source.window is not None:
        return Step(f"Windowed{_prefix(source.kind)}Source", Role.UNSUPPORTED)
    formats = (f"Formats{{keyFormat={_format_text(source.key_format, source, 'KEY')}, "
               f"valueFormat={_format_text(source.value_format, source, 'VALUE')}}}")
    return Step(f"{_prefix(source.kind)}Source", Role.ENFORCING,
                (("topicName", source.topic), ("formats", formats),
                 ("timestampColumn", _timestamp_text(source))))


def _foreign_key(join: exp.Expr, analysis: Analysis, right_index: int) -> bool:
    """Whether a table-table join is on a left value column (a foreign-key join)."""
    condition = join.args.get("on")
    if not isinstance(condition, exp.EQ):
        return False
    right = analysis.reads[right_index]
    earlier = [read.source for read in analysis.reads[:right_index]]
    for side in (condition.this, condition.expression):
        if not isinstance(side, exp.Column):
            return True
        if side.table == right.alias or (not side.table and right.source.column(side.name)
                                         and not any(s.column(side.name) for s in earlier)):
            continue
        return not any(c.name == side.name for s in earlier for c in s.key_columns)
    return False


def _aggregation(analysis: Analysis, step: Step, kind: SourceKind) -> Step:
    """ksqlDB's AggregateNode: a projection of the columns it needs, the grouping, the
    aggregation, HAVING and the projection of the result."""
    select = analysis.query.select
    group = select.args.get("group")
    group_by: list[exp.Expr] = list(group.expressions) if group is not None else []
    if kind is SourceKind.TABLE:
        step = _passive("TableSelect", step)
        step = Step("TableGroupBy", Role.UNSUPPORTED, sources=(step,))
        step = Step("TableAggregate", Role.UNSUPPORTED, sources=(step,))
    else:
        step = _passive("StreamSelect", step)
        if _repartitions(group_by, analysis):
            step = Step("StreamGroupBy", Role.ENFORCING,
                        (("group by clause", _texts(group_by)),), (step,))
        else:
            step = Step("StreamGroupByKey", Role.ENFORCING, sources=(step,))
        if analysis.windowed:
            step = Step("StreamWindowedAggregate", Role.UNSUPPORTED, sources=(step,))
        else:
            summary = analysis.aggregate_step
            matched = () if summary is None else (
                ("columns not part of aggregate",
                 f"[{', '.join(f'`{c}`' for c in summary.required_columns)}]"),
                ("aggregate functions", f"[{', '.join(summary.functions)}]"))
            step = Step("StreamAggregate", Role.ENFORCING, matched, (step,))
    if select.args.get("having") is not None:
        step = _passive("TableFilter", step)
    if analysis.query.emit_final:
        step = Step("TableSuppress", Role.UNSUPPORTED, sources=(step,))
    return _passive("TableSelect", step)


def _repartitions(expressions: Sequence[exp.Expr], analysis: Analysis) -> bool:
    """ksqlDB's Repartitioning: needed unless re-keying by the one key column of the input."""
    if analysis.joins:
        return True
    keys = analysis.reads[0].source.key_columns
    if len(keys) != 1 or len(expressions) != 1:
        return True
    expression = expressions[0]
    return not (isinstance(expression, exp.Column) and expression.name == keys[0].name)


def _texts(expressions: Sequence[exp.Expr]) -> str:
    """Expressions as ksqlDB lists them in a step's properties: unqualified columns."""
    return f"[{', '.join(ksql_text(e, lambda c: c.name) for e in expressions)}]"
