"""Resolved commands: what a validated statement does to the catalog, and their JSON form.

A command carries everything ``apply`` needs (names, columns and types, topic, formats, derived
schemas, a persistent query's configuration), so replay never re-reads Kafka, the clock, the
statement's text or the request's configuration overrides.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from metastore.catalog.model import Column, DataSource, WindowInfo
from metastore.sql.parser import parse_type
from metastore.sql.statements import ColumnRole, SourceKind
from metastore.sql.types import SqlType, StructType


@dataclass(frozen=True)
class Command:
    @property
    def command_id(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class CreateSourceCommand(Command):
    source: DataSource
    replace: bool = False

    @property
    def command_id(self) -> str:
        return f"{self.source.kind.label}/{self.source.name}/create"


@dataclass(frozen=True)
class CreateAsSelectCommand(Command):
    """CSAS / CTAS: the sink source and the persistent query that fills it (id from the offset)."""

    source: DataSource
    query_kind: str
    query_sources: tuple[str, ...]
    query_sql: str
    replace: bool = False
    config: tuple[tuple[str, str], ...] = ()
    """The query's ksqlDB settings (``ksql.functions.collect_list.limit``, ...), sorted."""
    plan: str = ""
    """The query's plan, fixed when it was written (the canonical JSON text of its document,
    :mod:`metastore.planner.plan_format`); '' in commands written before plans were kept."""

    @property
    def command_id(self) -> str:
        return f"{self.source.kind.label}/{self.source.name}/create"


@dataclass(frozen=True)
class InsertQueryCommand(Command):
    sink: str
    query_sources: tuple[str, ...]
    query_sql: str
    config: tuple[tuple[str, str], ...] = ()
    """The query's ksqlDB settings, as :attr:`CreateAsSelectCommand.config`."""
    plan: str = ""
    """The query's plan, as :attr:`CreateAsSelectCommand.plan`."""

    @property
    def command_id(self) -> str:
        return f"insert/{self.sink}/create"

    @staticmethod
    def id_at(offset: int) -> str:
        """The query's id when the command is at ``offset``."""
        return f"INSERTQUERY_{offset}"


@dataclass(frozen=True)
class DropSourceCommand(Command):
    kind: SourceKind
    name: str
    delete_topic: bool = False
    topic: str = ""

    @property
    def command_id(self) -> str:
        return f"{self.kind.label}/{self.name}/drop"


@dataclass(frozen=True)
class TerminateCommand(Command):
    query_ids: tuple[str, ...]

    @property
    def command_id(self) -> str:
        return f"terminate/{','.join(self.query_ids) or 'ALL'}/execute"


@dataclass(frozen=True)
class PauseResumeCommand(Command):
    """PAUSE (``pause``) or RESUME of these queries; ALL was resolved to ids at validation."""

    query_ids: tuple[str, ...]
    pause: bool
    all_queries: bool = False

    @property
    def command_id(self) -> str:
        target = "ALL" if self.all_queries else ",".join(self.query_ids)
        return f"{'pause' if self.pause else 'resume'}/{target}/execute"


@dataclass(frozen=True)
class AlterSourceCommand(Command):
    kind: SourceKind
    name: str
    columns: tuple[Column, ...]
    statement: str

    @property
    def command_id(self) -> str:
        return f"{self.kind.label}/{self.name}/alter"


@dataclass(frozen=True)
class CreateTypeCommand(Command):
    name: str
    type: SqlType

    @property
    def command_id(self) -> str:
        return f"type/{self.name}/create"


@dataclass(frozen=True)
class DropTypeCommand(Command):
    name: str

    @property
    def command_id(self) -> str:
        return f"type/{self.name}/drop"


