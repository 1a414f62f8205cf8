"""ksqlDB REST entities (the JSON objects of a ``POST /ksql`` response) built from the catalog.

These are plain dicts in ksqlDB's shape (``@type``, ``statementText``, ``warnings``...), shared by
the REST server and the offline ``metastore check``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from metastore.catalog import commands as cmd
from metastore.catalog.image import Image
from metastore.catalog.model import Column, DataSource, PersistentQuery
from metastore.engine import overrides, properties
from metastore.engine import source_statistics as stats
from metastore.engine.overrides import NO_OVERRIDES, ConfigOverrides
from metastore.functions import describe as describe_functions
from metastore.sql import statements as st
from metastore.sql import types as ty

Entity = dict[str, Any]
QueryStatuses = Mapping[str, Mapping[str, Any]]
"""Per query id: ``state``, ``ownerNode``, ``lag``, ``message`` (see metastore.runtime.status)."""


def schema_json(sql_type: ty.SqlType) -> dict[str, Any]:
    """ksqlDB's ``SchemaInfo``: ``{type, fields, memberSchema}``."""
    if isinstance(sql_type, ty.ArrayType):
        return {"type": "ARRAY", "fields": None, "memberSchema": schema_json(sql_type.element)}
    if isinstance(sql_type, ty.MapType):
        return {"type": "MAP", "fields": None, "memberSchema": schema_json(sql_type.value)}
    if isinstance(sql_type, ty.StructType):
        return {"type": "STRUCT", "memberSchema": None,
                "fields": [{"name": n, "schema": schema_json(t)} for n, t in sql_type.fields]}
    if isinstance(sql_type, ty.DecimalType):
        return {"type": "DECIMAL", "fields": None, "memberSchema": None,
                "parameters": {"precision": sql_type.precision, "scale": sql_type.scale}}
    return {"type": sql_type.base, "fields": None, "memberSchema": None}


def field_json(column: Column) -> dict[str, Any]:
    data: dict[str, Any] = {"name": column.name, "schema": schema_json(column.type)}
    if column.is_key:
        data["type"] = "KEY"
    elif column.role is st.ColumnRole.HEADERS or column.role is st.ColumnRole.HEADER:
        data["type"] = "HEADER"
        if column.header_key is not None:
            data["headerKey"] = column.header_key
    return data


def base_entity(statement: st.Statement, kind: str) -> Entity:
    return {"@type": kind, "statementText": statement.text, "warnings": []}


def status_message(command: cmd.Command, image: Image, offset: int) -> tuple[str, str | None]:
    """The ``commandStatus.message`` and ``queryId`` ksqlDB reports for a command."""
    if isinstance(command, cmd.CreateSourceCommand):
        return f"{command.source.kind.label.capitalize()} created", None
    if isinstance(command, cmd.CreateAsSelectCommand):
        source = image.source(command.source.name)
        query_id = source.query_id if source else None
        return f"Created query with ID {query_id}", query_id
    if isinstance(command, cmd.InsertQueryCommand):
        query_id = command.id_at(offset)
        return f"Created query with ID {query_id}", query_id
    if isinstance(command, cmd.DropSourceCommand):
        return f"Source `{command.name}` (topic: {command.topic}) was dropped.", None
    if isinstance(command, cmd.TerminateCommand):
        return "Query terminated.", None
    if isinstance(command, cmd.PauseResumeCommand):
        return f"Query {'paused' if command.pause else 'resumed'}.", None
    if isinstance(command, cmd.AlterSourceCommand):
        return f"{command.kind.label.capitalize()} {command.name} altered.", None
    if isinstance(command, cmd.CreateTypeCommand):
        return (f"Registered custom type with name '{command.name}' and SQL type "
                f"{command.type.sql()}"), None
    if isinstance(command, cmd.DropTypeCommand):
        return f"Dropped type '{command.name}'", None
    return "Success", None


def current_status(statement: st.Statement, command: cmd.Command, image_after: Image,
                   offset: int) -> Entity:
    message, query_id = status_message(command, image_after, offset)
    return {**base_entity(statement, "currentStatus"), "commandId": command.command_id,
            "commandStatus": {"status": "SUCCESS", "message": message, "queryId": query_id},
            "commandSequenceNumber": offset}


def already_written(statement: st.Statement, command_id: str, offset: int) -> Entity:
    """The answer to a retried request whose record is already in the log (same request id)."""
    return {**base_entity(statement, "currentStatus"), "commandId": command_id,
            "commandStatus": {"status": "SUCCESS", "message": "Already written by an earlier "
                              "attempt of this request (same request id).", "queryId": None},
            "commandSequenceNumber": offset}


def warning(statement: st.Statement, message: str) -> Entity:
    return {**base_entity(statement, "warning_entity"), "message": message}


