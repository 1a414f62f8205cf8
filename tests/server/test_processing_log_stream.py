"""A node creates the processing log's topic and its stream ``KSQL_PROCESSING_LOG`` when it
starts, as ksqlDB's server does with ``ksql.logging.processing.*.auto.create``: once per
service, through the command log, with ksqlDB's schema, once it has replayed the log (a node
still catching up cannot write); and a bad property stops the node before it starts, naming
it. The nodes are the tests' own: what is tested is their start."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx

from metastore.kafka.admin import Admin
from metastore.runtime.processing_log_settings import ProcessingLogSettings
from tests.support.kafka import unique
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually

ON = ("--ksql-property", "ksql.logging.processing.topic.auto.create=true",
      "--ksql-property", "ksql.logging.processing.stream.auto.create=true")


def _ksql(server: ServerProcess, text: str) -> list[dict[str, Any]]:
    response = httpx.post(f"{server.url}/ksql", json={"ksql": text}, timeout=60)
    assert response.status_code == 200, response.text
    return list(response.json())


def test_a_node_creates_the_processing_log_topic_and_stream_once_per_service(
        server_factory: Callable[..., ServerProcess], kafka_admin: Admin) -> None:
    service_id = unique("svc")
    first = server_factory(*ON, service_id=service_id)
    topic = ProcessingLogSettings().topic(service_id)
    assert topic == f"{service_id}ksql_processing_log"

    def listed() -> list[dict[str, Any]] | None:
        [streams] = _ksql(first, "SHOW STREAMS;")
        found = [s for s in streams["streams"] if s["name"] == "KSQL_PROCESSING_LOG"]
        return found or None

    [stream] = eventually(listed, 30, "the processing log stream")
    assert (stream["topic"], stream["valueFormat"], stream["keyFormat"]) == (
        topic, "JSON", "KAFKA")
    shape = kafka_admin.describe(topic)
    assert shape is not None and shape.partitions == 1
    [described] = _ksql(first, "DESCRIBE KSQL_PROCESSING_LOG;")
    fields = {f["name"]: f["schema"] for f in described["sourceDescription"]["fields"]}
    assert list(fields) == ["LOGGER", "LEVEL", "TIME", "MESSAGE"]
    message = {f["name"] for f in fields["MESSAGE"]["fields"]}
    assert message == {"TYPE", "DESERIALIZATIONERROR", "RECORDPROCESSINGERROR",
                       "PRODUCTIONERROR", "SERIALIZATIONERROR", "KAFKASTREAMSTHREADERROR"}

    second = server_factory(*ON, service_id=service_id, node_id="node-2")
    [commands] = _ksql(second, "SHOW STREAMS;")
    assert [s["name"] for s in commands["streams"]] == ["KSQL_PROCESSING_LOG"]
    def created(server: ServerProcess) -> list[str]:
        return [line for line in server.output().splitlines()
                if "processing log stream KSQL_PROCESSING_LOG over" in line]

    eventually(lambda: "processing log stream KSQL_PROCESSING_LOG is in the catalog"
               in second.output() or None, 30, "the second node finding the stream")
    assert len(created(first)) == 1
    assert created(second) == [], "the second node finds the stream and writes nothing"


def test_a_node_that_replays_a_log_creates_the_stream_once_it_is_ready(
        server_factory: Callable[..., ServerProcess]) -> None:
    service_id = unique("svc")
    first = server_factory(service_id=service_id)  # the tests' default: no processing log
    _ksql(first, " ".join(f"CREATE TYPE T{n} AS STRUCT<A INT>;" for n in range(200)))
    # --no-snapshots and slow-replay (10 records per 0.1 s): about 2 s of catching up
    second = server_factory(*ON, "--fault-injection", "slow-replay", "--no-snapshots",
                            service_id=service_id, node_id="node-2")

    def listed() -> bool | None:
        [streams] = _ksql(second, "SHOW STREAMS;")
        return any(s["name"] == "KSQL_PROCESSING_LOG" for s in streams["streams"]) or None

    assert eventually(listed, 30, "the processing log stream")
    assert "could not be created" not in second.output()
    assert "were not created" not in second.output()


def test_a_bad_processing_log_property_stops_the_node_naming_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "server", "--bootstrap-servers", "127.0.0.1:1",
         "--ksql-property", "ksql.logging.processing.topic.partitions=none"],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "ksql.logging.processing.topic.partitions: 'none' is not a positive integer" in (
        result.stderr)
