"""Joins in Spark's own terms: what a query's rewritten SELECT says of its joins for Spark to run
them as ksqlDB's do.

- a stream-stream join is bounded by its WITHIN (a time-range condition Spark keeps its state
  by) and watermarked by what Kafka Streams keeps (:func:`join_watermark`);
- a stream-table join whose table is read in batch joins the version of the table's row valid
  at the stream record's time (:func:`as_of_stream_time`);
- a table-table join's key columns are whichever side has the row (:func:`table_join_columns`,
  :func:`keyed_table_join_columns`), and an outer join's key column the join key, whichever
  side has it (:func:`outer_join_key`).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from sqlglot import exp

from metastore.engine.analysis import Analysis
from metastore.engine.joins import join_type
from metastore.planner.stages import JOIN_KEY
from metastore.planner.steps import (
    HEADERS,
    HEADERS_TYPE,
    NULL_VALUE,
    ROWTIME,
    SOURCE,
    TS,
    VALID_FROM,
    VALID_UNTIL,
    WINDOW,
)
from metastore.planner.table_state import AT, TABLES
from metastore.planner.table_state import JOIN_KEY as TABLE_JOIN_KEY
from metastore.sql.statements import JoinWindow, SourceKind

DEFAULT_JOIN_GRACE_MS = 24 * 60 * 60 * 1000
"""ksqlDB's grace of a stream-stream join without GRACE PERIOD."""

def outer_join_key(item: exp.Expr, select: exp.Select) -> exp.Expr:
    """A key column that is one side's join expression of an outer (LEFT, RIGHT or FULL) join:
    the join's key, whichever side has it (ksqlDB keys a joined record by the join key, so a
    record the other side does not match still has its key, whichever side's column names
    it)."""
    for join in select.args.get("joins") or []:
        on = join.args.get("on")
        while isinstance(on, exp.Paren):
            on = on.this
        if join_type(join) == "INNER" or not isinstance(on, exp.EQ):
            continue
        sides = (on.this, on.expression)
        if any(_same_column(item, side) for side in sides):
            return exp.func("coalesce", *(side.copy() for side in sides))
    return item


def _same_column(item: exp.Expr, side: exp.Expr) -> bool:
    """Whether two expressions are equal, a column named ``t.id`` in ON being SELECT *'s
    `T`.`ID` (an unquoted name is its upper case, a quoted one as written)."""
    if isinstance(item, exp.Column) and isinstance(side, exp.Column):
        return _resolved_name(item) == _resolved_name(side)
    return item == side


def _resolved_name(column: exp.Column) -> tuple[str, str]:
    def name(identifier: exp.Expr | None) -> str:
        if not isinstance(identifier, exp.Identifier):
            return ""
        text = str(identifier.this)
        return text if identifier.quoted else text.upper()
    return name(column.args.get("table")), name(column.this)


def join_watermark(windows: Mapping[int, JoinWindow], read: int,
                   outer: AbstractSet[int]) -> int:
    """A joined stream's watermark delay, the most of the joins it takes part in (``outer``:
    those whose unmatched records Spark's outer join writes, by index in ``windows``).

    Spark's stream-stream join drops a record older than the watermark (under the queries'
    ``max`` policy, the newest time of all sides, as Kafka Streams' shared stream time, less
    this delay) and evicts state by it. Kafka Streams keeps a joined record in its join window
    store for the window's size (``before`` + ``after``) plus the grace (ksqlDB's default 24
    hours without GRACE PERIOD), and a record arriving later joins any record still there: so
    that is the delay. Spark writes an outer join's unmatched record when the watermark passes
    its time + ``after``, which must be when the stream time passes its time + ``after`` +
    grace, as Kafka Streams writes it: such a join's delay is its grace alone."""
    delays = [_join_delay(w, index in outer) for index, w in windows.items()
              if read in (index, 0)]
    return max(delays, default=DEFAULT_JOIN_GRACE_MS)


def _join_delay(window: JoinWindow, writes_unmatched: bool) -> int:
    """How far behind the stream time a record of ``window``'s join may come and still join
    (its grace alone where Spark writes the join's unmatched records)."""
    grace = DEFAULT_JOIN_GRACE_MS if window.grace_ms is None else window.grace_ms
    return grace if writes_unmatched else window.before_ms + window.after_ms + grace


