"""INSERT INTO ... VALUES over POST /ksql of a real node process: ksqlDB's answer (no entity),
the record in the topic, and ksqlDB's error with nothing written."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable

from confluent_kafka import Consumer

from tests.server.test_rest_api import ksql
from tests.support.kafka import unique
from tests.support.servers import ServerProcess


def test_insert_values_over_rest(plain_node: ServerProcess,
                                 consumer_factory: Callable[..., Consumer]) -> None:
    topic = unique("rest-iv")
    created = ksql(plain_node, f"CREATE STREAM RIV (ID INT KEY, V STRING) WITH (KAFKA_TOPIC="
                           f"'{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    assert created.status_code == 200, created.text
    inserted = ksql(plain_node, "INSERT INTO RIV (ID, V, ROWTIME) VALUES (3, 'x', 42);")
    assert inserted.status_code == 200, inserted.text
    assert inserted.json() == []
    refused = ksql(plain_node, "INSERT INTO RIV (ID, V) VALUES ('no', 'y');")
    assert refused.status_code == 400, refused.text
    body = refused.json()
    assert body["error_code"] == 40001
    assert body["message"] == ("Failed to insert values into 'RIV'. Expected type INTEGER for "
                               "field `ID` but got STRING(no)")
    consumer = consumer_factory(topic)
    found = []
    for _ in range(50):
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            found.append(message)
    assert [(m.key(), json.loads(m.value()), m.timestamp()[1]) for m in found] == [
        (struct.pack(">i", 3), {"V": "x"}, 42)]
