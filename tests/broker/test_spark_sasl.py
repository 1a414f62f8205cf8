"""Spark's Kafka source and sink log in to a SASL_SSL broker with a node's own settings (librdkafka's
``sasl.username``, ``sasl.password`` and ``ssl.ca.location``, translated for Java by
:mod:`metastore.kafka.java_security`): a streaming query reads and writes data topics as the node
user, with only the data-topic ACLs docs/kafka-acls.md gives nodes with Spark, and its plan
shows no credential."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AclOperation, NewTopic, ResourcePatternType, ResourceType

from metastore.kafka.settings import KafkaSettings
from metastore.spark.views import raw_options, spark_kafka_options
from metastore.testing import cases
from metastore.testing.runner import QueryTestRunner
from tests.broker.conftest import SecuredKafka
from tests.broker.test_acls import Grant, bindings
from tests.support.waiting import eventually

Op = AclOperation


def test_a_streaming_query_reads_and_writes_a_sasl_ssl_broker_as_the_node_user(
        secured_kafka: SecuredKafka, spark: Any, tmp_path: Path) -> None:
    prefix = f"spark{uuid.uuid4().hex[:8]}."
    source, sink = f"{prefix}in", f"{prefix}out"
    secured_kafka.create_acls(bindings([Grant(  # row 6 of the documented ACLs, with Spark
        ResourceType.TOPIC, ResourcePatternType.PREFIXED, prefix,
        (Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.READ, Op.WRITE))],
        secured_kafka.node_user.principal))
    admin = secured_kafka.admin_client()
    for future in admin.create_topics([NewTopic(topic, 1, 1) for topic in (source, sink)]
                                      ).values():
        future.result()
    producer = Producer(secured_kafka.state.client_config())
    for word in ("a", "b", "c"):
        producer.produce(source, key=word.encode(), value=word.encode())
    assert producer.flush(30) == 0
    mark = secured_kafka.log_mark()

    node_user = secured_kafka.node_user
    options = spark_kafka_options(KafkaSettings(secured_kafka.bootstrap_servers,
                                                secured_kafka.node_config))
    upper = (spark.readStream.format("kafka").options(**raw_options(source, options)).load()
             .selectExpr("key", "upper(CAST(value AS STRING)) AS value"))
    query = (upper.writeStream.format("kafka").options(**options).option("topic", sink)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        assert eventually(lambda: _values(secured_kafka, sink, 3), 120,
                          "the query's three records in its sink", interval=1) == [b"A", b"B", b"C"]
        shown = str(upper._jdf.queryExecution()) + str(query._jsq.explainInternal(True))
    finally:
        query.stop()
    assert node_user.password not in shown and "sasl.jaas.config" in shown, \
        "the plan names the login setting but redacts its value"
    denied = [line for line in secured_kafka.denials_since(mark) if node_user.name in line]
    assert denied == [], "\n".join(denied)


def _values(kafka: SecuredKafka, topic: str, expected: int) -> list[bytes] | None:
    consumer = Consumer({**kafka.state.client_config(), "group.id": f"check-{uuid.uuid4()}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values = [m.value() for m in consumer.consume(expected, 5) if m.error() is None]
        return values if len(values) >= expected else None
    finally:
        consumer.close()


def test_a_query_test_runs_on_the_sasl_ssl_broker_with_the_given_login(
        secured_kafka: SecuredKafka, spark: Any, tmp_path: Path) -> None:
    """``metastore test --kafka K=V``: its runner's topics, JVM producer, Spark queries and
    readers all log in with the settings given."""
    sql = tmp_path / "doubled.sql"
    sql.write_text("CREATE STREAM NUMBERS (ID INT KEY, V INT) WITH (KAFKA_TOPIC='numbers', "
                   "VALUE_FORMAT='JSON'); CREATE STREAM DOUBLED AS SELECT ID, V * 2 AS W FROM "
                   "NUMBERS;")
    inputs, outputs = tmp_path / "in.json", tmp_path / "out.json"
    inputs.write_text('{"inputs": [{"topic": "numbers", "key": 1, "value": {"V": 21}}]}')
    outputs.write_text('{"outputs": [{"topic": "DOUBLED", "key": 1, "value": {"W": 42}}]}')
    test = cases.load_runner_files(sql, inputs, outputs)
    admin = secured_kafka.security.admin
    settings = KafkaSettings(secured_kafka.bootstrap_servers,
                             secured_kafka.security.client_config(admin))
    runner = QueryTestRunner(spark, settings, tmp_path / "queries", run_id=uuid.uuid4().hex[:8],
                             query_timeout=90)
    try:
        result = runner.run(test)
    finally:
        runner.close()
    assert (result.status, result.reason) == ("passed", "")