# -- JSON ------------------------------------------------------------------------------------------
def names(command: Command) -> list[tuple[str, str]]:
    """``(what, name)`` of every name ``command`` adds to the catalog: sources, columns, fields,
    types."""
    found: list[tuple[str, str]] = []
    columns: tuple[Column, ...] = ()
    if isinstance(command, CreateSourceCommand | CreateAsSelectCommand):
        found.append(("source", command.source.name))
        columns = command.source.columns
    elif isinstance(command, AlterSourceCommand):
        columns = command.columns
    elif isinstance(command, CreateTypeCommand):
        found.append(("type", command.name))
        found += [("field", field) for field in _field_names(command.type)]
    for column in columns:
        found.append(("column", column.name))
        found += [("field", field) for field in _field_names(column.type)]
    return found


def _field_names(sql_type: SqlType) -> list[str]:
    return [name for nested in sql_type.walk() if isinstance(nested, StructType)
            for name, _ in nested.fields]


class CommandDecodeError(ValueError):
    pass


def column_json(column: Column) -> dict[str, Any]:
    data: dict[str, Any] = {"name": column.name, "type": column.type.sql(), "role": column.role.value}
    if column.header_key is not None:
        data["headerKey"] = column.header_key
    return data


_ROLES = {role.value: role for role in ColumnRole}
_KINDS = {kind.value: kind for kind in SourceKind}


def column_from_json(data: dict[str, Any]) -> Column:
    name, type_text, role, header_key = (data["name"], data["type"], data["role"],
                                         data.get("headerKey"))
    if isinstance(name, str) and isinstance(type_text, str) and isinstance(role, str) and (
            header_key is None or isinstance(header_key, str)):
        return _column(name, type_text, role, header_key)
    return Column(name=name, type=parse_type(type_text), role=_ROLES[role], header_key=header_key)


@lru_cache(maxsize=8192, typed=True)
def _column(name: str, type_text: str, role: str, header_key: str | None) -> Column:
    """Columns are immutable and catalogs repeat them (``ID INT KEY``...): one object each, which
    replay builds once."""
    return Column(name=name, type=parse_type(type_text), role=_ROLES[role], header_key=header_key)


def source_json(source: DataSource) -> dict[str, Any]:
    return {
        "name": source.name, "kind": source.kind.value,
        "columns": [column_json(c) for c in source.columns],
        "topic": source.topic, "keyFormat": source.key_format, "valueFormat": source.value_format,
        "partitions": source.partitions, "statement": source.statement,
        "isSource": source.is_source,
        "window": None if source.window is None else {"kind": source.window.kind,
                                                      "sizeMs": source.window.size_ms},
        "timestampColumn": source.timestamp_column,
        "properties": dict(source.properties),
    }


def source_from_json(data: dict[str, Any]) -> DataSource:
    window = data.get("window")
    return DataSource(
        name=data["name"], kind=_KINDS[data["kind"]],
        columns=tuple(column_from_json(c) for c in data["columns"]), topic=data["topic"],
        key_format=data["keyFormat"], value_format=data["valueFormat"],
        partitions=data.get("partitions"), statement=data["statement"],
        is_source=bool(data.get("isSource", False)),
        window=None if window is None else WindowInfo(window["kind"], window.get("sizeMs")),
        timestamp_column=data.get("timestampColumn"),
        properties=tuple(sorted((str(k), str(v)) for k, v in data.get("properties", {}).items())),
    )


