"""A record a query cannot read is skipped and counted, never turned into a row of NULLs: on the
suite's Spark node, for each format the runtime decodes with Spark alone, a stream of good and
undecodable records (values; keys too for JSON and KAFKA) under a CSAS, a CTAS count and a push
query (each counts them, the persistent queries log each in the processing log with its target,
exactly-once queries too); and a query with ``ksql.fail.on.deserialization.error`` fails on such
a record instead."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from metastore.engine.source_statistics import ERROR_STATS_NOTICE
from metastore.kafka.settings import KafkaSettings
from metastore.runtime.processing_log import logger
from metastore.runtime.processing_log_settings import ProcessingLogSettings
from tests.queries.test_push_queries import Lines
from tests.queries.test_query_nodes import ksql, queries
from tests.queries.test_spark_jobs import read_all
from tests.support.kafka import unique
from tests.support.servers import ServerProcess, gauge
from tests.support.waiting import eventually

GOOD = 3
"""Good records of each case: IDs 1 to 3, in groups of ID."""

CASES: dict[str, tuple[str, list[bytes], list[bytes]]] = {
    # format: (columns, good values for ID 1..3, undecodable values)
    "JSON": ("ID INT, FLAG BOOLEAN, L ARRAY<INT>",
             [json.dumps({"ID": i, "FLAG": i % 2 == 0, "L": [i, str(i)]}).encode()
              for i in range(1, GOOD + 1)],
             [b"\x00not json{", b'{"ID": 9, "FLAG": "true"}', b'{"ID": 9, "FLAG": tr',
              b'{"ID": "nine"}', b"[1, 2]", b'{"ID": 9, "L": ["41.5"]}', b'{"ID": 9, "L": [true]}']),
    "DELIMITED": ("ID INT, FLAG BOOLEAN",
                  [f"{i},{'true' if i % 2 == 0 else 'false'}".encode()
                   for i in range(1, GOOD + 1)],
                  [b"9", b"9,true,extra", b"nine,true", b"4.5,false"]),
    "PROTOBUF_NOSR": ("ID INT, FLAG BOOLEAN",  # fields 1 and 2, varints
                      [bytes([0x08, i, 0x10, i % 2]) for i in range(1, GOOD + 1)],
                      [b"\x08", b"\xff\xff\xff\xff", b"\x0a\x05ab"]),  # cut short, no tag
    "KAFKA": ("ID INT",
              [struct.pack(">i", i) for i in range(1, GOOD + 1)],
              [b"\x00\x00\x09", b"\x00\x00\x00\x00\x00\x00\x00\x09"]),
}


KEYS: dict[str, tuple[str, Callable[[int], bytes], list[bytes]]] = {
    # format: (its INT key's format, the key of record i, keys it cannot read), each with a good
    # value (ID 1): its row would be one ID too many
    "JSON": ("JSON", lambda i: str(i).encode(),
             [b"\x00not json", b'"nine"']),
    "KAFKA": ("KAFKA", lambda i: struct.pack(">i", i),
              [b"\x00\x09"]),
}
"""The formats whose streams have a key column, with records whose key alone is unreadable:
ksqlDB reads a record's key whether or not its query selects it."""


GUARANTEES = {"DELIMITED": {"processing.guarantee": "exactly_once_v2"}}
"""The formats whose persistent queries run exactly-once: their micro-batches reach the sink
through a transactional writer (``foreachBatch``) instead of Spark's Kafka sink, and must count
and log what they skip all the same."""


def produce(producer: Producer, topic: str, values: list[bytes],
            keys: list[bytes] | None = None) -> None:
    failed: list[object] = []
    for index, value in enumerate(values):
        key = struct.pack(">i", index) if keys is None else keys[index]
        producer.produce(topic, key=key, value=value,
                         on_delivery=lambda error, _message: failed.append(error) if error else None)
    assert producer.flush(30) == 0 and not failed, failed


def _stream(value_format: str, name: str) -> tuple[str, list[tuple[bytes, bytes]], list[str]]:
    """The CREATE STREAM of ``value_format``'s case, its records in order (key, value), and
    the target (``value``, ``key``) of each that no query may read."""
    columns, good, bad = CASES[value_format]
    key, key_of, bad_keys = KEYS.get(value_format, ("", lambda i: struct.pack(">i", i), []))
    values = [bad[0], *good[:1], *bad[1:], *good[1:]]
    records = [(key_of(index), value) for index, value in enumerate(values)]
    records[1:1] = [(bad_key, good[0]) for bad_key in bad_keys]  # after the first bad value
    declared = f"{columns}, K INT KEY) WITH (KEY_FORMAT='{key}'," if key else f"{columns}) WITH ("
    return (f"CREATE STREAM {name} ({declared} KAFKA_TOPIC='{name}', PARTITIONS=1, "
            f"VALUE_FORMAT='{value_format}');", records,
            ["value"] * len(bad) + ["key"] * len(bad_keys))


