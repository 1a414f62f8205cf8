"""``GET /ws/query``, ksqlDB's websocket query endpoint, on the suite's Spark node: a push query's
schema, rows and ``done``; a pull query's; a PRINT's lines; and refusals as a last ``error``
frame with close code 1003."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.support.kafka import unique
from tests.support.servers import ServerProcess, gauge
from tests.support.waiting import eventually

EARLIEST = {"auto.offset.reset": "earliest"}


def _ksql(server: ServerProcess, text: str) -> None:
    response = httpx.post(f"{server.url}/ksql", json={"ksql": text}, timeout=60)
    assert response.status_code == 200, response.text


def _frames(server: ServerProcess, request: dict[str, Any] | None) -> tuple[list[Any], int]:
    """Every frame the node sends for ``request``, and the close code."""
    query = f"?request={urllib.parse.quote(json.dumps(request))}" if request is not None else ""
    url = server.url.replace("http://", "ws://") + "/ws/query" + query
    frames: list[Any] = []
    with connect(url, open_timeout=30, close_timeout=10) as socket:
        try:
            while True:
                frames.append(json.loads(socket.recv(timeout=120)))
        except ConnectionClosed as closed:
            assert closed.rcvd is not None
            return frames, closed.rcvd.code
    raise AssertionError("unreachable")


def test_a_push_query_a_pull_query_and_a_print_over_the_websocket(
        spark_node: ServerProcess) -> None:
    name = unique("WS").upper().replace("-", "_")
    _ksql(spark_node, f"CREATE STREAM {name} (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{name}', "
                      "PARTITIONS=1, VALUE_FORMAT='JSON');")
    _ksql(spark_node, f"INSERT INTO {name} (ID, V) VALUES (1, 'a');"
                      f"INSERT INTO {name} (ID, V) VALUES (2, 'b');")
    string = {"type": "STRING", "fields": None, "memberSchema": None}
    integer = {"type": "INTEGER", "fields": None, "memberSchema": None}

    frames, code = _frames(spark_node, {"ksql": f"SELECT * FROM {name} EMIT CHANGES LIMIT 2;",
                                        "streamsProperties": EARLIEST})
    assert frames == [[{"name": "ID", "schema": integer}, {"name": "V", "schema": string}],
                      {"row": {"columns": [1, "a"]}}, {"row": {"columns": [2, "b"]}},
                      {"error": "done"}]
    assert code == 1000

    frames, code = _frames(spark_node, {"ksql": f"SELECT V FROM {name} WHERE ID = 2;"})
    assert (frames, code) == ([[{"name": "V", "schema": string}], {"row": {"columns": ["b"]}},
                               {"error": "done"}], 1000)

    frames, code = _frames(spark_node, {"ksql": f"PRINT '{name}' FROM BEGINNING LIMIT 1;"})
    assert code == 1000 and frames[0] == [] and frames[-1] == {"error": "done"} and len(frames) == 5
    formats, record = frames[1:3], frames[3]  # ksqlDB prints the formats it took first
    assert formats == ["Key format: KAFKA_INT or KAFKA_STRING", "Value format: JSON or KAFKA_STRING"]
    assert record.endswith(', key: 1, value: {"V":"a"}, partition: 0'), record


def test_a_client_closing_the_socket_stops_its_push_query_even_without_rows(
        spark_node: ServerProcess) -> None:
    name = unique("WS_IDLE").upper().replace("-", "_")
    _ksql(spark_node, f"CREATE STREAM {name} (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{name}', "
                      "PARTITIONS=1, VALUE_FORMAT='JSON');")
    before = gauge(spark_node, "metastore_push_queries")
    request = urllib.parse.quote(json.dumps({"ksql": f"SELECT * FROM {name} EMIT CHANGES;"}))
    with connect(spark_node.url.replace("http://", "ws://") + f"/ws/query?request={request}",
                 open_timeout=30) as socket:
        schema = json.loads(socket.recv(timeout=120))
        assert [field["name"] for field in schema] == ["ID", "V"]
        assert gauge(spark_node, "metastore_push_queries") >= 1
    eventually(lambda: gauge(spark_node, "metastore_push_queries") <= before or None, 30,
               "the push query to stop once its client closed the socket", interval=0.5)


def test_a_request_the_node_refuses_is_a_last_error_frame_and_close_1003(
        spark_node: ServerProcess) -> None:
    assert _frames(spark_node, None) == (
        [{"error": "Error parsing request: missing request parameter"}], 1003)
    [[error], code] = _frames(spark_node, {"ksql": "SHOW STREAMS;"})
    assert code == 1003 and "exactly one SELECT or PRINT statement" in error["error"], error
    [[error], code] = _frames(spark_node, {"ksql": "SELECT * FROM NOWHERE EMIT CHANGES;"})
    assert code == 1003 and "NOWHERE does not exist" in error["error"], error
    [[error], code] = _frames(spark_node, {"ksql": "SELECT 1 FROM X EMIT CHANGES;",
                                           "streamsProperties": {"ksql.service.id": "x"}})
    assert code == 1003 and "denylist" in error["error"], error
