"""Push queries (``SELECT ... EMIT CHANGES``) on a node process with Spark and real Kafka: over
``/query`` and ``/query-stream``, rows produced after the query starts, LIMIT, ``/close-query``,
``auto.offset.reset``, and a client that disconnects stops the query and frees its Spark query."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from confluent_kafka import Producer

from metastore.kafka.settings import KafkaSettings
from tests.queries.test_query_nodes import ksql
from tests.queries.test_spark_jobs import read_all
from tests.support.kafka import unique
from tests.support.servers import WRITE_TIMEOUT, ServerProcess, gauge
from tests.support.waiting import eventually

ServerFactory = Callable[..., ServerProcess]


@pytest.fixture
def node(spark_node: ServerProcess) -> ServerProcess:
    """The suite's shared Spark node: every test here names its own streams."""
    return spark_node


def insert(server: ServerProcess, stream: str, *rows: tuple[int, str]) -> None:
    values = " ".join(f"INSERT INTO {stream} (ID, V) VALUES ({i}, '{v}');" for i, v in rows)
    ksql(server, values)


def create_stream(server: ServerProcess) -> str:
    name = unique("S").upper().replace("-", "_")
    ksql(server, f"CREATE STREAM {name} (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{name}', "
                 "VALUE_FORMAT='JSON', PARTITIONS=1);")
    return name


