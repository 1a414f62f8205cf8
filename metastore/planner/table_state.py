"""Joins whose table sides are keyed state: a stream's joins with tables, and tables joined on
their primary keys or on a foreign key.

Kafka Streams joins a stream record with the table's current row for the record's join key,
kept in a state store that the table's changelog updates (a tombstone deletes the row). Here
each such join is the project's JVM ``StatefulProcessor`` (``io.metastore.join.TableSideJoin``,
run by Spark's ``transformWithState``) over the union of the stream's records and the table's
changelog, both streaming reads: its state, the table's latest row per join key, lives in the
query's checkpoint, and a micro-batch reads only the table records that are new.

For each joined table, in the order the query joins them, :func:`join_tables` adds three steps:
the stream's records with their join key (``__MS_JK``, the ON condition's stream-side
expression), the table's changelog with its key and its columns under hidden names, and the
join of the two (the stream's records with the table's columns filled in); a windowed query's
records then fall into their windows. The table's changelog is read from its first offset
whatever the query's ``auto.offset.reset``, so a query that starts at the stream's end still
joins the whole table. The query then
reads the last join's view, and each table's alias names its columns there through a
``LATERAL VIEW``, so the SELECT's references, qualified or not, read as they did in the join.

Tables joined on their primary keys (:func:`join_tables_on_keys`) are one operator, the JVM
``io.metastore.join.TableTableJoin``, over the union of their changelogs: its state is every
table's latest row per key, and it writes one row per key a micro-batch changed, with every
table's current row, which the SELECT reads through one ``LATERAL VIEW`` per table alias.

Tables joined on a foreign key (:func:`join_tables_on_foreign_key`) are two operators, as
Kafka Streams' subscription stores: ``io.metastore.join.ForeignKeySubscriptions``, keyed by the
left key, holds each left row with its foreign key and routes its changes to the foreign key;
``io.metastore.join.ForeignKeyJoin``, keyed by the foreign key (a left row without one, by its
own key), holds the right row and the left rows that reference it, and writes one row per left
key a micro-batch touched, in the same shape as the primary-key join's; tables joined after it
are a ``TableTableJoin`` whose first side is that join's rows.

An aggregation of a table-table join reads the join's rows as a table's changelog
(:func:`join_changelog`), which :mod:`metastore.planner.table_groups` aggregates as any table's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from metastore.catalog.model import DataSource
from metastore.engine.joins import join_type
from metastore.engine.pseudo_columns import PSEUDO_COLUMNS
from metastore.planner.exceptions import QueryRuntimeError
from metastore.planner.steps import (
    HEADERS,
    HEADERS_TYPE,
    KAFKA_TIMESTAMP,
    NULL_KEY,
    NULL_VALUE,
    RAW_KEY,
    ForeignKeyTableJoin,
    Step,
    TableJoin,
    TableSideJoin,
    window_columns,
)
from metastore.spark.types import quote
from metastore.sql.statements import WindowSpec

JOIN_KEY = "__MS_JK"
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SIDE = "__MS_SIDE"
DELETED = "__MS_DELETED"
AT, AT_PARTITION, AT_OFFSET = "__MS_AT", "__MS_AT_P", "__MS_AT_O"
ORDER_COLUMNS = dict(zip(PSEUDO_COLUMNS, (AT, AT_PARTITION, AT_OFFSET), strict=True))
"""The pseudo column each order column of a join's input is."""


@dataclass(frozen=True)
class JoinedTable:
    """A table the query joins as keyed state: its source, alias, and the view of its
    changelog (a streaming read, decoded)."""

    source: DataSource
    alias: str
    changes_view: str


