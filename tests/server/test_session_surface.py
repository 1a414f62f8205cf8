"""The daily surface of a real node: variables, SET / UNSET, SHOW PROPERTIES, functions, topics
(ksqlDB's VariableExecutor, PropertyExecutor, ListPropertiesExecutor, ListFunctionsExecutor,
DescribeFunctionExecutor and ListTopicsExecutor)."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
from confluent_kafka import Consumer, Producer

from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from tests.server.test_rest_api import ksql
from tests.support.kafka import unique
from tests.support.servers import ServerProcess


def test_variables_substitute_in_later_statements_and_are_written_substituted(
        server: ServerProcess) -> None:
    topic = unique("vars")
    response = ksql(server, "DEFINE src = 'VARS_S'; DEFINE fmt = 'JSON';"
                            "CREATE STREAM ${src} (ID INT KEY, V STRING) WITH ("
                            "KAFKA_TOPIC=${topic}, VALUE_FORMAT='${fmt}', PARTITIONS=1);"
                            "UNDEFINE fmt; UNDEFINE fmt; SHOW VARIABLES; DESCRIBE ${src};",
                    sessionVariables={"topic": f"'{topic}'"})
    assert response.status_code == 200, response.text
    created, warning, variables, described = response.json()  # DEFINE, UNDEFINE: no entity
    assert created["@type"] == "currentStatus"
    assert created["statementText"].startswith("CREATE STREAM VARS_S (")
    assert f"KAFKA_TOPIC='{topic}'" in created["statementText"]
    assert warning == {"@type": "warning_entity", "statementText": "UNDEFINE fmt;",
                       "warnings": [], "message": "Cannot undefine variable 'fmt' which was "
                                                  "never defined"}
    assert variables["@type"] == "variables"
    assert variables["variables"] == [{"name": "src", "value": "VARS_S"},
                                      {"name": "topic", "value": f"'{topic}'"}]
    source = described["sourceDescription"]
    assert (source["name"], source["topic"], source["valueFormat"]) == ("VARS_S", topic, "JSON")
    assert f"'{topic}'" in source["statement"]  # the log holds the substituted text

    for text, message in (
            ("DESCRIBE ${nope};", "Illegal argument at Line: 1, Col: 10. Identifier names "
                                  "cannot start with '@'"),
            ("INSERT INTO VARS_S VALUES (${bad});", "Illegal argument at Line: 1, Col: 28.")):
        refused = ksql(server, text, sessionVariables={"bad": "1, 2"})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error_code"] == 40001
        assert message in refused.json()["message"]
    off = ksql(server, "SHOW VARIABLES; DESCRIBE FUNCTION ${f};", sessionVariables={"f": "X"},
               streamsProperties={"ksql.variable.substitution.enable": False})
    assert off.status_code == 400 and off.json()["error_code"] == 40001  # `$` stays: a syntax error


def test_set_unset_and_show_properties(plain_node: ServerProcess) -> None:
    response = ksql(plain_node, "SET 'auto.offset.reset' = 'earliest'; SHOW PROPERTIES;"
                            "UNSET 'auto.offset.reset'; SHOW PROPERTIES;",
                    streamsProperties={"ksql.streams.cache.max.bytes.buffering": 0})
    assert response.status_code == 200, response.text
    after_set, after_unset = response.json()  # SET and UNSET answer with no entity
    assert after_set["@type"] == "properties"

    def values(entity: dict[str, object]) -> dict[str, object]:
        return {p["name"]: p["value"] for p in entity["properties"]}  # type: ignore[attr-defined]

    assert values(after_set)["ksql.streams.auto.offset.reset"] == "earliest"
    assert values(after_set)["ksql.streams.cache.max.bytes.buffering"] == "0"
    assert values(after_set)["ksql.service.id"] == plain_node.service_id
    assert "ksql.streams.auto.offset.reset" in after_set["overwrittenProperties"]
    assert values(after_unset)["ksql.streams.auto.offset.reset"] == "latest"
    assert "ksql.streams.auto.offset.reset" in after_unset["defaultProperties"]

    for text, message in (
            ("SET 'auto.offset.reset' = 'none';",
             "'none' is not valid for this property within KSQL"),
            ("SET 'auto.offset.reset' = 'sometimes';", "Invalid value sometimes for "
             "configuration auto.offset.reset: String must be one of: latest, earliest, none"),
            ("SET 'ksql.no.such' = 'x';", "Unknown property: ksql.no.such"),
            ("UNSET 'ksql.no.such';", "Unknown property: ksql.no.such"),
            ("SET 'ksql.service.id' = 'other';", "prohibited by the KSQL server denylist")):
        refused = ksql(plain_node, text)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error_code"] == 40001 and message in refused.json()["message"]


def test_functions_from_the_registry(plain_node: ServerProcess) -> None:
    response = ksql(plain_node, "SHOW FUNCTIONS; DESCRIBE FUNCTION ucase; DESCRIBE FUNCTION count;")
    assert response.status_code == 200, response.text
    names, ucase, count = response.json()
    assert names["@type"] == "function_names"
    listed = {f["name"]: f for f in names["functions"]}
    assert listed["UCASE"] == {"name": "UCASE", "type": "SCALAR", "category": "STRING"}
    assert listed["COUNT"]["type"] == "AGGREGATE"
    assert ucase["@type"] == "describe_function" and ucase["type"] == "SCALAR"
    assert ucase["functions"] == [{"arguments": [{"name": "", "type": "STRING",
                                                  "description": "", "isVariadic": False}],
                                   "returnType": "STRING", "description": ""}]
    assert count["type"] == "AGGREGATE"
    unknown = ksql(plain_node, "DESCRIBE FUNCTION no_such_function;")
    assert unknown.status_code == 400
    assert unknown.json()["message"] == ("Can't find any functions with the name "
                                         "'NO_SUCH_FUNCTION'")


def test_topics_all_and_extended(plain_node: ServerProcess, kafka_bootstrap: str) -> None:
    topic = unique("extended")
    created = ksql(plain_node, f"CREATE STREAM EXT_S (ID INT KEY) WITH (KAFKA_TOPIC='{topic}', "
                           "VALUE_FORMAT='JSON', PARTITIONS=2);")
    assert created.status_code == 200, created.text
    group = unique("group")
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    try:
        consumer.subscribe([topic])
        for _ in range(100):  # until the group has its assignment
            consumer.poll(0.2)
            if consumer.assignment():
                break
        assert {p.partition for p in consumer.assignment()} == {0, 1}
        response = ksql(plain_node, "SHOW TOPICS; SHOW TOPICS EXTENDED; SHOW ALL TOPICS;"
                                "SHOW STREAMS EXTENDED;")
        assert response.status_code == 200, response.text
        plain, extended, every, streams = response.json()
    finally:
        consumer.close()
    assert plain["@type"] == "kafka_topics" and extended["@type"] == "kafka_topics_extended"
    mine = next(t for t in extended["topics"] if t["name"] == topic)
    assert mine == {"name": topic, "replicaInfo": [1, 1], "consumerCount": 2,
                    "consumerGroupCount": 1}
    shown = {t["name"] for t in plain["topics"]}
    everything = {t["name"] for t in every["topics"]}
    assert topic in shown
    admin = Admin(KafkaSettings(kafka_bootstrap))  # other tests' topics come and go meanwhile
    assert all(admin.describe(name) is None for name in shown - everything), \
        "SHOW ALL TOPICS lists every topic SHOW TOPICS does, but those deleted in between"
    hidden = {f"_metastore-{plain_node.service_id}-command-log", "__consumer_offsets"}
    assert hidden <= everything and not hidden & shown, "SHOW TOPICS hides the internal ones"
    assert streams["@type"] == "source_descriptions"
    assert "EXT_S" in {s["name"] for s in streams["sourceDescriptions"]}


def test_a_query_is_substituted_with_the_session_variables(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer]) -> None:
    from tests.spark.test_spark_catalog import key, wait_in_sync

    node = spark_node
    topic = unique("varquery")
    assert ksql(node, f"CREATE STREAM VQ (ID INT KEY, N INT) WITH (KAFKA_TOPIC='{topic}', "
                      "VALUE_FORMAT='JSON', PARTITIONS=1);").status_code == 200
    producer = producer_factory()
    for number in (1, 2):
        producer.produce(topic, key=key(number), value=json.dumps({"N": number * 10}))
    producer.flush(10)
    wait_in_sync(node)
    response = httpx.post(f"{node.url}/query", timeout=120, json={
        "ksql": "SELECT ID FROM ${source} WHERE N = ${n};",
        "sessionVariables": {"source": "VQ", "n": 20}})
    assert response.status_code == 200, response.text
    _, *rows = response.json()
    assert [row["row"]["columns"] for row in rows] == [[2]]
    refused = httpx.post(f"{node.url}/query", timeout=60, json={
        "ksql": "SELECT ID FROM VQ WHERE N = ${n};", "sessionVariables": {"n": "1 OR TRUE"}})
    assert refused.status_code == 400 and "Illegal argument" in refused.json()["message"]