def config_json(config: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """``{"config": {...}}`` of a query's settings; nothing when it has none, so that records
    (and images) of queries without settings are what they were before settings existed."""
    return {"config": dict(config)} if config else {}


def config_from_json(data: Any) -> tuple[tuple[str, str], ...]:
    if data is None:
        return ()
    if not isinstance(data, dict):
        raise TypeError("a query's config is an object")
    return tuple(sorted((str(k), str(v)) for k, v in data.items()))


def canonical_json(value: Any) -> str:
    """The one JSON text of ``value``: sorted keys, no spaces, characters as they are."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def plan_json(plan: str) -> dict[str, Any]:
    """A query command's plan field: its document, inline; nothing when it has none."""
    return {"plan": json.loads(plan)} if plan else {}


def plan_from_json(data: Any) -> str:
    """A query command's plan text from its record: canonical, whatever the record's spacing."""
    if data is None:
        return ""
    if not isinstance(data, dict):
        raise CommandDecodeError("malformed command: its plan is not a JSON object")
    return canonical_json(data)


def to_json(command: Command) -> dict[str, Any]:
    if isinstance(command, CreateSourceCommand):
        return {"type": "createSource", "source": source_json(command.source),
                "replace": command.replace}
    if isinstance(command, CreateAsSelectCommand):
        return {"type": "createAsSelect", "source": source_json(command.source),
                "queryKind": command.query_kind, "querySources": list(command.query_sources),
                "querySql": command.query_sql, "replace": command.replace,
                **config_json(command.config), **plan_json(command.plan)}
    if isinstance(command, InsertQueryCommand):
        return {"type": "insertQuery", "sink": command.sink,
                "querySources": list(command.query_sources), "querySql": command.query_sql,
                **config_json(command.config), **plan_json(command.plan)}
    if isinstance(command, DropSourceCommand):
        return {"type": "dropSource", "kind": command.kind.value, "name": command.name,
                "deleteTopic": command.delete_topic, "topic": command.topic}
    if isinstance(command, TerminateCommand):
        return {"type": "terminate", "queryIds": list(command.query_ids)}
    if isinstance(command, PauseResumeCommand):
        return {"type": "pause" if command.pause else "resume",
                "queryIds": list(command.query_ids), "all": command.all_queries}
    if isinstance(command, AlterSourceCommand):
        return {"type": "alterSource", "kind": command.kind.value, "name": command.name,
                "columns": [column_json(c) for c in command.columns],
                "statement": command.statement}
    if isinstance(command, CreateTypeCommand):
        return {"type": "createType", "name": command.name, "sqlType": command.type.sql()}
    if isinstance(command, DropTypeCommand):
        return {"type": "dropType", "name": command.name}
    raise TypeError(f"not a command: {command!r}")


def from_json(data: dict[str, Any]) -> Command:
    try:
        kind = data["type"]
        if kind == "createSource":
            return CreateSourceCommand(source_from_json(data["source"]), bool(data.get("replace", False)))
        if kind == "createAsSelect":
            return CreateAsSelectCommand(source_from_json(data["source"]), data["queryKind"],
                                         tuple(data["querySources"]), data["querySql"],
                                         bool(data.get("replace", False)),
                                         config_from_json(data.get("config")),
                                         plan_from_json(data.get("plan")))
        if kind == "insertQuery":
            return InsertQueryCommand(data["sink"], tuple(data["querySources"]), data["querySql"],
                                      config_from_json(data.get("config")),
                                      plan_from_json(data.get("plan")))
        if kind == "dropSource":
            return DropSourceCommand(SourceKind(data["kind"]), data["name"],
                                     bool(data.get("deleteTopic", False)), str(data.get("topic", "")))
        if kind == "terminate":
            return TerminateCommand(tuple(data["queryIds"]))
        if kind in ("pause", "resume"):
            return PauseResumeCommand(tuple(str(q) for q in data["queryIds"]), kind == "pause",
                                      bool(data.get("all", False)))
        if kind == "alterSource":
            return AlterSourceCommand(SourceKind(data["kind"]), data["name"],
                                      tuple(column_from_json(c) for c in data["columns"]), data["statement"])
        if kind == "createType":
            return CreateTypeCommand(data["name"], parse_type(data["sqlType"]))
        if kind == "dropType":
            return DropTypeCommand(data["name"])
    except (KeyError, TypeError, ValueError) as error:
        raise CommandDecodeError(f"malformed command: {error}") from error
    except Exception as error:  # a ParseError of a stored type is corruption, too
        raise CommandDecodeError(f"malformed command: {error}") from error
    raise CommandDecodeError(f"unknown command type: {data.get('type')!r}")