def join_tables(select: exp.Select, stream_view: str, stream_alias: str,
                tables: list[JoinedTable], prefix: str, window: WindowSpec | None,
                stream_laterals: list[exp.Lateral] | None = None) -> list[Step]:
    """Rewrite ``select`` (already in Spark's terms) to read its stream-table joins from keyed
    state; returns the steps that register the views it then reads. ``stream_view`` is the
    stream's view, ``tables`` the joined tables in the order of the SELECT's JOINs; ``window``:
    the query's time window, which the joined records fall into (and are watermarked by its
    grace period) after the join, since the join's state keeps no event time;
    ``stream_laterals``: the views through which the stream's records (a stream-stream join's
    rows, :mod:`metastore.planner.joined_rows`) read their sources' columns."""
    joins = list(select.args.get("joins") or [])
    assert len(joins) == len(tables), "one JOIN per joined table"
    steps: list[Step] = []
    laterals: list[exp.Lateral] = []
    current = stream_view
    for number, (table, join) in enumerate(zip(tables, joins, strict=True), start=1):
        stream_side, table_side = _sides(join.args["on"], table)
        hidden = hidden_columns(table, number)
        view = f"{prefix}_join_{number}"
        records = exp.select(
            exp.Column(this=exp.Star(), table=exp.to_identifier(stream_alias, quoted=True)),
            exp.alias_(exp.Literal.number(1), SIDE, quoted=True),
            exp.alias_(exp.false(), DELETED, quoted=True),
            exp.alias_(stream_side.copy(), JOIN_KEY, quoted=True),
            *(exp.alias_(exp.column(pseudo, table=stream_alias, quoted=True), name, quoted=True)
              for pseudo, name in ORDER_COLUMNS.items()),
        ).from_(exp.Table(this=exp.to_identifier(current, quoted=True),
                          alias=exp.TableAlias(this=exp.to_identifier(stream_alias))))
        records.set("laterals", [lateral.copy() for lateral in
                                 [*(stream_laterals or []), *laterals]])
        steps += [
            Step(f"{view}_stream", records.sql(dialect="spark", identify=True)),
            _changelog(f"{view}_table", table, hidden, 0,
                       table_side.sql(dialect="spark", identify=True)),
            Step(view, keyed=TableSideJoin(f"{view}_stream", f"{view}_table",
                                          tuple(hidden.values()), join_type(join) == "LEFT")),
        ]
        laterals.append(lateral_view(table.alias, hidden, stream_alias))
        current = view
    bounds, hopping = window_columns(window)
    if bounds:
        steps += [Step(f"{prefix}_joined", f"SELECT * FROM {quote(current)}",
                       watermark_ms=window.grace_ms if window is not None else None),
                  Step(f"{prefix}_windowed", f"SELECT * FROM (SELECT *{bounds} FROM "
                                             f"{quote(prefix + '_joined')}){hopping}")]
        current = f"{prefix}_windowed"
    _read_from(select, current, stream_alias, laterals)
    return steps


def join_tables_before_streams(select: exp.Select, stream_view: str, stream_alias: str,
                               tables: list[JoinedTable], prefix: str, watermark_ms: int
                               ) -> list[Step]:
    """Rewrite ``select`` (in Spark's terms, its stream-stream joins bounded), which joins its
    first stream with ``tables`` and the records that join with other streams, to read the
    first stream's joins with the tables from keyed state (:func:`join_tables`); returns the
    steps that register the views it then reads. The first stream's alias reads the last table
    join's records, watermarked by ``watermark_ms`` as the stream's records are for the
    stream-stream joins after (no watermark comes before the keyed state), and the later
    joins' ON conditions read the tables' columns under their hidden names there."""
    joins = list(select.args.get("joins") or [])
    later = joins[len(tables):]
    select.set("joins", joins[:len(tables)])
    steps = join_tables(select, stream_view, stream_alias, tables, prefix, None)
    view = f"{prefix}_tables_joined"
    source = select.args["from_"].this
    steps.append(Step(view, f"SELECT * FROM {quote(source.name)}", watermark_ms=watermark_ms))
    source.set("this", exp.to_identifier(view, quoted=True))
    hidden = {(table.alias, name): column for number, table in enumerate(tables, start=1)
              for name, column in hidden_columns(table, number).items()}
    unqualified = {name: column for (_, name), column in hidden.items()}  # ksqlDB refuses an
    # unqualified name that more than one source has
    for join in later:
        for column in list(join.args["on"].find_all(exp.Column)):
            found = (hidden.get((column.table, column.name)) if column.table
                     else unqualified.get(column.name))
            if found is not None:
                column.replace(exp.column(found, table=stream_alias, quoted=True))
    select.set("joins", later)
    return steps


def hidden_columns(table: JoinedTable, number: int) -> dict[str, str]:
    """The names of the ``number``-th joined table's columns (its own and its pseudo columns)
    in a join's views."""
    names = [c.name for c in table.source.columns] + list(PSEUDO_COLUMNS)
    # the join's state is encoded with Avro, whose names are letters, digits and _: a column
    # named otherwise (`with.dot`) is hidden by its position
    return {name: f"__MS_J{number}_{name if _AVRO_NAME.fullmatch(name) else index}"
            for index, name in enumerate(names)}