@pytest.mark.parametrize("value_format", sorted(CASES))
def test_undecodable_records_are_skipped_counted_and_the_queries_go_on(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer],
        kafka_settings: KafkaSettings, value_format: str) -> None:
    name = unique(f"SKIP_{value_format}").upper().replace("-", "_")
    sink, counts = f"{name}_OUT", f"{name}_COUNTS"
    created, records, targets = _stream(value_format, name)
    unreadable = len(targets)
    ksql(spark_node, created)
    produce(producer_factory(), name, [value for _key, value in records],
            [key for key, _value in records])
    aggregated = value_format != "KAFKA"  # ksqlDB refuses GROUP BY over KAFKA values
    earliest(spark_node, f"""
        CREATE STREAM {sink} WITH (KAFKA_TOPIC='{sink}', VALUE_FORMAT='JSON')
            AS SELECT {"K, " if value_format in KEYS else ""}ID FROM {name} EMIT CHANGES;""" + (f"""
        CREATE TABLE {counts} WITH (KAFKA_TOPIC='{counts}', VALUE_FORMAT='JSON')
            AS SELECT ID, COUNT(*) AS N FROM {name} GROUP BY ID EMIT CHANGES;"""
                                                         if aggregated else ""),
             GUARANTEES.get(value_format))
    written = _values(kafka_settings, sink, GOOD)
    assert sorted(v["ID"] for v in written) == list(range(1, GOOD + 1)), written
    if aggregated:
        counted = _values(kafka_settings, counts, GOOD)
        assert sorted(v["N"] for v in counted) == [1] * GOOD, "nothing counted for a bad record"

    reading = {q["id"]: q for q in queries(spark_node).values()
               if q["sinks"] in ([sink], [counts])}
    eventually(lambda: all(q["skippedRecords"] == unreadable
                           for q in _refreshed(spark_node, reading)),
               60, f"each query to count {unreadable} skipped records", interval=1)
    assert {q["state"] for q in _refreshed(spark_node, reading)} == {"RUNNING"}
    for query_id in reading:
        [explained] = ksql(spark_node, f"EXPLAIN {query_id};")
        properties = explained["queryDescription"]["overriddenProperties"]
        assert properties.get("processing.guarantee") == GUARANTEES.get(value_format, {}).get(
            "processing.guarantee", "at_least_once"), properties
    [described] = ksql(spark_node, f"DESCRIBE {name} EXTENDED;")
    assert re.fullmatch(  # as ksqlDB's server prints it, with when a reader last skipped one
        re.escape(ERROR_STATS_NOTICE + f"consumer-failed-messages:{len(reading) * unreadable:>10} "
                  "     last-failed: ") + r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z\n",
        described["sourceDescription"]["errorStats"]), described["sourceDescription"]

    assert gauge(spark_node, "metastore_records_skipped_total") >= len(reading) * unreadable
    entries = eventually(lambda: _logged(kafka_settings, spark_node, set(reading), unreadable),
                         90, f"each query to log its {unreadable} unreadable records",
                         interval=1)
    assert {(e["level"], e["message"]["type"]) for e in entries} == {("ERROR", 0)}
    errors = [e["message"]["deserializationError"] for e in entries]
    assert sorted((error["target"], error["topic"]) for error in errors) == sorted(
        (target, name) for _query in reading for target in targets), errors
    assert all(error["recordB64"] is None for error in errors), "rows.include is false"
    assert all(f"topic: {name}." in error["errorMessage"] for error in errors)
    if value_format == "JSON":  # the log's stream reads its entries
        ksql(spark_node, ProcessingLogSettings().stream_statement(spark_node.service_id))
        assert _pushed(spark_node, f"""SELECT LOGGER, MESSAGE->TYPE AS KIND,
            MESSAGE->DESERIALIZATIONERROR->TARGET AS TARGET FROM KSQL_PROCESSING_LOG
            WHERE MESSAGE->DESERIALIZATIONERROR->TOPIC = '{name}' EMIT CHANGES
            LIMIT {len(entries)};""", len(entries)) == sorted(
            [logger(query_id), 0, target] for query_id in reading for target in targets)

    skipped_before = gauge(spark_node, "metastore_records_skipped_total")

    def counted_and_logged() -> None:
        eventually(lambda: gauge(spark_node, "metastore_records_skipped_total")
                   >= skipped_before + unreadable, 60,
                   "the push query's skipped records to be counted", interval=1)
        eventually(lambda: len(_push_entries(kafka_settings, spark_node, name)) >= unreadable,
                   60,
                   "the push query's unreadable records to be logged", interval=1)

    pushed = _pushed(spark_node, f"SELECT ID FROM {name} EMIT CHANGES;", GOOD,
                     counted_and_logged)
    assert pushed == [[i] for i in range(1, GOOD + 1)]
    assert len(_push_entries(kafka_settings, spark_node, name)) == unreadable


