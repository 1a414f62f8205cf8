"""Headless mode (``--queries-file``, ksqlDB's ``ksql.queries.file``) on node processes and the
real broker: the file written to the log once for the service, no statement or query served,
and a file headless mode cannot run stopping the node with the reason, nothing written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from tests.support.kafka import unique
from tests.support.servers import ServerProcess

ServerFactory = Callable[..., ServerProcess]


def queries_file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_queries_file_is_written_once_and_the_nodes_serve_no_statement(
        server_factory: ServerFactory, tmp_path: Path) -> None:
    topic = unique("headless")
    path = queries_file(tmp_path, "app.sql", f"""
        SET 'auto.offset.reset' = 'earliest';
        CREATE STREAM CLICKS (ID INT KEY, URL STRING) WITH (KAFKA_TOPIC='{topic}',
            VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE COUNTS AS SELECT URL, COUNT(*) AS N FROM CLICKS GROUP BY URL;
        """)
    first = server_factory("--queries-file", str(path), node_id="a")
    second = server_factory("--queries-file", str(path), service_id=first.service_id,
                            node_id="b")
    states = [httpx.get(f"{node.url}/v1/metastore", timeout=30).json()
              for node in (first, second)]
    assert states[0]["imageFingerprint"] == states[1]["imageFingerprint"]
    assert states[1]["appliedOffset"] == states[0]["appliedOffset"], "written once"

    refused = httpx.post(f"{first.url}/ksql", json={"ksql": "SHOW STREAMS;"}, timeout=30)
    assert refused.status_code == 403
    assert refused.json()["error_code"] == 40300
    assert "headless mode" in refused.json()["message"]
    assert httpx.post(f"{second.url}/query", json={"ksql": "SELECT * FROM COUNTS;"},
                      timeout=30).status_code == 403
    assert httpx.get(f"{first.url}/info", timeout=30).status_code == 200
    assert httpx.get(f"{first.url}/healthcheck", timeout=30).status_code == 200

    interactive = server_factory(service_id=first.service_id, node_id="c")
    listed = httpx.post(f"{interactive.url}/ksql", json={"ksql": "SHOW QUERIES;"},
                        timeout=30).json()
    assert [(q["sinks"], "COUNT(*) AS N FROM CLICKS" in q["queryString"])
            for q in listed[0]["queries"]] == [(["COUNTS"], True)]


def test_a_file_headless_mode_cannot_run_stops_the_node_with_nothing_written(
        server_factory: ServerFactory, tmp_path: Path) -> None:
    topic = unique("headless")
    create = (f"CREATE STREAM S (ID INT KEY) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', "
              "PARTITIONS=1);")
    selecting = queries_file(tmp_path, "select.sql", f"{create}\nSELECT * FROM S;\n")
    node = server_factory("--queries-file", str(selecting), wait=False)
    assert node.process.wait(120) == 1
    assert "Unsupported statement" in node.output() and "SELECT * FROM S;" in node.output()

    # the refused file wrote nothing: a file creating the same stream starts on its service
    server_factory("--queries-file", str(queries_file(tmp_path, "one.sql", create)),
                   service_id=node.service_id, node_id="b")
    other = queries_file(tmp_path, "other.sql", f"{create}\n-- another file\n")
    changed = server_factory("--queries-file", str(other), service_id=node.service_id,
                             node_id="c", wait=False)
    assert changed.process.wait(120) == 1
    assert "already exists" in changed.output()