def _read_from(select: exp.Select, view: str, alias: str, laterals: list[exp.Lateral]) -> None:
    """``select`` reading ``view`` (as ``alias``) instead of its FROM and JOINs, each joined
    table's columns under its own alias through ``laterals``."""
    select.set("joins", None)
    select.set("from_", exp.From(this=exp.Table(
        this=exp.to_identifier(view, quoted=True),
        alias=exp.TableAlias(this=exp.to_identifier(alias)))))
    select.set("laterals", [*laterals, *(select.args.get("laterals") or [])])


def _changelog(view: str, table: JoinedTable, hidden: dict[str, str], side: int,
               key_sql: str, extra: dict[str, str] | None = None) -> Step:
    """The step of ``view``: a joined table's changelog as a join's input, its columns under
    their ``hidden`` names, with its side, tombstones, join key (``key_sql``), order and the
    ``extra`` columns (name: SQL over the table's alias); a record without a key, or whose join
    key is NULL, joins nothing and is left out."""
    alias = quote(table.alias)
    columns = ", ".join([
        *(f"{alias}.{quote(name)} AS {quote(column)}" for name, column in hidden.items()),
        *(f"{sql} AS {quote(name)}" for name, sql in (extra or {}).items()),
        f"{side} AS {SIDE}", f"{alias}.{quote(NULL_VALUE)} AS {DELETED}",
        f"{key_sql} AS {JOIN_KEY}",
        # a tombstone of a table whose TIMESTAMP column gives its time has the record's
        f"coalesce({alias}.ROWTIME, unix_millis({alias}.{KAFKA_TIMESTAMP})) AS {AT}",
        f"{alias}.ROWPARTITION AS {AT_PARTITION}", f"{alias}.ROWOFFSET AS {AT_OFFSET}"])
    return Step(view, f"SELECT * FROM (SELECT {columns} FROM {quote(table.changes_view)} AS "
                      f"{alias} WHERE NOT {alias}.{quote(NULL_KEY)}) WHERE {JOIN_KEY} IS NOT NULL")


def _sides(on: exp.Expr, table: JoinedTable) -> tuple[exp.Expr, exp.Expr]:
    """The stream side and the table side of a join's ON equality (as rewritten into Spark's
    terms: possibly in parentheses and ``coalesce(..., false)``); the table's side is the one
    that reads only the table's columns."""
    while isinstance(on, (exp.Paren, exp.Coalesce, exp.Anonymous)):
        if isinstance(on, exp.Anonymous):  # coalesce(condition, false)
            if on.name.lower() != "coalesce" or not on.expressions:
                break
            on = on.expressions[0]
        else:
            on = on.this
    if not isinstance(on, exp.EQ):
        raise QueryRuntimeError(f"a stream-table join's ON must be an equality: {on.sql()}")
    names = set(hidden_columns(table, 0))

    def of_table(column: exp.Column) -> bool:
        return column.table == table.alias if column.table else column.name in names

    for table_side, stream_side in ((on.expression, on.this), (on.this, on.expression)):
        columns = list(table_side.find_all(exp.Column))
        if columns and all(of_table(column) for column in columns):
            return stream_side, table_side
    raise QueryRuntimeError(f"no side of the join's ON reads only {table.alias}: {on.sql()}")


def lateral_view(alias: str, hidden: dict[str, str], stream_alias: str) -> exp.Lateral:
    """``LATERAL VIEW INLINE(ARRAY(STRUCT(...))) alias AS names``: the table's columns, under
    their own names and the table's alias, from their hidden names in the joined view."""
    row = exp.Struct(expressions=[
        exp.PropertyEQ(this=exp.to_identifier(name, quoted=True),
                       expression=exp.column(column, table=stream_alias, quoted=True))
        for name, column in hidden.items()])
    quoted = "`" + alias.replace("`", "``") + "`"  # sqlglot writes a LATERAL VIEW's alias as is
    return exp.Lateral(
        this=exp.Inline(this=exp.Array(expressions=[row])), view=True, outer=False,
        alias=exp.TableAlias(this=exp.to_identifier(quoted),
                             columns=[exp.to_identifier(name, quoted=True) for name in hidden]))


TABLES = "__ms_tables"
"""The alias of a table-table join's keyed rows in the rewritten SELECT."""


