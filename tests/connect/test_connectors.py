"""The connector statements on a real Kafka Connect worker (Apache Kafka's own, distributed mode)
and a node process on the real broker: Kafka's FileStream source connector brings a file's lines
into a topic, and every statement answers with ksqlDB's entity; refused configs, unknown plugins
and a Connect that does not answer are statement errors that create nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer

from metastore.dev.connect_worker import ConnectState
from metastore.dev.kafka_cluster import free_ports
from metastore.dev.schema_registry import LocalSchemaRegistry, SchemaRegistryState
from tests.support.kafka import unique
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually

ServerFactory = Callable[..., ServerProcess]
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


@pytest.fixture
def node(server_factory: ServerFactory, connect_worker: ConnectState) -> ServerProcess:
    return server_factory("--connect-url", connect_worker.url)


def ksql(node: ServerProcess, text: str, status: int = 200,
         variables: dict[str, str] | None = None) -> Any:
    body: dict[str, Any] = {"ksql": text}
    if variables:
        body["sessionVariables"] = variables
    answer = httpx.post(f"{node.url}/ksql", json=body, timeout=60)
    assert answer.status_code == status, answer.text
    return answer.json()


def connectors(worker: ConnectState) -> list[str]:
    return list(httpx.get(f"{worker.url}/connectors", timeout=10).json())


def topic_values(bootstrap: str, topic: str, count: int) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("read"),
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[str] = []
    try:
        def enough() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(json.loads(message.value()))
            return len(values) >= count
        eventually(enough, 60, f"{count} records in {topic}", interval=0)
    finally:
        consumer.close()
    return values


def test_show_connector_plugins_lists_the_workers_plugins(node: ServerProcess) -> None:
    [listed] = ksql(node, "SHOW CONNECTOR PLUGINS;")
    assert listed["@type"] == "connector_plugins_list"
    assert set(listed) == {"@type", "statementText", "warnings", "connectorsPlugins"}
    assert all(set(p) == {"className", "type", "version"} for p in listed["connectorsPlugins"])
    plugins = {p["className"]: p for p in listed["connectorsPlugins"]}
    assert plugins[FILE_SOURCE]["type"] == "source"
    assert plugins["io.debezium.connector.postgresql.PostgresConnector"]["version"].startswith("3.")
    assert plugins["org.apache.kafka.connect.file.FileStreamSinkConnector"]["type"] == "sink"


def test_a_file_source_connector_brings_the_files_lines_and_every_statement_answers(
        node: ServerProcess, connect_worker: ConnectState, kafka_bootstrap: str,
        topic_factory: Callable[..., str], tmp_path: Path) -> None:
    lines = tmp_path / "lines.txt"
    lines.write_text("alpha\nbeta\ngamma\n")
    topic, name = topic_factory(prefix="file-lines"), unique("file-src")
    create = (f"CREATE SOURCE CONNECTOR `{name}` WITH ('connector.class'='FileStreamSource', "
              f"'file'='${{path}}', 'topic'='{topic}', 'tasks.max'=1);")
    [created] = ksql(node, create, variables={"path": str(lines)})
    try:
        _check_file_source(node, connect_worker, kafka_bootstrap, create, created, name, topic,
                           lines)
    finally:
        ksql(node, f"DROP CONNECTOR IF EXISTS `{name}`;")


def _check_file_source(node: ServerProcess, connect_worker: ConnectState, kafka_bootstrap: str,
                       create: str, created: dict[str, Any], name: str, topic: str,
                       lines: Path) -> None:
    assert created["@type"] == "connector_info"
    assert set(created) == {"@type", "statementText", "warnings", "info"}
    assert set(created["info"]) == {"name", "config", "tasks", "type"}
    assert created["info"]["name"] == name
    assert created["info"]["config"]["file"] == "[string]", "no value but the class is shown"
    assert str(lines) not in created["statementText"]
    assert "'file'='[string]'" in created["statementText"]
    assert topic_values(kafka_bootstrap, topic, 3) == ["alpha", "beta", "gamma"]

    def running() -> dict[str, Any] | None:
        [listed] = ksql(node, "SHOW SOURCE CONNECTORS;")
        found = [c for c in listed["connectors"] if c["name"] == name]
        return found[0] if found and found[0]["state"] == "RUNNING (1/1 tasks RUNNING)" else None
    entry = eventually(running, 60, "the connector's task running")
    assert entry == {"name": name, "type": "source", "className": "FileStreamSource",
                     "state": "RUNNING (1/1 tasks RUNNING)"}
    [sinks] = ksql(node, "SHOW SINK CONNECTORS;")
    assert name not in [c["name"] for c in sinks["connectors"]]

    stream = unique("LINES").replace("-", "_").upper()
    ksql(node, f"CREATE STREAM {stream} (LINE STRING) WITH (KAFKA_TOPIC='{topic}', "
               "VALUE_FORMAT='KAFKA');")
    [described] = ksql(node, f"DESCRIBE CONNECTOR `{name}`;")
    assert described["@type"] == "connector_description"
    assert set(described) == {"@type", "statementText", "connectorClass", "status", "sources",
                              "topics", "warnings"}
    assert set(described["status"]) == {"name", "connector", "tasks", "type"}
    assert described["connectorClass"] == "FileStreamSource"
    assert described["status"]["connector"]["state"] == "RUNNING"
    assert described["topics"] == [topic]
    assert [s["name"] for s in described["sources"]] == [stream]

    taken = ksql(node, create, status=409, variables={"path": str(lines)})
    assert (taken["error_code"], taken["message"]) == (40900, f"Connector {name} already exists")
    [kept] = ksql(node, create.replace("CONNECTOR", "CONNECTOR IF NOT EXISTS", 1),
                  variables={"path": str(lines)})
    assert kept["@type"] == "warning_entity"

    [dropped] = ksql(node, f"DROP CONNECTOR `{name}`;")
    assert dropped == {"@type": "drop_connector", "statementText": f"DROP CONNECTOR `{name}`;",
                       "connectorName": name, "warnings": []}
    assert name not in connectors(connect_worker)
    gone = ksql(node, f"DROP CONNECTOR `{name}`;", status=404)
    assert gone["error_code"] == 40400 and "Failed to drop connector" in gone["message"]
    [absent] = ksql(node, f"DROP CONNECTOR IF EXISTS `{name}`;")
    assert absent["message"] == f"Connector '{name}' does not exist."
    assert ksql(node, f"DESCRIBE CONNECTOR `{name}`;", status=404)["error_code"] == 40400


def test_a_config_connect_refuses_creates_nothing(node: ServerProcess,
                                                  connect_worker: ConnectState) -> None:
    before = connectors(connect_worker)
    unknown = ksql(node, "CREATE SOURCE CONNECTOR nope WITH ('connector.class'='no.such.Plugin',"
                         " 'password'='hunter2');", status=400)
    assert unknown["error_code"] == 40000
    assert unknown["message"].startswith("Validation error: ")
    assert "no.such.Plugin" in unknown["message"] and "hunter2" not in json.dumps(unknown)
    classless = ksql(node, "CREATE SINK CONNECTOR nope WITH ('topics'='t', "
                           "'password'='hunter2');", status=400)
    assert "contains no connector type" in classless["message"]
    assert "hunter2" not in json.dumps(classless)
    no_topics = ksql(node, "CREATE SINK CONNECTOR nope WITH ('connector.class'="
                           "'FileStreamSink', 'file'='/dev/null');", status=400)
    assert no_topics["message"].startswith("Validation error: ")
    assert "topics" in no_topics["message"]
    assert connectors(connect_worker) == before, "nothing was created"
    for unparsable in ("CREATE SOURCE CONNECTOR c WITH ('connector.class'='x', "
                       "'password'=hunter2);",
                       "CREATE SOURCE CONNECTOR c WITH ('connector.class'='x', "
                       "'password'=\"hunter2\", oops);"):
        refused = ksql(node, unparsable, status=400)
        assert refused["error_code"] == 40001
        assert "hunter2" not in json.dumps(refused), "an error shows the statement masked"
    stream = unique("LATER").replace("-", "_").upper()
    later_refused = ksql(node, f"CREATE SOURCE CONNECTOR `{unique('early')}` WITH ("
                               f"'connector.class'='FileStreamSource', 'file'='/dev/null', "
                               f"'topic'='t'); DESCRIBE {stream};", status=400)
    assert f"Could not find STREAM/TABLE '{stream}'" in later_refused["message"]
    assert connectors(connect_worker) == before, "no statement acts before all are valid"


def test_a_connect_that_does_not_answer_is_a_statement_error(
        server_factory: ServerFactory) -> None:
    [port] = free_ports(1)
    node = server_factory("--connect-url", f"http://127.0.0.1:{port}")
    refused = ksql(node, "SHOW CONNECTORS;", status=400)
    assert refused["error_code"] == 40001
    assert f"Kafka Connect at http://127.0.0.1:{port} did not answer" in refused["message"]
    assert ksql(node, "SHOW STREAMS;")[0]["@type"] == "streams", "the node serves on"


def test_a_file_sink_connector_writes_a_streams_records_to_a_file(
        node: ServerProcess, connect_worker: ConnectState, tmp_path: Path) -> None:
    stream, name = unique("ORDERS").replace("-", "_").upper(), unique("file-sink")
    out = tmp_path / "orders.jsonl"
    ksql(node, f"CREATE STREAM {stream} (ID INT KEY, ITEM STRING, QTY INT) WITH ("
               f"KAFKA_TOPIC='{stream.lower()}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    ksql(node, f"INSERT INTO {stream} (ID, ITEM, QTY) VALUES (1, 'apple', 3);"
               f"INSERT INTO {stream} (ID, ITEM, QTY) VALUES (2, 'pear', 5);")
    [created] = ksql(node, f"CREATE SINK CONNECTOR `{name}` WITH ("
                           "'connector.class'='org.apache.kafka.connect.file.FileStreamSinkConnector', "
                           f"'topics'='{stream.lower()}', 'file'='{out}', "
                           "'key.converter'='org.apache.kafka.connect.converters."
                           "ByteArrayConverter', "
                           "'value.converter'='org.apache.kafka.connect.storage.StringConverter');")
    assert created["info"]["type"] == "sink"
    try:
        def written() -> list[dict[str, Any]] | None:
            rows = [json.loads(line) for line in out.read_text().splitlines()] \
                if out.exists() else []
            return rows if len(rows) >= 2 else None
        assert eventually(written, 60, "the sink's file") == [
            {"ITEM": "apple", "QTY": 3}, {"ITEM": "pear", "QTY": 5}]
        [listed] = ksql(node, "SHOW SINK CONNECTORS;")
        assert [c["type"] for c in listed["connectors"] if c["name"] == name] == ["sink"]
    finally:
        ksql(node, f"DROP CONNECTOR `{name}`;")


def test_a_sink_connector_reads_an_avro_stream_through_the_schema_registry(
        server_factory: ServerFactory, connect_worker: ConnectState, tmp_path: Path) -> None:
    """A registry of the test's own: the suite's is another unit of the schedule's."""
    launcher = LocalSchemaRegistry(tmp_path / "registry")
    registry = launcher.start(progress=None)
    try:
        _avro_sink(server_factory, connect_worker, registry, tmp_path)
    finally:
        launcher.stop()


