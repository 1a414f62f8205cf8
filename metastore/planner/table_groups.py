"""Aggregations of a table whose input is keyed state: the table's latest row per key and each
group's rows.

Kafka Streams aggregates a table's changelog with each new value and the old value it replaces:
the old value is taken out of its group (ksqlDB's undo), the new one added to its group. Here
two of the project's JVM ``StatefulProcessor`` s, run by Spark's ``transformWithState`` over the
table's changelog (a streaming read), keep what that needs in the query's checkpoint:

1. ``io.metastore.aggregate.RowVersions``, keyed by the table's row key, holds each key's latest
   row; per micro-batch it writes the row a key had before (which leaves its group), every new
   version (each touches its group) and the row the key has after (which is in its group);
2. a SELECT gives each of those its group: the GROUP BY's values as a struct, or NULL when the
   aggregation's WHERE (with its skipping of tombstones and of NULL group values) drops the row;
3. ``io.metastore.aggregate.GroupMembers``, keyed by group, holds each group's rows; per
   micro-batch it writes, for each group touched, its rows and, marked as sentinels, the changes
   that touched it.

That is the input of the aggregation's batch stage (:func:`metastore.planner.stages.
aggregate_touched_groups`), which aggregates each touched group again without its sentinels.
So a micro-batch reads only the table's new records and the rows of the groups they touch,
where :func:`metastore.planner.stages.changelog_stage` re-reads the whole table's topic.
"""

from __future__ import annotations

from sqlglot import exp

from metastore.planner.steps import BatchStage, GroupMembers, RowVersions, Step
from metastore.spark.types import quote

GROUP = "__MS_GROUP"
"""The group a change of a table's row is in (a struct of the GROUP BY's values)."""


def aggregate_changelog(select: exp.Select, changelog_view: str, alias: str, input_view: str,
                        laterals: list[exp.Lateral] | None = None
                        ) -> tuple[list[Step], BatchStage]:
    """The steps and batch stage that feed ``select`` (an aggregation of a table, in Spark's
    terms, whose FROM reads ``input_view`` as ``alias``) from keyed state over the table's
    changelog in ``changelog_view``: ``input_view`` is then, per micro-batch, the rows of the
    groups its changes touched and those changes as sentinels. ``laterals``: the views through
    which ``select`` reads a joined row's tables, each under its alias (a table-table join's
    rows as their changelog, :func:`metastore.planner.table_state.join_changelog`)."""
    versions, grouped, members = (f"{changelog_view}_versions", f"{changelog_view}_grouped",
                                  f"{changelog_view}_members")
    group = select.args.get("group")
    values: list[exp.Expr] = []
    for index, expression in enumerate(group.expressions if group is not None else []):
        values += [exp.Literal.string(f"g{index}"), expression.copy()]
    key: exp.Expr = exp.func("named_struct", *(values or [exp.Literal.string("g"), exp.true()]))
    where = select.args.get("where")
    # a row the WHERE rejects is in no group, so the stage needs no WHERE: one that Spark folds
    # to FALSE would prune the keyed operators, whose state stores every micro-batch commits
    if where is not None:
        key = exp.If(this=exp.func("coalesce", exp.Paren(this=where.this.copy()), exp.false()),
                     true=key, false=exp.Null())
        select.set("where", None)
    keyed = exp.select(
        exp.Column(this=exp.Star(), table=exp.to_identifier(alias, quoted=True)),
        exp.alias_(key, GROUP, quoted=True),
    ).from_(exp.Table(this=exp.to_identifier(versions, quoted=True),
                      alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True))))
    if laterals:
        keyed.set("laterals", [lateral.copy() for lateral in laterals])
    in_groups = (f"SELECT * FROM ({keyed.sql(dialect='spark', identify=True)}) "
                 f"WHERE {quote(GROUP)} IS NOT NULL")
    steps = [Step(versions, keyed=RowVersions(changelog_view)),
             Step(grouped, in_groups),
             Step(members, keyed=GroupMembers(grouped))]
    return steps, BatchStage(source_sql=f"SELECT * FROM {quote(members)}", view=input_view,
                             steps=())
