"""An existing ksqlDB client, unchanged, against a node: the PyPI package ksql-python-ng
(``KSQLAPI``) runs statements over /ksql, streams a push query from /query (HTTP/1.1) and from
/query-stream (HTTP/2), closes a query with /close-query and writes rows with /inserts-stream
(HTTP/2). The client runs in its own process from its own install (it needs an httpx
older than the node's), made once under ``.cache/``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.queries.test_push_queries import create_stream, insert, node  # noqa: F401 - fixture
from tests.support.servers import ServerProcess

CLIENT = ("ksql-python-ng==0.29.0.1", "httpx[http2]<0.28")
"""0.29.0.1 passes ``cert=`` to ``httpx.get``, which httpx 0.28 removed."""


@pytest.fixture(scope="module")
def client_path() -> Path:
    target = Path(__file__).resolve().parents[2] / ".cache" / "ksql-python-ng"
    stamp = target / ".installed"
    if not stamp.exists() or stamp.read_text() != " ".join(CLIENT):
        uv = Path(sys.executable).with_name("uv")  # the bootstrap's installer: 1 s, pip's 12
        install = ([str(uv), "pip", "install", "--python", sys.executable] if uv.exists()
                   else [sys.executable, "-m", "pip", "install", "--upgrade"])
        subprocess.run([*install, "--quiet", "--target", str(target), *CLIENT], check=True,
                       timeout=600)
        stamp.write_text(" ".join(CLIENT))
    return target


def run_client(path: Path, script: str, **environment: str) -> object:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": str(path), **environment})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_ksql_python_ng_runs_statements_and_streams_a_push_query(
        node: ServerProcess, client_path: Path) -> None:  # noqa: F811 - the fixture
    stream = create_stream(node)
    insert(node, stream, (1, "first"), (2, "second"), (3, "third"))
    answer = run_client(client_path, f"""
        import json
        from ksql import KSQLAPI
        client = KSQLAPI({node.url!r}, timeout=120)
        version = client.get_ksql_version()
        [listing] = client.ksql("SHOW STREAMS;")
        chunks = list(client.query("SELECT ID, V FROM {stream} WHERE ID > 1 EMIT CHANGES LIMIT 2;",
                                   stream_properties={{"auto.offset.reset": "earliest"}}))
        closed = client.close_query("transient_NOPE_1")
        print(json.dumps({{"version": version, "streams": [s["name"] for s in listing["streams"]],
                          "body": "".join(chunks), "closed": closed}}))
        """)
    assert isinstance(answer, dict)
    assert answer["version"] and stream in answer["streams"]
    body = json.loads(answer["body"])
    assert body[0]["header"]["schema"] == "`ID` INTEGER, `V` STRING"
    assert [row["row"]["columns"] for row in body[1:-1]] == [[2, "second"], [3, "third"]]
    assert body[-1] == {"finalMessage": "Limit Reached"}
    assert answer["closed"] is False


def test_ksql_python_ng_inserts_rows_and_queries_over_http2(
        node: ServerProcess, client_path: Path) -> None:  # noqa: F811 - the fixture
    stream = create_stream(node)
    answer = run_client(client_path, f"""
        import json
        from ksql import KSQLAPI
        client = KSQLAPI({node.url!r}, timeout=120)
        acks = client.inserts_stream({stream!r}, [{{"ID": 1, "V": "one"}}, {{"ID": 2, "V": "two"}}])
        chunks = list(client.query("SELECT ID, V FROM {stream} EMIT CHANGES LIMIT 2;",
                                   stream_properties={{"auto.offset.reset": "earliest"}},
                                   use_http2=True))
        print(json.dumps({{"acks": acks, "body": "".join(chunks)}}))
        """)
    assert isinstance(answer, dict)
    assert answer["acks"] == [{"status": "ok", "seq": 0}, {"status": "ok", "seq": 1}]
    header, *rows = (json.loads(line) for line in answer["body"].splitlines() if line)
    assert header["columnNames"] == ["ID", "V"] and header["queryId"]
    assert rows == [[1, "one"], [2, "two"]]