def bound_stream_joins(select: exp.Select, analysis: Analysis, windows: Mapping[int, JoinWindow],
                        first: str, streams: list[str]) -> None:
    """Spark's form of ksqlDB's stream-stream joins (on the rewritten query): each joined
    stream's records within ``[t - before, t + after]`` of the first stream's record (a
    time-range condition Spark bounds its join state by) and equalities Spark can see as
    such; records with a null value (tombstones) dropped on every side, as Kafka Streams' join
    skips them; the result's time the newest of the records joined, its headers the newest
    record's (the last stream's of equal times), and the source offsets of all of them."""
    joins = select.args.get("joins") or []
    for join in joins:  # in ON, NULL rejects a pair as FALSE does: COALESCE(a = b, FALSE) is a = b
        join.set("on", _plain_conjuncts(join.args["on"]))
    for index, window in windows.items():
        alias = analysis.reads[index].alias
        mine = exp.column(TS, table=alias, quoted=True)
        theirs = exp.column(TS, table=first, quoted=True)
        condition = exp.and_(
            exp.GTE(this=mine, expression=exp.Sub(this=theirs.copy(), expression=_interval(
                window.before_ms))),
            exp.LTE(this=mine.copy(), expression=exp.Add(this=theirs.copy(), expression=_interval(
                window.after_ms))))
        source_window = analysis.reads[index].source.window
        if source_window is not None:  # the same key in the same window
            condition = exp.and_(condition, *_same_window(alias, first,
                                                          source_window.kind == "SESSION"))
        join = joins[index - 1]
        join.set("on", exp.and_(exp.Paren(this=join.args["on"]), condition))
    for index, join in enumerate(joins):
        right = analysis.reads[index + 1]
        if right.source.kind is SourceKind.STREAM:
            join.set("on", exp.and_(join.args["on"], exp.Not(this=exp.column(
                NULL_VALUE, table=right.alias, quoted=True))))
    for alias in streams:
        select.where(exp.Not(this=exp.func("coalesce", exp.column(NULL_VALUE, table=alias,
                                                                  quoted=True), exp.false())),
                     copy=False)
    newest = exp.func("greatest", *(exp.column("ROWTIME", table=a, quoted=True)
                                    for a in streams))
    # Kafka Streams writes a pair when its later record arrives, with that record's headers
    headers = exp.Case(ifs=[exp.If(this=exp.EQ(this=exp.column("ROWTIME", table=a, quoted=True),
                                               expression=newest.copy()),
                                   true=exp.column(HEADERS, table=a, quoted=True))
                            for a in reversed(streams)],
                       default=exp.func("coalesce", *(exp.column(HEADERS, table=a, quoted=True)
                                                      for a in streams)))
    hidden = {
        ROWTIME: newest,
        HEADERS: headers,
        SOURCE: exp.Anonymous(this="concat_ws", expressions=[exp.Literal.string(","), *(
            exp.column(SOURCE, table=a, quoted=True) for a in streams)]),
    }
    _set_columns(select, hidden)


def _same_window(alias: str, first: str, session: bool) -> list[exp.Expr]:
    """Windowed streams join on their serialized keys, so on the window too: its start (a time
    window's key holds only its start), and a session's end."""
    bounds = ("start", "end") if session else ("start",)
    return [exp.EQ(this=exp.Dot(this=exp.column(WINDOW, table=alias, quoted=True),
                                expression=exp.to_identifier(bound)),
                   expression=exp.Dot(this=exp.column(WINDOW, table=first, quoted=True),
                                      expression=exp.to_identifier(bound)))
            for bound in bounds]


def as_of_stream_time(select: exp.Select, analysis: Analysis, tables: list[int],
                       streams: list[str]) -> None:
    """A stream-table join joins each stream record with the table's row as it stood at the
    record's time (the version valid then), as Kafka Streams joins a record with the table's
    state when it processes it: a table row written after the record does not join it. After a
    stream-stream join the record's time is the newest of the records joined (the one an
    outer join's unmatched side leaves NULL counts for nothing)."""
    joins = select.args.get("joins") or []
    for index in tables:
        before = {read.alias for read in analysis.reads[:index]}  # what its ON can see
        times = [exp.column("ROWTIME", table=stream, quoted=True) for stream in streams
                 if stream in before]
        time = times[0] if len(times) == 1 else exp.func("greatest", *times)
        alias = analysis.reads[index].alias
        start = exp.column(VALID_FROM, table=alias, quoted=True)
        until = exp.column(VALID_UNTIL, table=alias, quoted=True)
        valid = exp.and_(exp.GTE(this=time.copy(), expression=start), exp.Or(
            this=exp.Is(this=until, expression=exp.Null()),
            expression=exp.LT(this=time.copy(), expression=until.copy())))
        join = joins[index - 1]
        join.set("on", exp.and_(exp.Paren(this=join.args["on"]), exp.Paren(this=valid)))