def join_tables_on_keys(select: exp.Select, tables: list[JoinedTable], prefix: str
                        ) -> tuple[list[Step], exp.Expr]:
    """Rewrite ``select`` (already in Spark's terms), a join of ``tables`` on their primary keys
    (:func:`key_sql`), to read one row per key a micro-batch changed, with
    every table's current row from keyed state; returns the steps that register the views it
    reads and the condition under which the key has a result row (by the joins' types: an INNER
    join needs both sides, a LEFT the left, a RIGHT the right, a FULL either). The row's
    ``__MS_JK`` is its key and ``__MS_AT`` the newest time of the micro-batch's changes of it."""
    joins = list(select.args.get("joins") or [])
    views: list[str] = []
    columns: list[tuple[str, ...]] = []
    steps: list[Step] = []
    laterals: list[exp.Lateral] = []
    present: exp.Expr | None = None
    for number, table in enumerate(tables):
        hidden = hidden_columns(table, number)
        view = f"{prefix}_rows_{number}"
        steps.append(_changelog(view, table, hidden, number, key_sql(table)))
        views.append(view)
        columns.append(tuple(hidden.values()))
        laterals.append(lateral_view(table.alias, hidden, TABLES))
        has_row = exp.Not(this=exp.Is(this=exp.column(hidden["ROWOFFSET"], table=TABLES,
                                                      quoted=True), expression=exp.Null()))
        present = has_row if present is None else _joined(join_type(joins[number - 1]),
                                                          present, has_row)
    assert present is not None, "a join has tables"
    view = f"{prefix}_tables"
    steps.append(Step(view, keyed=TableJoin(tuple(views), tuple(columns))))
    _read_from(select, view, TABLES, laterals)
    return steps, exp.Paren(this=present)


def join_changelog(select: exp.Select, view: str, present: exp.Expr, aliases: list[str]
                   ) -> tuple[Step, list[exp.Lateral]]:
    """Rewrite ``select``, which reads a keyed table-table join's rows (after
    :func:`join_tables_on_keys` or :func:`join_tables_on_foreign_key`, whose result condition is
    ``present``, of the tables ``aliases`` name), to read ``view`` instead: those rows as a table's
    changelog, as an aggregation of the join consumes it (Kafka Streams aggregates a join's
    result table like any table). A row is keyed by the join key (``__MS_RAW_KEY``, its JSON
    text), a key without a result row is a tombstone, and its time is the newest of the rows
    joined and the change, as the join's record carries it. Returns the step of ``view`` and the
    views through which ``select`` reads each table's columns under its alias."""
    joined = select.args["from_"].this.name
    laterals: list[exp.Lateral] = list(select.args.get("laterals") or [])[:len(aliases)]
    changed = exp.column(AT, table=TABLES, quoted=True)
    result = exp.func("coalesce", present.copy(), exp.false())
    times = [exp.column("ROWTIME", table=alias, quoted=True) for alias in aliases]
    raw_key = exp.cast(exp.func("to_json", exp.func(
        "named_struct", exp.Literal.string("k"), exp.column(JOIN_KEY, table=TABLES, quoted=True))),
        "BINARY")
    rows = exp.select(
        exp.Column(this=exp.Star(), table=exp.to_identifier(TABLES)),
        exp.alias_(raw_key, RAW_KEY, quoted=True),
        exp.alias_(exp.Literal.number(0), "ROWPARTITION"),
        exp.alias_(exp.cast(exp.Literal.number(0), "BIGINT"), "ROWOFFSET"),
        exp.alias_(exp.If(this=result.copy(), true=exp.func("greatest", *times, changed.copy()),
                          false=changed.copy()), "ROWTIME"),
        exp.alias_(exp.Not(this=result.copy()), NULL_VALUE, quoted=True),
        exp.alias_(exp.cast(exp.Null(), HEADERS_TYPE), HEADERS,
                   quoted=True),
    ).from_(exp.Table(this=exp.to_identifier(joined, quoted=True),
                      alias=exp.TableAlias(this=exp.to_identifier(TABLES))))
    rows.set("laterals", [lateral.copy() for lateral in laterals])
    select.set("from_", exp.From(this=exp.Table(
        this=exp.to_identifier(f"{view}_input", quoted=True),
        alias=exp.TableAlias(this=exp.to_identifier(TABLES)))))
    return Step(view, rows.sql(dialect="spark", identify=True)), laterals


FOREIGN_KEY = "__MS_FK"
"""A left row's foreign key in a foreign-key join's input (of the right table's key type)."""


