"""A node process with Spark and a Schema Registry, end to end: a stream inferred from the
registry, its AVRO records (written by a Confluent-framed producer) answered by a pull query,
a CTAS that aggregates them into an AVRO table, which registers its schema under its topic's
subject and answers pull queries too (records no codec can decode skipped by both, counted and
logged), INSERT VALUES in each registry format read back (PROTOBUF's and JSON_SR's unreadable
records skipped by pull queries and logged by a CSAS), a Protobuf schema that imports
another registered schema, and a query whose sink schema the registry refuses as it runs
(ksqlDB's SERIALIZATION_ERROR, then a USER error until the subject takes it), as is a record
the sink's registered schema cannot hold."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

import httpx
from confluent_kafka import Consumer, Producer

from metastore.kafka.settings import KafkaSettings
from metastore.schema_registry.client import SchemaReference, SchemaRegistryClient
from tests.queries.test_query_health import entries_of, until_state
from tests.queries.test_query_nodes import ksql
from tests.queries.test_skipped_records import earliest
from tests.queries.test_spark_jobs import read_all
from tests.spark.test_spark_catalog import query, wait_in_sync
from tests.support.kafka import unique
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually
from tests.unit.test_registry_schemas import zigzag

VALUE = {"type": "record", "name": "Order", "fields": [
    {"name": "item", "type": "string"}, {"name": "qty", "type": "long"}]}


def avro_record(schema_id: int, item: str, qty: int) -> bytes:
    """Confluent's wire format of an ``Order``: magic byte, schema id, the Avro binary."""
    text = item.encode()
    return b"\0" + struct.pack(">i", schema_id) + zigzag(len(text)) + text + zigzag(qty)


UNDECODABLE: tuple[Callable[[int], bytes], ...] = (
    lambda schema_id: b"\1" + avro_record(schema_id, "pen", 1)[1:],  # no magic byte
    lambda schema_id: avro_record(987_654, "pen", 1),  # an id the registry does not hold
    lambda schema_id: avro_record(schema_id, "pen", 1)[:8],  # truncated
)
"""Records no reader may turn into a row: each is skipped, and counted."""


def test_a_node_reads_infers_aggregates_and_answers_avro(
        registry_node: ServerProcess, client: SchemaRegistryClient,
        producer_factory: Callable[..., Producer], kafka_settings: KafkaSettings,
        registry_node_log: str) -> None:
    """With the node's processing log: its unreadable records are logged."""
    _reads_infers_aggregates_and_answers(registry_node, client, producer_factory,
                                         kafka_settings)


def _reads_infers_aggregates_and_answers(
        registry_node: ServerProcess, client: SchemaRegistryClient,
        producer_factory: Callable[..., Producer], kafka_settings: KafkaSettings) -> None:
    orders, counts = unique("orders"), unique("counts")
    key_id = client.register(f"{orders}-key", json.dumps("int"))
    value_id = client.register(f"{orders}-value", json.dumps(VALUE))
    node = registry_node
    ksql(node, f"CREATE STREAM ORDERS WITH (KAFKA_TOPIC='{orders}', FORMAT='AVRO', "
               "PARTITIONS=1);")
    [described] = ksql(node, "DESCRIBE ORDERS;")
    assert [(f["name"], f["schema"]["type"]) for f in described["sourceDescription"]["fields"]] \
        == [("ROWKEY", "INTEGER"), ("ITEM", "STRING"), ("QTY", "BIGINT")]
    producer = producer_factory()
    for number, (item, qty) in enumerate((("pen", 2), ("ink", 1), ("pen", 3))):
        key = b"\0" + struct.pack(">i", key_id) + zigzag(number)
        producer.produce(orders, key=key, value=avro_record(value_id, item, qty))
        producer.produce(orders, key=key, value=UNDECODABLE[number](value_id))
    producer.flush(10)
    wait_in_sync(node)
    schema, rows = query(node, "SELECT * FROM ORDERS;")
    assert schema == "`ROWKEY` INTEGER, `ITEM` STRING, `QTY` BIGINT"
    assert rows == [[0, "pen", 2], [1, "ink", 1], [2, "pen", 3]]

    ksql(node, f"CREATE TABLE COUNTS WITH (KAFKA_TOPIC='{counts}', PARTITIONS=1) AS "
               "SELECT ITEM, COUNT(*) AS N, SUM(QTY) AS TOTAL FROM ORDERS GROUP BY ITEM;")
    eventually(lambda: client.latest(f"{counts}-value") is not None, 180,
               "the CTAS to register its value schema", interval=0.5)
    registered = client.latest(f"{counts}-value")
    assert registered is not None and registered.schema_type == "AVRO"
    assert [f["name"] for f in json.loads(registered.schema)["fields"]] == ["N", "TOTAL"]
    assert client.latest(f"{counts}-key") is not None  # the ITEM key, a bare string

    def answered() -> bool:
        wait_in_sync(node)
        response = httpx.post(f"{node.url}/query", json={"ksql": "SELECT * FROM COUNTS;"},
                              timeout=120)
        return response.status_code == 200 and sorted(
            row["row"]["columns"] for row in response.json()[1:]) == [["ink", 1, 1],
                                                                       ["pen", 2, 5]]

    eventually(answered, 180, "the CTAS's rows", interval=0.5)

    def skipped() -> int:
        [listed] = ksql(node, "SHOW QUERIES;")
        return sum(q["skippedRecords"] for q in listed["queries"] if q["sinks"] == ["COUNTS"])

    eventually(lambda: skipped() == len(UNDECODABLE), 60,
               "the CTAS to count the records it could not decode", interval=0.5)
    [counter] = [q["id"] for q in ksql(node, "SHOW QUERIES;")[0]["queries"]
                 if q["sinks"] == ["COUNTS"]]
    logger = f"processing.{counter}.KsqlTopic.Source.deserializer"

    def all_logged() -> list[dict[str, Any]] | None:
        found = entries_of(kafka_settings, node, logger) or []
        return found if len(found) >= len(UNDECODABLE) else None

    logged = eventually(all_logged, 90, "the CTAS to log the records it could not decode",
                        interval=1)
    assert len(logged) == len(UNDECODABLE), logged
    assert {(e["message"]["type"], e["message"]["deserializationError"]["target"],
             e["message"]["deserializationError"]["topic"]) for e in logged} == {
                 (0, "value", orders)}, "AVRO's unreadable values, as the JSON's are logged"