class Lines:
    """The lines of a streamed response, read as they arrive."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines = response.iter_lines()

    def next_data(self) -> str:
        for line in self._lines:
            if line.strip():
                return line
        raise AssertionError("the response ended")


def test_push_query_over_query_sees_new_rows_honours_limit_and_frees_spark(
        node: ServerProcess) -> None:
    stream = create_stream(node)
    insert(node, stream, (0, "before"))
    baseline = gauge(node, "metastore_spark_streaming_queries")
    body = {"ksql": f"SELECT ID, UCASE(V) AS U FROM {stream} WHERE ID > 0 EMIT CHANGES LIMIT 2;",
            "streamsProperties": {}}
    started = time.monotonic()
    with httpx.stream("POST", f"{node.url}/query", json=body, timeout=120) as response:
        assert response.status_code == 200
        lines = Lines(response)
        header = json.loads(lines.next_data().lstrip("[").rstrip(","))
        assert header["header"]["schema"] == "`ID` INTEGER, `U` STRING"
        assert header["header"]["queryId"].startswith(f"transient_{stream}_")
        assert gauge(node, "metastore_push_queries") == 1
        eventually(lambda: gauge(node, "metastore_spark_streaming_queries") == baseline + 1, 60,
                   "the push query's Spark query", interval=0.5)
        # 'latest' by default: rows come from what is produced once the query reads, so
        # pairs of rows (one the WHERE drops) are produced until the query has its LIMIT
        stop = threading.Event()

        def produce() -> None:
            for i in range(1, 120):
                if stop.wait(0.5):
                    return
                insert(node, stream, (-i, "filtered"), (i, f"r{i}"))

        producing = threading.Thread(target=produce, daemon=True)
        producing.start()
        try:
            first = json.loads(lines.next_data().rstrip(","))
            first_row_seconds = time.monotonic() - started
            second = json.loads(lines.next_data().rstrip(","))
            final = lines.next_data()
        finally:
            stop.set()
            producing.join()
    i = first["row"]["columns"][0]
    assert i > 0
    assert first == {"row": {"columns": [i, f"R{i}"]}}
    assert second == {"row": {"columns": [i + 1, f"R{i + 1}"]}}
    assert final == '{"finalMessage":"Limit Reached"}]'
    assert first_row_seconds < 60
    eventually(lambda: gauge(node, "metastore_push_queries") == 0, 30, "the query to stop", interval=0.5)
    eventually(lambda: gauge(node, "metastore_spark_streaming_queries") == baseline, 30,
               "Spark to stop the query", interval=0.5)


def test_query_stream_reads_earliest_when_asked_and_close_query_stops_it(
        node: ServerProcess) -> None:
    stream = create_stream(node)
    insert(node, stream, (1, "x"), (2, "y"))
    baseline = gauge(node, "metastore_spark_streaming_queries")
    body = {"sql": f"SELECT * FROM {stream} EMIT CHANGES;",
            "properties": {"auto.offset.reset": "earliest"}}
    with httpx.stream("POST", f"{node.url}/query-stream", json=body, timeout=120) as response:
        assert response.status_code == 200
        lines = Lines(response)
        meta = json.loads(lines.next_data())
        assert meta["columnNames"] == ["ID", "V"]
        assert meta["columnTypes"] == ["INTEGER", "STRING"]
        rows = [json.loads(lines.next_data()), json.loads(lines.next_data())]
        assert rows == [[1, "x"], [2, "y"]]
        closed = httpx.post(f"{node.url}/close-query", json={"queryId": meta["queryId"]},
                            timeout=60)
        assert closed.status_code == 200, closed.text
        assert list(lines._lines) == []  # the response ends
    again = httpx.post(f"{node.url}/close-query", json={"queryId": meta["queryId"]}, timeout=60)
    assert again.status_code == 400
    assert again.json()["message"] == f"No query with id {meta['queryId']}"
    eventually(lambda: gauge(node, "metastore_spark_streaming_queries") == baseline, 30,
               "Spark to stop the query", interval=0.5)


def test_show_queries_lists_push_queries_and_terminate_stops_one_from_any_node(
        node: ServerProcess, server_factory: ServerFactory) -> None:
    stream = create_stream(node)
    insert(node, stream, (1, "x"))
    peer = server_factory(service_id=node.service_id, node_id="push-peer")
    text = f"SELECT * FROM {stream} EMIT CHANGES;"
    body = {"sql": text, "properties": {"auto.offset.reset": "earliest"}}
    for terminated_on in (node, peer):
        with httpx.stream("POST", f"{node.url}/query-stream", json=body,
                          timeout=120) as response:
            lines = Lines(response)
            query_id = json.loads(lines.next_data())["queryId"]
            assert json.loads(lines.next_data()) == [1, "x"]

            def listed(on: ServerProcess = terminated_on, query: str = query_id
                       ) -> dict[str, Any] | None:
                [entity] = ksql(on, "SHOW QUERIES;")
                return next((q for q in entity["queries"] if q["id"] == query), None)

            eventually(lambda: listed() is not None, 30,
                       f"{terminated_on.node_id} to list the push query", interval=0.5)
            assert listed(terminated_on) == {
                "queryString": text, "sinks": [], "sinkKafkaTopics": [], "id": query_id,
                "statusCount": {"RUNNING": 1}, "queryType": "PUSH", "state": "RUNNING",
                "ownerNode": node.node_id}
            assert ksql(terminated_on, f"TERMINATE {query_id};") == [{  # ids without case
                "@type": "terminate_query", "statementText": f"TERMINATE {query_id};",
                "queryId": query_id.upper(), "wasTerminated": True, "warnings": []}]
            assert list(lines._lines) == []  # the response ends
        eventually(lambda: gauge(node, "metastore_push_queries") == 0, 30,
                   "the push query to stop", interval=0.5)
        again = httpx.post(f"{terminated_on.url}/ksql", json={"ksql": f"TERMINATE {query_id};"},
                           timeout=60)
        assert again.status_code == 400 and again.json()["message"] in (
            f"Unknown queryId: {query_id.upper()}",  # the heartbeats no longer list it
            f"Failed to terminate query with query ID: '{query_id.upper()}'"), again.text


def test_a_client_that_disconnects_stops_its_push_query(node: ServerProcess) -> None:
    stream = create_stream(node)
    baseline = gauge(node, "metastore_spark_streaming_queries")
    pushed = gauge(node, "metastore_push_queries")
    body = {"sql": f"SELECT * FROM {stream} EMIT CHANGES;"}
    with httpx.stream("POST", f"{node.url}/query-stream", json=body, timeout=120) as response:
        assert response.status_code == 200
        lines = Lines(response)  # kept: a dropped line iterator closes the connection
        lines.next_data()
        running = gauge(node, "metastore_push_queries")
        assert running == pushed + 1, running
    # the client closed its connection without reading further
    eventually(lambda: gauge(node, "metastore_push_queries") == pushed, 30, "the query to stop", interval=0.5)
    eventually(lambda: gauge(node, "metastore_spark_streaming_queries") == baseline, 30,
               "Spark to stop the query", interval=0.5)


def test_a_client_that_stops_reading_is_dropped_at_its_write_deadline(
        node: ServerProcess, producer_factory: Callable[..., Producer]) -> None:
    """A push-query client that reads nothing while megabytes of rows wait holds its query only
    until the node's write deadline: then its connection is dropped and its Spark query stopped,
    while pull queries on the node are answered meanwhile."""
    stream = create_stream(node)
    producer = producer_factory()
    value = json.dumps({"V": "v" * 1000})
    for i in range(30_000):
        producer.produce(stream, key=struct.pack(">i", i), value=value)
        producer.poll(0)
    assert producer.flush(60) == 0
    pushed = gauge(node, "metastore_push_queries")
    body = json.dumps({"sql": f"SELECT * FROM {stream} EMIT CHANGES;",
                       "properties": {"auto.offset.reset": "earliest"}}).encode()
    address = urlsplit(node.url)
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(120)
        sock.connect((address.hostname or "", address.port or 0))
        sock.sendall(b"POST /query-stream HTTP/1.1\r\nHost: test\r\nContent-Type: "
                     b"application/json\r\nContent-Length: " + str(len(body)).encode()
                     + b"\r\n\r\n" + body)
        assert sock.recv(12).startswith(b"HTTP/1.1 200"), "the query started; nothing more read"
        eventually(lambda: gauge(node, "metastore_push_queries") == pushed + 1, 30,
                   "the push query to run", interval=0.2)
        started = time.monotonic()
        answer = httpx.post(f"{node.url}/query", timeout=60,
                            json={"ksql": f"SELECT ID FROM {stream} LIMIT 2;"})
        assert answer.status_code == 200 and time.monotonic() - started < 10
        eventually(lambda: gauge(node, "metastore_push_queries") == pushed, WRITE_TIMEOUT + 90,
                   "the unread query to be closed at its write deadline", interval=0.5)
        sock.settimeout(30)
        while sock.recv(1 << 20):  # what the node sent before it gave up, then the end
            pass


def test_push_queries_on_a_table_and_an_aggregation(node: ServerProcess) -> None:
    stream = create_stream(node)
    insert(node, stream, (1, "a"), (2, "a"), (3, "b"))
    body = {"sql": f"SELECT V, COUNT(*) AS N FROM {stream} GROUP BY V EMIT CHANGES;",
            "properties": {"auto.offset.reset": "earliest"}}
    with httpx.stream("POST", f"{node.url}/query-stream", json=body, timeout=120) as response:
        assert response.status_code == 200, response.read()
        lines = Lines(response)
        assert json.loads(lines.next_data())["columnNames"] == ["V", "N"]
        seen: dict[str, Any] = {}
        while seen != {"a": 2, "b": 1}:
            v, n = json.loads(lines.next_data())
            seen[v] = n


def test_push_query_errors_are_ksqldb_statement_errors(node: ServerProcess) -> None:
    refused = httpx.post(f"{node.url}/query", json={"ksql": "SELECT * FROM NOPE EMIT CHANGES;"},
                         timeout=60)
    assert refused.status_code == 400
    assert refused.json()["error_code"] == 40001
    assert "NOPE does not exist" in refused.json()["message"]
    bad = httpx.post(f"{node.url}/query-stream", json={"ksql": "SELECT 1;"}, timeout=60)
    assert bad.status_code == 400
    assert bad.json()["error_code"] == 40000


def test_the_cli_streams_a_push_query_until_its_limit(node: ServerProcess) -> None:
    stream = create_stream(node)
    insert(node, stream, (1, "x"), (2, "y"), (3, "z"))
    command = [sys.executable, "-m", "cli.main", "query", "--server", node.url, "--json",
               "-p", "auto.offset.reset=earliest",
               f"SELECT V FROM {stream} WHERE ID <> 2 EMIT CHANGES LIMIT 2;"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    meta, *rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert meta["columnNames"] == ["V"]
    assert rows == [["x"], ["z"]]
    table = subprocess.run([c for c in command if c != "--json"], capture_output=True, text=True,
                           timeout=180, check=False)
    assert table.returncode == 0, table.stderr
    assert "| x " in table.stdout and "| z " in table.stdout
    assert table.stdout.rstrip().endswith("2 row(s)")


def test_a_persistent_query_starts_where_auto_offset_reset_says(
        node: ServerProcess, kafka_settings: KafkaSettings) -> None:
    stream = create_stream(node)
    insert(node, stream, (1, "old"))
    latest, earliest = f"{stream}_LATEST", f"{stream}_EARLIEST"
    response = httpx.post(f"{node.url}/ksql", timeout=120, json={
        "ksql": f"CREATE STREAM {latest} AS SELECT * FROM {stream} EMIT CHANGES;",
        "streamsProperties": {"auto.offset.reset": "latest"}})
    assert response.status_code == 200, response.text
    ksql(node, f"CREATE STREAM {earliest} AS SELECT * FROM {stream} EMIT CHANGES;")

    def running() -> bool:
        [entity] = ksql(node, "SHOW QUERIES;")
        states = {q["sinks"][0]: q["state"] for q in entity["queries"]}
        return states.get(latest) == "RUNNING" and states.get(earliest) == "RUNNING"

    eventually(running, 120, "both queries", interval=0.5)

    def latest_has_new() -> bool:  # its offsets are taken at its first micro-batch
        insert(node, stream, (2, "new"))
        return bool(read_all(kafka_settings, latest, 1, timeout=2))

    eventually(latest_has_new, 120, "the latest query's first record", interval=0.5)
    assert {json.loads(v or b"")["V"] for _, v, _ in read_all(kafka_settings, latest, 1)} == {
        "new"}
    assert [json.loads(v or b"")["V"] for _, v, _ in read_all(kafka_settings, earliest, 2)][
        :2] == ["old", "new"]