def _avro_sink(server_factory: ServerFactory, connect_worker: ConnectState,
               registry: SchemaRegistryState, tmp_path: Path) -> None:
    node = server_factory("--connect-url", connect_worker.url,
                          "--schema-registry-url", registry.url)
    stream, name = unique("AVRO_ORDERS").replace("-", "_").upper(), unique("avro-sink")
    out = tmp_path / "orders.txt"
    ksql(node, f"CREATE STREAM {stream} (ID INT KEY, ITEM STRING, QTY INT) WITH ("
               f"KAFKA_TOPIC='{stream.lower()}', VALUE_FORMAT='AVRO', PARTITIONS=1);")
    ksql(node, f"INSERT INTO {stream} (ID, ITEM, QTY) VALUES (1, 'apple', 3);")
    registry_api = registry.url.replace("/apis/ccompat/v7", "/apis/registry/v2")
    ksql(node, f"CREATE SINK CONNECTOR `{name}` WITH ("
               "'connector.class'='org.apache.kafka.connect.file.FileStreamSinkConnector', "
               f"'topics'='{stream.lower()}', 'file'='{out}', "
               "'key.converter'='org.apache.kafka.connect.converters.ByteArrayConverter', "
               "'value.converter'='io.apicurio.registry.utils.converter.AvroConverter', "
               f"'value.converter.apicurio.registry.url'='{registry_api}', "
               "'value.converter.apicurio.registry.as-confluent'='true', "
               "'value.converter.apicurio.registry.use-id'='contentId', "
               "'value.converter.apicurio.registry.headers.enabled'='false');")
    try:
        written = eventually(lambda: out.exists() and out.read_text().strip(), 60,
                             "the sink's file")
        assert written == "Struct{ITEM=apple,QTY=3}"
    finally:
        ksql(node, f"DROP CONNECTOR `{name}`;")