UNREADABLE_VALUES = {
    "PROTOBUF": [b"\0\0\0", b"\1\0\0\0\1\0\x0a\x03ann"],  # cut short; no magic byte
    "JSON_SR": [b"\0\0\0", b'{"NAME": "ann"}'],
}
"""Values of the two registry formats whose unreadable records no other test logs."""


def test_each_registry_format_reads_back_inserted_values_and_logs_unreadable_ones(
        registry_node: ServerProcess, client: SchemaRegistryClient, registry_node_log: str,
        producer_factory: Callable[..., Producer], kafka_settings: KafkaSettings) -> None:
    """And the records of PROTOBUF and JSON_SR no codec can read are skipped by pull queries,
    and by a CSAS, which logs each (AVRO's: above)."""
    _inserted_read_back(registry_node, client, producer_factory, kafka_settings)


def _inserted_read_back(node: ServerProcess, client: SchemaRegistryClient,
                        producer_factory: Callable[..., Producer],
                        settings: KafkaSettings) -> None:
    formats = {"AVRO": "AVRO", "PROTOBUF": "PROTOBUF", "JSON_SR": "JSON"}
    topics = {fmt: unique(fmt.lower()) for fmt in formats}
    producer = producer_factory()
    for fmt, topic in topics.items():
        ksql(node, f"CREATE STREAM S_{fmt} (ID INT KEY, NAME STRING, PRICE DECIMAL(4, 2), "
                   f"TAGS ARRAY<STRING>) WITH (KAFKA_TOPIC='{topic}', FORMAT='{fmt}', "
                   "PARTITIONS=1);")
        ksql(node, f"INSERT INTO S_{fmt} (ID, NAME, PRICE, TAGS) VALUES (7, 'ann', 1.5, "
                   "ARRAY['x', 'y']);")
        for value in UNREADABLE_VALUES.get(fmt, []):
            producer.produce(topic, value=value)
        assert producer.flush(30) == 0
        ksql(node, f"INSERT INTO S_{fmt} (ID, NAME) VALUES (8, 'bob');")
    wait_in_sync(node)
    for fmt, topic in topics.items():
        _, rows = query(node, f"SELECT ID, NAME, PRICE, TAGS FROM S_{fmt};")
        unset = [] if fmt == "PROTOBUF" else None  # Protobuf has no NULL list
        assert rows == [[7, "ann", 1.5, ["x", "y"]], [8, "bob", None, unset]], fmt
        for side in ("key", "value"):
            registered = client.latest(f"{topic}-{side}")
            assert registered is not None and registered.schema_type == formats[fmt], (fmt, side)
    for fmt, values in UNREADABLE_VALUES.items():
        _logs_unreadable_values(node, settings, fmt, topics[fmt], len(values))