def table_join_columns(select: exp.Select, tables: list[str], keys: list[str],
                        foreign: bool) -> None:
    """A table-table join's hidden columns: the join key (the first table's key, or the next
    table's where an outer join left it NULL; a foreign-key join's is the left table's), the
    newest time of the rows joined; tables carry no headers and no source offsets."""
    hidden = {
        ROWTIME: exp.func("greatest", *(exp.column("ROWTIME", table=t, quoted=True)
                                        for t in tables)),
        HEADERS: exp.cast(exp.Null(), HEADERS_TYPE),
        SOURCE: exp.cast(exp.Null(), "STRING"),
    }
    _set_columns(select, hidden)
    keyed = list(zip(tables, keys, strict=True))[:1 if foreign else None]
    key = exp.func("coalesce", *(exp.column(k, table=t, quoted=True) for t, k in keyed))
    select.append("expressions", exp.alias_(key, JOIN_KEY, quoted=True))


def keyed_table_join_columns(select: exp.Select, tables: list[str], present: exp.Expr,
                              keys: set[str]) -> None:
    """A keyed table-table join's row per changed key (see
    :func:`metastore.planner.table_state.join_tables_on_keys` and
    :func:`~metastore.planner.table_state.join_tables_on_foreign_key`) as its record: the result row when
    the joins' types and the WHERE admit one, else a tombstone of the key. The time is the
    newest of the rows joined and the change (Kafka Streams' max), a tombstone's the change's;
    tables carry no headers and no source offsets."""
    where = select.args.get("where")
    result = exp.and_(present, exp.Paren(this=where.this)) if where is not None else present
    select.set("where", None)
    changed = exp.column(AT, table=TABLES, quoted=True)
    joined_time = exp.func("greatest", *(exp.column("ROWTIME", table=t, quoted=True)
                                         for t in tables), changed.copy())
    _set_columns(select, {
        NULL_VALUE: exp.Not(this=exp.func("coalesce", result.copy(), exp.false())),
        ROWTIME: exp.If(this=exp.func("coalesce", result.copy(), exp.false()),
                        true=joined_time, false=changed),
        HEADERS: exp.cast(exp.Null(), HEADERS_TYPE),
        SOURCE: exp.cast(exp.Null(), "STRING"),
    })
    key = exp.column(TABLE_JOIN_KEY, table=TABLES, quoted=True)
    for item in select.expressions:  # a tombstone's key is the join key
        if item.alias_or_name in keys:
            part: exp.Expr = key.copy()
            column = item.this.find(exp.Column)
            if len(keys) > 1 and column is not None:  # the key's column (left table's) it reads
                part = exp.Dot(this=part, expression=exp.to_identifier(column.name, quoted=True))
            item.set("this", exp.func("coalesce", item.this, part))


def _set_columns(select: exp.Select, values: Mapping[str, exp.Expr]) -> None:
    """Give the projection's columns named in ``values`` those expressions."""
    for item in select.expressions:
        if isinstance(item, exp.Alias) and item.alias in values:
            item.set("this", values[item.alias])


def _plain_conjuncts(condition: exp.Expr) -> exp.Expr:
    """``condition`` with each ANDed ``COALESCE(x, FALSE)`` replaced by ``x``."""
    node = condition.unnest() if isinstance(condition, exp.Paren) else condition
    if isinstance(node, exp.And):
        return exp.and_(_plain_conjuncts(node.this), _plain_conjuncts(node.expression))
    operands: list[exp.Expr] = []
    if isinstance(node, exp.Coalesce):
        operands = [node.this, *node.expressions]
    elif isinstance(node, exp.Anonymous) and str(node.this).upper() == "COALESCE":
        operands = list(node.expressions)
    if len(operands) == 2 and isinstance(operands[1], exp.Boolean) and not operands[1].this:
        return _plain_conjuncts(operands[0])
    return node


def _interval(millis: int) -> exp.Expr:
    return exp.Interval(this=exp.Literal.string(str(millis)), unit=exp.var("MILLISECOND"))
