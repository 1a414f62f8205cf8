"""SESSION-windowed aggregations whose sessions are keyed state.

Kafka Streams' session aggregation keeps each key's sessions in a store: a record merges with
the sessions of its key it reaches within the gap, is dropped when late, and a merged or
extended session's old record is deleted. Here two of the project's JVM ``StatefulProcessor`` s,
run by Spark's ``transformWithState`` over the stream (a streaming read), keep what that needs
in the query's checkpoint:

1. a SELECT gives each record its group (the GROUP BY's values as a struct, or NULL when the
   aggregation's WHERE, with its skipping of tombstones and of NULL group values, drops it) and
   its time;
2. ``io.metastore.window.StreamTime``, keyed by source partition, gives each record the stream
   time it met (the newest time the aggregation has seen in the partition);
3. ``io.metastore.window.SessionMembers``, keyed by group, holds each group's live sessions and
   their records; per micro-batch it writes the records of each session the micro-batch changed
   and, marked earlier, those of each session it merged away.

That is the input of the stage that aggregates the changed sessions and deletes the merged ones
(:func:`metastore.planner.stages.session_changes`). So a micro-batch reads only the stream's new
records and the records of the sessions they touch, where
:func:`metastore.planner.stages.replay_sessions` replays the stream's whole topic.

EMIT FINAL writes a session once it closes, by stream time, which records of any group move;
so its sessions are one JVM processor's, ``io.metastore.window.FinalSessions``, keyed by source
partition (:func:`keyed_final_sessions`). Plans of planner version 5 and earlier replay the
stream instead, narrowed to the sessions each micro-batch closes
(:func:`metastore.planner.final_windows.close_sessions`).
"""

from __future__ import annotations

from sqlglot import exp

from metastore.planner.stages import aggregated_alias, records_seen, session_timing
from metastore.planner.steps import (
    SESSION,
    TS,
    BatchStage,
    FinalSessions,
    SessionMembers,
    Step,
    StreamTime,
)
from metastore.spark.types import quote
from metastore.sql.statements import WindowSpec

GROUP = "__MS_GROUP"
"""The group a record is in (a struct of the GROUP BY's values; for EMIT FINAL, its JSON text),
NULL for a record the aggregation does not see."""
EARLIER = "__MS_EARLIER"
"""Marks a record of a session as it stood before the micro-batch (a session it merged away)."""
_SESSION = (f"named_struct('start', timestamp_millis(__MS_SESSION_START), 'end', "
            f"timestamp_millis(__MS_SESSION_END)) AS {SESSION}")
"""A record's session, from the bounds the processors write."""


def keyed_sessions(aggregation: exp.Select, stream_view: str, input_view: str,
                   window: WindowSpec) -> tuple[list[Step], BatchStage]:
    """The steps and batch stage that feed ``aggregation`` (a SESSION-windowed aggregation of
    one stream, whose FROM reads ``input_view``) from keyed state over the stream's records in
    ``stream_view``: per micro-batch, ``input_view`` is the records of each session it changed,
    with their session (``__MS_SESSION``: TIMESTAMPs ``start``, ``end``) and, marked as
    sentinels, its own records; ``<input_view>_earlier`` the records of each session it merged
    away, with the session as it was."""
    grouped, timed, sessions = (f"{stream_view}_grouped", f"{stream_view}_timed",
                                f"{stream_view}_sessions")
    gap, grace, retention = session_timing(window)
    records = _grouped_records(aggregation, input_view, stream_view, as_json=False)
    steps = [Step(grouped, records),
             Step(timed, keyed=StreamTime(grouped)),
             Step(sessions, keyed=SessionMembers(timed, gap, grace, retention))]
    changes = f"{sessions}_changes"
    stage = BatchStage(
        source_sql=f"SELECT * FROM {quote(sessions)}", view=changes,
        steps=(Step(input_view, f"SELECT *, {_SESSION} FROM {quote(changes)} WHERE NOT {EARLIER}"),
               Step(f"{input_view}_earlier",
                    f"SELECT *, {_SESSION} FROM {quote(changes)} WHERE {EARLIER}")))
    return steps, stage


def keyed_final_sessions(aggregation: exp.Select, stream_view: str, input_view: str,
                         window: WindowSpec) -> tuple[list[Step], BatchStage]:
    """The steps and batch stage that feed ``aggregation`` (an EMIT FINAL SESSION-windowed
    aggregation of one stream, whose FROM reads ``input_view``) from keyed state over the
    stream's records in ``stream_view``: per micro-batch, ``input_view`` is the records of each
    session it closes, with their session (``__MS_SESSION``) and, marked as sentinels, its own
    records. Its group is named by its values' JSON text, which the processor keeps."""
    grouped, closed = f"{stream_view}_grouped", f"{stream_view}_closed"
    gap, grace, retention = session_timing(window)
    records = _grouped_records(aggregation, input_view, stream_view, as_json=True)
    steps = [Step(grouped, records),
             Step(closed, keyed=FinalSessions(grouped, gap, grace, retention))]
    changes = f"{closed}_changes"
    stage = BatchStage(source_sql=f"SELECT * FROM {quote(closed)}", view=changes,
                       steps=(Step(input_view, f"SELECT *, {_SESSION} FROM {quote(changes)}"),))
    return steps, stage


def _grouped_records(aggregation: exp.Select, input_view: str, stream_view: str, *,
                     as_json: bool) -> str:
    """The SELECT of the records in ``stream_view`` (as ``aggregation`` reads them from
    ``input_view``) with their group (:data:`GROUP`: a struct of its GROUP BY's values, or
    ``as_json``, that struct's JSON text), NULL for a record its WHERE rejects, and their time in
    milliseconds (``__MS_T``)."""
    group = aggregation.args.get("group")
    values: list[exp.Expr] = []
    for index, expression in enumerate(group.expressions if group is not None else []):
        if not (isinstance(expression, exp.Column) and expression.name == SESSION):
            values += [exp.Literal.string(f"g{index}"), expression.copy()]
    key: exp.Expr = exp.func("named_struct", *(values or [exp.Literal.string("g"), exp.true()]))
    if as_json:
        key = exp.Anonymous(this="to_json", expressions=[key])
    where = aggregation.args.get("where")
    if where is not None:  # a record the WHERE rejects is in no group and moves no stream time
        key = exp.If(this=exp.func("coalesce", exp.Paren(this=where.this.copy()), exp.false()),
                     true=key, false=exp.Null())
    alias = aggregated_alias(aggregation)
    unfiltered = aggregation.copy()
    unfiltered.set("where", None)
    items: list[exp.Expr] = [
        exp.Column(this=exp.Star(), table=exp.to_identifier(alias, quoted=True)),
        exp.alias_(key, GROUP, quoted=True),
        exp.alias_(exp.Anonymous(this="unix_millis", expressions=[
            exp.column(TS, table=alias, quoted=True)]), "__MS_T", quoted=True),
    ]
    return records_seen(unfiltered, items, input_view, stream_view)