def _logs_unreadable_values(node: ServerProcess, settings: KafkaSettings, fmt: str, topic: str,
                            count: int) -> None:
    [created] = earliest(node, f"CREATE STREAM S_{fmt}_OUT WITH (VALUE_FORMAT='JSON') AS "
                               f"SELECT ID, NAME FROM S_{fmt};")
    logger = f"processing.{created['commandStatus']['queryId']}.KsqlTopic.Source.deserializer"
    try:
        logged = eventually(lambda: (found := entries_of(settings, node, logger) or [])
                            and len(found) >= count and found, 120,
                            f"the {fmt} CSAS to log its unreadable records", interval=1)
        assert sorted(json.loads(value)["NAME"] for _key, value, _headers in read_all(
            settings, f"S_{fmt}_OUT", 2)) == ["ann", "bob"]
    finally:
        ksql(node, f"DROP STREAM S_{fmt}_OUT DELETE TOPIC;")
    assert [(e["message"]["type"], e["message"]["deserializationError"]["target"],
             e["message"]["deserializationError"]["topic"]) for e in logged] == [
                 (0, "value", topic)] * count, logged


SHIPMENT = ('syntax = "proto3";\npackage shop;\nimport "shop/event.proto";\n'
            'message Shipment {\n  Event event = 1;\n  int64 weight = 2;\n}\n')
EVENT = ('syntax = "proto3";\npackage shop;\n'
         'message Event {\n  string name = 1;\n  Kind kind = 2;\n}\n'
         'enum Kind {\n  NEW = 0;\n  OLD = 1;\n}\n')


def test_a_protobuf_schema_that_imports_another_is_read_and_written(
        registry_node: ServerProcess,
        client: SchemaRegistryClient, consumer_factory: Callable[..., Consumer]) -> None:
    topic, event_subject = unique("shipments"), unique("event")
    client.register(event_subject, EVENT, "PROTOBUF")
    reference = SchemaReference("shop/event.proto", event_subject, 1)
    schema_id = client.register(f"{topic}-value", SHIPMENT, "PROTOBUF", (reference,))
    node = registry_node
    ksql(node, f"CREATE STREAM SHIPMENTS (ID INT KEY) WITH (KAFKA_TOPIC='{topic}', "
               "KEY_FORMAT='KAFKA', VALUE_FORMAT='PROTOBUF', PARTITIONS=1);")
    [described] = ksql(node, "DESCRIBE SHIPMENTS;")
    assert [(f["name"], f["schema"]["type"]) for f in described["sourceDescription"]["fields"]] \
        == [("ID", "INTEGER"), ("EVENT", "STRUCT"), ("WEIGHT", "BIGINT")]
    ksql(node, "INSERT INTO SHIPMENTS (ID, EVENT, WEIGHT) VALUES "
               "(1, STRUCT(NAME := 'crate', KIND := 'OLD'), 40);")
    wait_in_sync(node)
    _, rows = query(node, "SELECT ID, EVENT->NAME, EVENT->KIND, WEIGHT FROM SHIPMENTS;")
    assert rows == [[1, "crate", "OLD", 40]]
    record = consumer_factory(topic).poll(30)
    assert record is not None and record.error() is None
    value = record.value() or b""
    assert value[0] == 0 and struct.unpack(">i", value[1:5])[0] == schema_id, (
        "written with the registered schema, registered again with its reference")


def test_a_sink_schema_the_registry_refuses_is_a_serialization_error_until_it_takes_it(
        registry_node: ServerProcess, client: SchemaRegistryClient,
        producer_factory: Callable[..., Producer], kafka_settings: KafkaSettings,
        registry_node_log: str) -> None:
    """The node registers the sink's schema when the CSAS is written; the query registers it
    again as it writes its first record (ksqlDB's serializer does), and by then the subject
    holds an incompatible schema under BACKWARD compatibility."""
    _refused_then_taken(registry_node, client, producer_factory, kafka_settings)


