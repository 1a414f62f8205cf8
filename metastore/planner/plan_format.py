"""A query's plan as data: the versioned document a persistent query's command carries.

The planner's :class:`~metastore.planner.steps.QueryPlan` (its steps, each a Kafka read, a
SELECT or a keyed stateful operator, the batch stage, the sink's SQL and the flags the runtime
runs it with) is written once, when the statement is validated, into the command that creates
the query; every node then runs that plan, on replay and on takeover, never a plan its own code
would compile from the SQL. So a release that plans a query differently changes no running
query.

The document is JSON: ``{"format": 1, "versions": {node: version}, "plan": node}`` where a
node is an object naming its class (``"@": "Step"``) with its fields; ``versions`` names the
version of every node class the plan uses. A reader knows the versions in
:data:`NODE_VERSIONS`; a plan with a format, a class or a version it does not know, or that
calls a project SQL function this release does not have (``QueryPlan.functions``), is refused
(:class:`UnknownPlanVersionError`), so a node never runs a plan it would misread. What a
release may change: a new node class, or a field with a default, is a new version of that
class (older plans still read); a field's meaning never changes within a version; a project
SQL function never changes what it returns under its name (a change is a new name in
:data:`~metastore.jvm.classes.SQL_FUNCTIONS`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

from metastore.catalog.commands import canonical_json
from metastore.jvm.classes import SQL_FUNCTIONS, SQL_FUNCTIONS_CATALOG
from metastore.planner.exceptions import QueryRuntimeError
from metastore.planner.steps import (
    BatchStage,
    CheckedRows,
    FinalSessions,
    FinalWindows,
    ForeignKeyTableJoin,
    GroupMembers,
    QueryPlan,
    RecordCheck,
    RowVersions,
    SessionMembers,
    Step,
    StreamTime,
    TableJoin,
    TableSideJoin,
    UnmatchedRecords,
)

PLAN_FORMAT = 1
"""The document's own shape: ``format``, ``versions`` and ``plan``."""
PLANNER_VERSION = 10
"""The version of what the planner writes: a release that plans any query differently bumps
it (and the node versions whose meaning changed) and saves the new plans of ksqlDB's dev cases
(``python -m integration.plans save``); ``tests/plans/<version>/`` keeps each version's."""

_NODES: tuple[type[Any], ...] = (
    QueryPlan, Step, BatchStage, TableSideJoin, TableJoin, ForeignKeyTableJoin, RowVersions,
    GroupMembers, StreamTime, SessionMembers, FinalSessions, FinalWindows, UnmatchedRecords,
    CheckedRows, RecordCheck)
_FIELDS_SINCE: Mapping[tuple[str, str], int] = {("QueryPlan", "checked"): 2,
                                                    ("QueryPlan", "aggregated"): 3,
                                                    ("CheckedRows", "carried"): 2,
                                                    ("RecordCheck", "record"): 2,
                                                    ("QueryPlan", "functions"): 4}
"""The fields a later version of a class added (with a default), by the version that added
them: a node that leaves them at their default is written without them, as the earliest version
that reads it, so a plan that needs no new field runs on the nodes of an earlier release too."""
NODE_VERSIONS: Mapping[str, int] = {node.__name__: max(
    [1, *(v for (name, _), v in _FIELDS_SINCE.items() if name == node.__name__)])
    for node in _NODES}
"""The version of each node class this release writes, and the newest it reads."""
_CLASSES = {node.__name__: node for node in _NODES}
_FIELD_TYPES = {node.__name__: typing.get_type_hints(node) for node in _NODES}


class PlanFormatError(QueryRuntimeError):
    """A stored plan this node cannot read: malformed, or of a version it does not know."""


class UnknownPlanVersionError(PlanFormatError):
    """A stored plan written by a newer release: a format or node version this node does not
    know (``unknown``: what it names, as ``Step v2``)."""

    def __init__(self, unknown: str) -> None:
        super().__init__(f"The query's stored plan uses {unknown}, which this node does not "
                         f"know (it reads plan format {PLAN_FORMAT}); run it on a node of the "
                         "release that wrote it, or a newer one.")
        self.unknown = unknown


def plan_document(plan: QueryPlan) -> dict[str, Any]:
    """``plan`` as its versioned document."""
    used: dict[str, int] = {}
    encoded = _encode(plan, used)
    return {"format": PLAN_FORMAT, "versions": dict(sorted(used.items())), "plan": encoded}


def plan_text(plan: QueryPlan) -> str:
    """The canonical JSON text of ``plan``'s document (sorted keys, no spaces): equal plans,
    equal texts."""
    return canonical_json(plan_document(plan))