def join_tables_on_foreign_key(select: exp.Select, tables: list[JoinedTable],
                               right_key_type: str, prefix: str) -> tuple[list[Step], exp.Expr]:
    """Rewrite ``select`` (already in Spark's terms), a join of ``tables`` whose first join is
    on a foreign key (the ON's side that reads the first table) equal to the second table's
    key, and whose later joins are on the result's key (the first table's, as ksqlDB allows
    them), to read one row per key a micro-batch touched, with every table's row from keyed
    state; returns the steps that register the views it reads and the condition under which
    the key has a result row (by the joins' types, as :func:`join_tables_on_keys`).
    ``right_key_type``: the second table's key's Spark type, which the foreign key is cast to;
    the first table's key may have several columns (:func:`key_sql`).

    The first two tables are ``io.metastore.join.ForeignKeyJoin``; with more, its rows are the
    changelog of the first side of a primary-key join (``io.metastore.join.TableTableJoin``)
    with the others: a row the foreign-key join leaves without a result deletes that side's
    row."""
    joins = list(select.args.get("joins") or [])
    foreign_key, _ = _sides(joins[0].args["on"], tables[1])
    foreign = foreign_key.sql(dialect="spark", identify=True)
    hidden = [hidden_columns(table, number) for number, table in enumerate(tables)]
    laterals = [lateral_view(table.alias, names, TABLES) for table, names in zip(tables, hidden,
                                                                             strict=True)]
    rows = [exp.Not(this=exp.Is(this=exp.column(names["ROWOFFSET"], table=TABLES, quoted=True),
                                expression=exp.Null())) for names in hidden]
    steps = [_changelog(f"{prefix}_rows_0", tables[0], hidden[0], 0, key_sql(tables[0]),
                        {FOREIGN_KEY: f"CAST({foreign} AS {right_key_type})"}),
             _changelog(f"{prefix}_rows_1", tables[1], hidden[1], 1, key_sql(tables[1]))]
    joined = f"{prefix}_foreign"
    steps.append(Step(joined, keyed=ForeignKeyTableJoin(
        f"{prefix}_rows_0", f"{prefix}_rows_1", tuple(hidden[0].values()),
        tuple(hidden[1].values()))))
    present = _joined(join_type(joins[0]), rows[0], rows[1])
    if len(tables) == 2:
        _read_from(select, joined, TABLES, laterals)
        return steps, exp.Paren(this=present)
    first = (*hidden[0].values(), *hidden[1].values())
    has_result = present.sql(dialect="spark", identify=True).replace(f"{quote(TABLES)}.", "")
    steps.append(Step(f"{joined}_changes", (
        f"SELECT *, 0 AS {SIDE}, NOT coalesce({has_result}, false) AS {DELETED}, "
        f"0 AS {AT_PARTITION}, CAST(0 AS BIGINT) AS {AT_OFFSET} FROM {quote(joined)}")))
    views, columns = [f"{joined}_changes"], [first]
    for number in range(2, len(tables)):
        view = f"{prefix}_rows_{number}"
        steps.append(_changelog(view, tables[number], hidden[number], number - 1,
                                key_sql(tables[number])))
        views.append(view)
        columns.append(tuple(hidden[number].values()))
        present = _joined(join_type(joins[number - 1]), present, rows[number])
    steps.append(Step(f"{prefix}_tables", keyed=TableJoin(tuple(views), tuple(columns))))
    _read_from(select, f"{prefix}_tables", TABLES, laterals)
    return steps, exp.Paren(this=present)


def key_sql(table: JoinedTable) -> str:
    """A joined table's key, as the join keys its rows: its key column, or a struct of its key
    columns (a foreign-key join's left table may have several)."""
    columns = [f"{quote(table.alias)}.{quote(c.name)}" for c in table.source.key_columns]
    if len(columns) == 1:
        return columns[0]
    fields = ", ".join(f"'{c.name}', {column}" for c, column in
                       zip(table.source.key_columns, columns, strict=True))
    return f"named_struct({fields})"


def _joined(kind: str, left: exp.Expr, right: exp.Expr) -> exp.Expr:
    """Whether a join of type ``kind`` (:func:`metastore.engine.joins.join_type`) has a row,
    from whether its sides have."""
    if kind == "INNER":
        return exp.and_(left, right)
    if kind == "OUTER":
        return exp.or_(left, right)
    return left if kind == "LEFT" else right