def _refused_then_taken(node: ServerProcess, client: SchemaRegistryClient,
                        producer_factory: Callable[..., Producer],
                        kafka_settings: KafkaSettings) -> None:
    name = unique("REFUSED").upper().replace("-", "_")
    topic, sink = name.lower(), f"{name.lower()}-out"
    ksql(node, f"CREATE STREAM {name} (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{topic}', "
               "VALUE_FORMAT='JSON', PARTITIONS=1);")
    [created] = earliest(node, f"CREATE STREAM {name}_OUT WITH (KAFKA_TOPIC='{sink}', "
                               f"VALUE_FORMAT='AVRO') AS SELECT ID, V FROM {name};")
    query_id = created["commandStatus"]["queryId"]
    subject = f"{sink}-value"
    eventually(lambda: client.latest(subject) is not None, 60, "the sink's schema", interval=0.5)
    for permanent in ("false", "true"):
        httpx.delete(f"{client.url}/subjects/{subject}", params={"permanent": permanent},
                     timeout=10).raise_for_status()
    client.register(subject, json.dumps({"type": "record", "name": "Other", "fields": [
        {"name": "V", "type": "string"}]}))
    _compatibility(client, subject, "BACKWARD")
    producer = producer_factory()  # the source's first records: the query has written none
    for number in range(3):
        producer.produce(topic, key=struct.pack(">i", number), value=json.dumps({"V": number}))
    assert producer.flush(30) == 0

    error = _serialization_error(node, kafka_settings, query_id, sink,
                                 "the Schema Registry answered 409")
    assert subject in error["errorMessage"] and error["cause"]

    _compatibility(client, subject, "NONE")
    until_state(node, query_id, "RUNNING", timeout=120)
    assert len(read_all(kafka_settings, sink, 3)) == 3


def test_a_record_the_sinks_registered_schema_cannot_hold_is_a_serialization_error(
        registry_node: ServerProcess, client: SchemaRegistryClient,
        producer_factory: Callable[..., Producer], kafka_settings: KafkaSettings,
        registry_node_log: str) -> None:
    """A CSAS writes the schema its VALUE_SCHEMA_ID names, whose field has no NULL and no
    default: a NULL there is ksqlDB's SERIALIZATION_ERROR, then the query's USER error."""
    _unwritable(registry_node, client, producer_factory, kafka_settings)


def _unwritable(node: ServerProcess, client: SchemaRegistryClient,
                producer_factory: Callable[..., Producer], settings: KafkaSettings) -> None:
    name = unique("UNWRITABLE").upper().replace("-", "_")
    topic, sink = name.lower(), f"{name.lower()}-out"
    schema_id = client.register(f"{sink}-value", json.dumps({
        "type": "record", "name": "Out", "fields": [{"name": "V", "type": "int"}]}))
    ksql(node, f"CREATE STREAM {name} (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{topic}', "
               "VALUE_FORMAT='JSON', PARTITIONS=1);")
    [created] = earliest(node, f"CREATE STREAM {name}_OUT WITH (KAFKA_TOPIC='{sink}', "
                               f"VALUE_FORMAT='AVRO', VALUE_SCHEMA_ID={schema_id}) AS "
                               f"SELECT ID, V FROM {name};")
    query_id = created["commandStatus"]["queryId"]
    producer = producer_factory()
    for number, value in enumerate(([1], [None])):
        producer.produce(topic, key=struct.pack(">i", number), value=json.dumps({"V": value[0]}))
    assert producer.flush(30) == 0
    try:
        error = _serialization_error(node, settings, query_id, sink,
                                     'Out.V: NULL for a non-optional "int"')
    finally:
        ksql(node, f"DROP STREAM {name}_OUT;")
    assert "NULL for a non-optional" in error["errorMessage"], error


def _serialization_error(node: ServerProcess, settings: KafkaSettings, query_id: str,
                         sink: str, cause: str) -> dict[str, Any]:
    """``query_id``'s failure on its sink's value, once it is ERROR with ``cause``: a USER
    error, logged first as ksqlDB's serializer logs it; the entry's ``serializationError``."""
    seen = until_state(node, query_id, "ERROR", timeout=120)
    assert cause in (seen["errorMessage"] or ""), seen
    [explained] = ksql(node, f"EXPLAIN {query_id};")
    assert explained["queryDescription"]["queryErrors"][-1]["type"] == "USER"
    [logged, *_] = eventually(
        lambda: entries_of(settings, node, f"processing.{query_id}.OUTPUT.serializer"),
        60, "the serialization error in the processing log", interval=1)
    assert logged["level"] == "ERROR" and logged["message"]["type"] == 2
    error: dict[str, Any] = logged["message"]["serializationError"]
    assert (error["target"], error["topic"]) == ("value", sink)
    assert error["errorMessage"].startswith(f"Error serializing message to topic: {sink}. ")
    return error


def _compatibility(client: SchemaRegistryClient, subject: str, level: str) -> None:
    httpx.put(f"{client.url}/config/{subject}", json={"compatibility": level},
              timeout=10).raise_for_status()
