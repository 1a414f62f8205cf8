"""The media types a query's client may accept, on the suite's Spark node: ksqlDB's Protobuf
answer (``application/vnd.ksql.v1+protobuf``: ``protoSchema`` in the header, each row a message)
from ``/query`` and ``/query-stream``, for pull and push queries, and the delimited answer from
``/query``."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
from google.protobuf import descriptor_pool, message_factory

from metastore.formats import proto_files
from tests.queries.test_query_nodes import ksql
from tests.support.kafka import unique
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually

PROTOBUF = "application/vnd.ksql.v1+protobuf"
DELIMITED = "application/vnd.ksqlapi.delimited.v1"


def decoded(proto_schema: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row's ``protobufBytes`` read with the header's ``.proto`` text, as a client does."""
    file = proto_files.parse(proto_schema)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    [message] = file.message_type
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(message.name))
    found = []
    for row in rows:
        parsed = cls.FromString(base64.b64decode(row["row"]["protobufBytes"]))
        found.append({field.name: value for field, value in parsed.ListFields()})
    return found


def test_pull_and_push_queries_answer_protobuf_and_delimited(spark_node: ServerProcess) -> None:
    name = unique("SHAPES").upper().replace("-", "_")
    ksql(spark_node, f"CREATE TABLE {name} (ID INT PRIMARY KEY, V STRING, D DOUBLE) WITH ("
                     f"KAFKA_TOPIC='{name}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    ksql(spark_node, f"CREATE TABLE {name}_Q AS SELECT * FROM {name};")
    ksql(spark_node, f"INSERT INTO {name} (ID, V, D) VALUES (1, 'one', 1.5);")
    pull = {"ksql": f"SELECT * FROM {name}_Q WHERE ID = 1;"}

    def answered() -> list[Any]:
        response = httpx.post(f"{spark_node.url}/query", json=pull, timeout=60,
                              headers={"Accept": PROTOBUF})
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == PROTOBUF
        return list(response.json())

    eventually(lambda: len(answered()) == 2, 120, "the table's row", interval=1)
    header, *rows = answered()
    assert header["header"]["schema"] == "`ID` INTEGER KEY, `V` STRING, `D` DOUBLE"
    proto = header["header"]["protoSchema"]
    assert "message ConnectDefault1 {" in proto and "string V = 2;" in proto, proto
    assert decoded(proto, rows) == [{"ID": 1, "V": "one", "D": 1.5}]

    delimited = httpx.post(f"{spark_node.url}/query", json=pull, timeout=60,
                           headers={"Accept": DELIMITED})
    assert delimited.headers["content-type"].startswith(DELIMITED)
    meta, row = delimited.text.splitlines()
    assert json.loads(meta)["columnNames"] == ["ID", "V", "D"]
    assert json.loads(row) == [1, "one", 1.5]

    push = {"sql": f"SELECT ID, V FROM {name} EMIT CHANGES LIMIT 1;",
            "properties": {"auto.offset.reset": "earliest"}}
    streamed = httpx.post(f"{spark_node.url}/query-stream", json=push, timeout=120,
                          headers={"Accept": PROTOBUF})
    assert streamed.status_code == 200, streamed.text
    header, *rows, final = streamed.json()
    assert final == {"finalMessage": "Limit Reached"}
    assert decoded(header["header"]["protoSchema"], rows) == [{"ID": 1, "V": "one"}]