def source_summary(source: DataSource) -> dict[str, Any]:
    return {"type": source.kind.value, "name": source.name, "topic": source.topic,
            "keyFormat": source.key_format, "valueFormat": source.value_format,
            "isWindowed": source.window is not None}


def query_summary(query: PersistentQuery, image: Image,
                  status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """ksqlDB's ``RunningQuery``, plus where it runs: ``ownerNode``, ``lag``, ``errorMessage``,
    ``skippedRecords`` (records it could not deserialize, on its owner), ``processingErrors``
    (rows it could not compute, ksqlDB's record processing errors, on its owner), how it delivers
    them: ``processingGuarantee`` (DESCRIBE EXTENDED's queries show it), and what it read on
    its owner: ``recordsRead``, ``recordsPerSecond``.

    ``status`` is the runtime's view (``state``, ``ownerNode``, ``lag``, ``message``); without
    one (offline checks) the query is reported RUNNING (or PAUSED), as the catalog alone implies.
    """
    sink = image.source(query.sink)
    implied = "PAUSED" if query.paused else "RUNNING"
    state = str(status.get("state") or implied) if status is not None else implied
    return {"queryString": query.sql, "sinks": [query.sink],
            "sinkKafkaTopics": [sink.topic] if sink else [], "id": query.query_id,
            "statusCount": {state: 1}, "queryType": "PERSISTENT", "state": state,
            "ownerNode": status.get("ownerNode") if status else None,
            "lag": status.get("lag") if status else None,
            "skippedRecords": sum(_skipped(status).values()),
            "processingErrors": _count(status, "recordErrors"),
            "errorMessage": status.get("message") if status else None,
            "processingGuarantee": guarantee(query), **_throughput(status)}


def push_query_summaries(statuses: QueryStatuses | None) -> list[dict[str, Any]]:
    """ksqlDB's ``RunningQuery`` of each push query running in the service (``statuses``'
    entries of ``queryType`` PUSH), with the node it runs on."""
    return [{"queryString": status.get("queryString", ""), "sinks": [], "sinkKafkaTopics": [],
             "id": query_id, "statusCount": {"RUNNING": 1}, "queryType": "PUSH", "state": "RUNNING",
             "ownerNode": status.get("ownerNode")}
            for query_id, status in sorted((statuses or {}).items())
            if status.get("queryType") == "PUSH"]


def _throughput(status: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the query read on its owner: in all, and per second over the last 30 s."""
    flows = _consumed(status)
    return {"recordsRead": sum(int(flow.get("total") or 0) for flow in flows),
            "recordsPerSecond": round(sum(float(flow.get("perSecond") or 0.0)
                                          for flow in flows), 2)}


def _consumed(status: Mapping[str, Any] | None, topic: str | None = None
              ) -> list[Mapping[str, Any]]:
    """The owner's figures of what the query read (of ``topic``, or of every source topic):
    ``{total, perSecond, lastMs}`` each (the runtime's statistics, as its status carries them)."""
    statistics = status.get("statistics") if status else None
    consumed = statistics.get("consumed") if isinstance(statistics, Mapping) else None
    if not isinstance(consumed, Mapping):
        return []
    return [flow for name, flow in consumed.items()
            if isinstance(flow, Mapping) and topic in (None, name)]


def guarantee(query: PersistentQuery) -> str:
    """The processing guarantee ``query`` runs with: its command's, else at-least-once."""
    return overrides.processing_guarantee(dict(query.config)) or overrides.AT_LEAST_ONCE


def _count(status: Mapping[str, Any] | None, name: str) -> int:
    found = status.get(name) if status else None
    return found if isinstance(found, int) else 0


def _skipped(status: Mapping[str, Any] | None) -> Mapping[str, int]:
    """Records a query skipped because it cannot read them, by source, as its owner reports."""
    skipped = status.get("skipped") if status else None
    return skipped if isinstance(skipped, Mapping) else {}


def query_description(query_id: str, statement_text: str, columns: Sequence[Column],
                      sources: Sequence[str], sinks: Sequence[str], plan: str,
                      window_type: str | None = None, query_type: str = "PERSISTENT",
                      config: Mapping[str, str] | None = None,
                      status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """ksqlDB's ``QueryDescription``; ``plan`` is the query's Spark plan (its topology and
    execution plan in one text), ``status`` its runtime view (see :func:`query_summary`)."""
    state = str(status.get("state")) if status and status.get("state") else None
    owner = status.get("ownerNode") if status else None
    message = status.get("message") if status else None
    return {"id": query_id, "statementText": statement_text, "windowType": window_type,
            "fields": [field_json(c) for c in columns], "sources": sorted(set(sources)),
            "sinks": list(sinks), "topology": plan, "executionPlan": plan,
            "overriddenProperties": dict(config or {}),
            "ksqlHostQueryStatus": {owner: state} if owner and state else {},
            "queryType": query_type,
            "queryErrors": _errors(status, message),
            "tasksMetadata": [], "state": state, "consumerGroupId": ""}


def _errors(status: Mapping[str, Any] | None, message: str | None) -> list[dict[str, Any]]:
    """ksqlDB's ``queryErrors``: the owner's recent errors of the query (its current failure
    alone when the owner reported none)."""
    errors = status.get("errors") if status else None
    if isinstance(errors, list) and errors:
        return [dict(e) for e in errors if isinstance(e, Mapping)]
    return [{"errorMessage": message, "type": "UNKNOWN"}] if message else []


def explain_entity(statement: st.Statement, description: dict[str, Any]) -> Entity:
    """ksqlDB's ``QueryDescriptionEntity`` (EXPLAIN)."""
    return {**base_entity(statement, "queryDescription"), "queryDescription": description}


def query_descriptions(statement: st.Statement, descriptions: list[dict[str, Any]]) -> Entity:
    """ksqlDB's ``QueryDescriptionList`` (SHOW QUERIES EXTENDED)."""
    return {**base_entity(statement, "query_descriptions"), "queryDescriptions": descriptions}


def persistent_query_description(query: PersistentQuery, image: Image, plan: str,
                                 status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    sink = image.source(query.sink)
    implied = {"state": "PAUSED" if query.paused else "RUNNING"}
    return query_description(
        query.query_id, query.sql, sink.columns if sink else (), query.sources, [query.sink],
        plan, sink.window.kind if sink and sink.window else None, config={
            **dict(query.config), overrides.GUARANTEE_NAME: guarantee(query)},
        status=status or implied)


def source_description(source: DataSource, image: Image, extended: bool,
                       query_status: QueryStatuses | None = None) -> dict[str, Any]:
    def summaries(queries: Sequence[PersistentQuery]) -> list[dict[str, Any]]:
        return [query_summary(q, image, _status(query_status, q.query_id)) for q in queries]

    readers = [q.query_id for q in image.queries_reading(source.name)]
    writers = [q.query_id for q in image.queries_writing(source.name)]
    statuses = {query_id: _status(query_status, query_id) or {}
                for query_id in (*readers, *writers)} if extended else {}
    traffic = stats.traffic(source.topic, [statuses[q] for q in readers if q in statuses],
                            [statuses[q] for q in writers if q in statuses])
    failed = stats.failures(source.name, [statuses[q] for q in readers if q in statuses])
    return {
        "name": source.name, "windowType": source.window.kind if source.window else None,
        "readQueries": summaries(image.queries_reading(source.name)),
        "writeQueries": summaries(image.queries_writing(source.name)),
        "fields": [field_json(c) for c in source.columns], "type": source.kind.value,
        "timestamp": source.timestamp_column or "",
        "statistics": stats.statistics_text(traffic),
        "errorStats": stats.error_stats_text(failed),
        "extended": extended, "keyFormat": source.key_format, "valueFormat": source.value_format,
        "topic": source.topic, "partitions": source.partitions or 0, "replication": 0,
        "statement": source.statement,
        "queryOffsetSummaries": stats.offset_summaries(
            {q: statuses[q] for q in writers if q in statuses}),
        "sourceConstraints": [q.sink for q in image.queries_reading(source.name)],
        "clusterStatistics": [stat.to_json() for stat in traffic],
        "clusterErrorStats": [stat.to_json() for stat in failed],
    }


def _status(statuses: QueryStatuses | None, query_id: str) -> Mapping[str, Any] | None:
    if statuses is None:
        return None
    return statuses.get(query_id) or {"state": "PENDING"}


@dataclass(frozen=True)
class TopicListing:
    """What SHOW TOPICS says of a topic: its partitions and their replicas, and with EXTENDED
    the consumers assigned its partitions and their groups."""

    name: str
    partitions: int
    replicas: int = 1
    consumers: int = 0
    consumer_groups: int = 0


def topics_entity(statement: st.ListObjects, topics: Sequence[TopicListing]) -> Entity:
    """ksqlDB's ``KafkaTopicsList``, or with EXTENDED its ``KafkaTopicsListExtended``."""
    if statement.extended:
        return {**base_entity(statement, "kafka_topics_extended"), "topics": [
            {"name": t.name, "replicaInfo": [t.replicas] * t.partitions,
             "consumerCount": t.consumers, "consumerGroupCount": t.consumer_groups}
            for t in topics]}
    return {**base_entity(statement, "kafka_topics"), "topics": [
        {"name": t.name, "replicaInfo": [t.replicas] * t.partitions} for t in topics]}


def read_entity(statement: st.Statement, image: Image,
                topics: Sequence[TopicListing] | None = None,
                query_status: QueryStatuses | None = None,
                config: ConfigOverrides | None = None,
                server: Mapping[str, str] | None = None) -> Entity:
    """The answer to a statement that only reads the catalog (and the queries' runtime status).

    ``config``: the request's configuration overrides in force at the statement, ``server``:
    the node's own settings (both for SHOW PROPERTIES)."""
    if isinstance(statement, st.ListVariables):  # ksqlDB's VariablesList
        return {**base_entity(statement, "variables"), "variables": [
            {"name": name, "value": value} for name, value in statement.variables]}
    if isinstance(statement, st.UndefineVariable):  # ksqlDB's VariableExecutor.unset
        return warning(statement, f"Cannot undefine variable '{statement.name}' which was "
                                  "never defined")
    if isinstance(statement, st.DescribeFunction):  # ksqlDB's FunctionDescriptionList
        return {**base_entity(statement, "describe_function"),
                **describe_functions.describe(statement.name)}
    if isinstance(statement, st.ListObjects):
        return _list_entity(statement, image, topics, query_status, config, server)
    if isinstance(statement, st.Describe):
        source = image.sources[statement.name]
        return {**base_entity(statement, "sourceDescription"),
                "sourceDescription": source_description(source, image, statement.extended,
                                                        query_status)}
    if isinstance(statement, st.SetProperty):
        return {**base_entity(statement, "currentStatus"), "commandStatus": {
            "status": "SUCCESS", "message": f"Property {statement.name} set", "queryId": None}}
    if isinstance(statement, st.AssertTopic | st.AssertSchema | st.AssertSource):
        return _assertion_entity(statement)
    return {**base_entity(statement, "currentStatus"), "commandStatus": {
        "status": "SUCCESS", "message": "Validated", "queryId": None}}


def _list_entity(statement: st.ListObjects, image: Image, topics: Sequence[TopicListing] | None,
                 query_status: QueryStatuses | None, config: ConfigOverrides | None,
                 server: Mapping[str, str] | None) -> Entity:
    """The answer to SHOW (LIST) of streams, tables, queries, types, topics, functions or
    properties."""
    what = statement.what
    if what == "FUNCTIONS":
        return {**base_entity(statement, "function_names"),
                "functions": describe_functions.function_names()}
    if what == "PROPERTIES":
        return {**base_entity(statement, "properties"),
                **properties.properties_fields(config or NO_OVERRIDES, server)}
    if what in ("STREAMS", "TABLES"):
        return _sources_entity(statement, image, query_status)
    if what == "QUERIES":
        return {**base_entity(statement, "queries"), "queries": [
            query_summary(image.queries[q], image, _status(query_status, q))
            for q in sorted(image.queries)] + push_query_summaries(query_status)}
    if what == "TYPES":
        return {**base_entity(statement, "type_list"), "types": {
            name: schema_json(image.types[name]) for name in sorted(image.types)}}
    if what == "TOPICS":
        return topics_entity(statement, topics or [])
    return {**base_entity(statement, what.lower()), what.lower(): []}


def _sources_entity(statement: st.ListObjects, image: Image,
                    query_status: QueryStatuses | None) -> Entity:
    what = statement.what
    kind = st.SourceKind.STREAM if what == "STREAMS" else st.SourceKind.TABLE
    chosen = [image.sources[n] for n in sorted(image.sources) if image.sources[n].kind is kind]
    if statement.extended:
        return {**base_entity(statement, "source_descriptions"), "sourceDescriptions": [
            source_description(s, image, True, query_status) for s in chosen]}
    return {**base_entity(statement, what.lower()), what.lower(): [source_summary(s) for s in chosen]}


def _assertion_entity(statement: st.AssertTopic | st.AssertSchema | st.AssertSource) -> Entity:
    """ksqlDB's AssertTopicEntity and AssertSchemaEntity; an asserted source's status."""
    if isinstance(statement, st.AssertTopic):  # ksqlDB's AssertTopicEntity
        return {**base_entity(statement, "assert_topic"), "topicName": statement.topic,
                "exists": statement.exists}
    if isinstance(statement, st.AssertSchema):  # ksqlDB's AssertSchemaEntity
        return {**base_entity(statement, "assert_schema"), "subject": statement.subject,
                "id": statement.schema_id, "exists": statement.exists}
    return {**base_entity(statement, "currentStatus"), "commandStatus": {
            "status": "SUCCESS", "message": f"{statement.kind.label.capitalize()} "
                                            f"{statement.name} is as asserted", "queryId": None}}