_PROJECT_FUNCTION = re.compile(rf"\b{SQL_FUNCTIONS_CATALOG}\.(\w+)\s*\(")


def called_functions(plan: QueryPlan) -> tuple[str, ...]:
    """The project's Spark SQL functions (:data:`~metastore.jvm.classes.SQL_FUNCTIONS`) that
    any SQL of ``plan`` calls, sorted, found in its document's text (a name in a string literal
    of the user's counts too, harmlessly: only the catalog's own names are kept)."""
    found = _PROJECT_FUNCTION.findall(plan_text(dataclasses.replace(plan, functions=())))
    return tuple(sorted(set(found) & set(SQL_FUNCTIONS)))


def read_plan(text: str) -> QueryPlan:
    """The plan of a stored document; :class:`PlanFormatError` if this node cannot read it."""
    try:
        document = json.loads(text)
    except ValueError as error:
        raise PlanFormatError(f"The query's stored plan is not JSON: {error}") from error
    if not isinstance(document, dict):
        raise PlanFormatError("The query's stored plan is not a JSON object.")
    plan_format = document.get("format")
    if type(plan_format) is not int or plan_format != PLAN_FORMAT:
        raise UnknownPlanVersionError(f"plan format {plan_format!r}")
    versions = document.get("versions")
    if not isinstance(versions, dict):
        raise PlanFormatError("The query's stored plan names no node versions.")
    for name, version in sorted(versions.items()):
        known = NODE_VERSIONS.get(name)
        if known is None or type(version) is not int or not 1 <= version <= known:
            raise UnknownPlanVersionError(f"{name} v{version}")
    plan = _decode(document.get("plan"), versions)
    if not isinstance(plan, QueryPlan):
        raise PlanFormatError("The query's stored plan holds no query plan.")
    unknown = sorted(set(plan.functions) - set(SQL_FUNCTIONS))
    if unknown:
        raise UnknownPlanVersionError(f"the SQL functions {', '.join(unknown)}")
    return plan


def _encode(value: Any, used: dict[str, int]) -> Any:
    """``value`` as JSON; ``used``: each node class it holds, with the earliest version that
    reads what it holds of it."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        written = [field for field in dataclasses.fields(value)
                   if (name, field.name) not in _FIELDS_SINCE
                   or getattr(value, field.name) != field.default]
        used[name] = max([used.get(name, 1), *(_FIELDS_SINCE.get((name, field.name), 1)
                                                for field in written)])
        return {"@": name, **{field.name: _encode(getattr(value, field.name), used)
                              for field in written}}
    if isinstance(value, tuple | list):
        return [_encode(item, used) for item in value]
    return value


def _decode(value: Any, versions: Mapping[str, int]) -> Any:
    if isinstance(value, list):
        return tuple(_decode(item, versions) for item in value)
    if not isinstance(value, dict):
        return value
    name = value.get("@")
    node = _CLASSES.get(str(name))
    if node is None or name not in versions:
        raise PlanFormatError(f"The query's stored plan holds an unknown node {name!r}.")
    known = {field.name for field in dataclasses.fields(node)}
    fields = {key: _decode(item, versions) for key, item in value.items() if key != "@"}
    declared = versions[node.__name__]
    newer = {key for key in fields if _FIELDS_SINCE.get((node.__name__, key), 1) > declared}
    if not fields.keys() <= known or newer:
        raise PlanFormatError(f"The query's stored plan gives {name} v{declared} the unknown "
                              "fields "
                              f"{sorted((fields.keys() - known) | newer)}.")
    hints = _FIELD_TYPES[node.__name__]
    wrong = sorted(key for key, item in fields.items() if not _is_a(item, hints[key]))
    if wrong:
        raise PlanFormatError(f"The query's stored plan gives {name} fields of the wrong type: "
                              f"{wrong}.")
    try:
        return node(**fields)
    except TypeError as error:
        raise PlanFormatError(f"The query's stored plan has a malformed {name}: {error}") from error


def _is_a(value: Any, hint: Any) -> bool:
    """Whether a decoded value has the type of a plan node's field (``str``, ``int``, ``bool``,
    ``None``, a node class, unions of them and tuples)."""
    if hint is type(None):
        return value is None
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_is_a(value, option) for option in typing.get_args(hint))
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_is_a(item, args[0]) for item in value)
        return len(value) == len(args) and all(map(_is_a, value, args))
    if hint in (bool, int, str):
        return type(value) is hint
    return isinstance(hint, type) and isinstance(value, hint)