def _pushed(server: ServerProcess, sql: str, rows: int,
            then: Callable[[], object] | None = None) -> list[list[Any]]:
    """The first ``rows`` rows of a push query from the start of its sources, sorted; ``then``
    is called while the query still runs."""
    body = {"sql": sql, "properties": {"auto.offset.reset": "earliest"}}
    with httpx.stream("POST", f"{server.url}/query-stream", json=body, timeout=120) as response:
        assert response.status_code == 200
        lines = Lines(response)
        lines.next_data()  # the header
        pushed = [json.loads(lines.next_data()) for _ in range(rows)]
        if then is not None:
            then()
    return sorted(pushed)


def test_a_query_that_fails_on_deserialization_errors_fails_naming_the_record(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer]) -> None:
    name = unique("FAILING").upper().replace("-", "_")
    ksql(spark_node, f"CREATE STREAM {name} (ID INT) WITH (KAFKA_TOPIC='{name}', PARTITIONS=1, "
                     "VALUE_FORMAT='JSON');")
    produce(producer_factory(), name, [b'{"ID": 1}', b"\x00not json{"])
    [created] = earliest(spark_node, f"CREATE STREAM {name}_OUT AS SELECT ID FROM {name} "
                                     "EMIT CHANGES;", {"ksql.fail.on.deserialization.error": "true"})
    query_id = created["commandStatus"]["queryId"]

    def failed() -> dict[str, Any] | None:
        found = queries(spark_node).get(query_id, {})
        return found if found.get("state") == "ERROR" else None

    status = eventually(failed, 120, f"{query_id} to fail on the undecodable record",
                        interval=1)
    assert "A record could not be deserialized" in str(status["errorMessage"])
    assert f"{name}/0/1" in str(status["errorMessage"]), "names the record's coordinates"


def earliest(server: ServerProcess, text: str,
             properties: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """``text``'s entities, its queries reading their sources from the start."""
    response = httpx.post(f"{server.url}/ksql", timeout=120, json={
        "ksql": text, "streamsProperties": {"auto.offset.reset": "earliest",
                                            **(properties or {})}})
    assert response.status_code == 200, response.text
    return list(response.json())


def _values(settings: KafkaSettings, topic: str, expected: int) -> list[dict[str, Any]]:
    """The values of the first ``expected`` records of ``topic``, then whatever followed within
    a few seconds (a record that should not be there)."""
    records = read_all(settings, topic, expected, timeout=120)
    records += read_all(settings, topic, expected + 1, timeout=5)[len(records):]
    return [json.loads(value) for _key, value, _headers in records if value is not None]


def _logged(settings: KafkaSettings, server: ServerProcess, query_ids: set[str],
            each: int) -> list[dict[str, Any]] | None:
    """The processing log's entries of ``query_ids``, once each query has ``each`` of them
    (None before: more may come)."""
    entries = [json.loads(value) for value in
               values_to_end(settings, ProcessingLogSettings().topic(server.service_id))]
    by_query = {query_id: [e for e in entries if e["logger"] == logger(query_id)]
                for query_id in query_ids}
    counts = {query_id: len(found) for query_id, found in by_query.items()}
    assert all(count <= each for count in counts.values()), f"logged twice: {counts}"
    if any(count < each for count in counts.values()):
        return None
    return [entry for found in by_query.values() for entry in found]


def _push_entries(settings: KafkaSettings, server: ServerProcess, source: str
                  ) -> list[dict[str, Any]]:
    """The processing log's entries of the push queries over ``source``."""
    entries = [json.loads(value) for value in
               values_to_end(settings, ProcessingLogSettings().topic(server.service_id))]
    return [e for e in entries if e["logger"].startswith(f"processing.transient_{source}_")]


def values_to_end(settings: KafkaSettings, topic: str) -> list[bytes]:
    """The values of a topic of one partition, up to its end now."""
    consumer = Consumer(settings.config(group_id=unique("log"), enable_auto_commit=False))
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        values: list[bytes] = []
        position = low
        while position < high:
            for message in consumer.consume(500, 1):
                assert message.error() is None, message.error()
                position = message.offset() + 1
                values += [message.value()] if message.value() is not None else []
        return values
    finally:
        consumer.close()


def _refreshed(server: ServerProcess, reading: dict[str, Any]) -> list[dict[str, Any]]:
    now = queries(server)
    return [now[query_id] for query_id in reading]
