"""A role file gives each authenticated user topic permissions, checked as ksqlDB's topic access
validator checks Kafka's ACLs: a statement that needs a topic its user may not touch is refused
with ksqlDB's 40301 naming the operation and the topics, and nothing of its request is written
or created."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from tests.support.servers import ServerProcess


def test_a_user_touches_only_the_topics_the_role_file_gives(
        server_factory: Callable[..., ServerProcess], kafka_bootstrap: str,
        tmp_path: Path) -> None:
    prefix = f"roles{uuid.uuid4().hex[:8]}"
    users = tmp_path / "users"
    users.write_text("owner:o\nanalyst:a\nstranger:s\n")
    roles = tmp_path / "roles.toml"
    roles.write_text(f"""
[users.owner]
read = ["{prefix}.*"]
write = ["{prefix}.*"]
create = ["{prefix}.*"]
delete = ["{prefix}.*"]

[users.analyst]
read = ["*"]
""")
    node = server_factory("--auth-file", str(users), "--roles-file", str(roles))

    def ksql(user: str, text: str) -> tuple[int, Any]:
        response = httpx.post(f"{node.url}/ksql", json={"ksql": text}, timeout=60,
                              auth=(user, user[0]))
        return response.status_code, response.json()

    create = (f"CREATE STREAM ORDERS (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{prefix}.orders', "
              "PARTITIONS=1, VALUE_FORMAT='JSON');")
    for user in ("analyst", "stranger"):
        status, body = ksql(user, create)
        assert (status, body["@type"], body["error_code"], body["message"]) == (
            403, "generic_error", 40301,  # ksqlDB: accessDeniedFromKafkaResponse
            f"Authorization denied to Create on topic(s): [{prefix}.orders]")
    assert ksql("owner", create)[0] == 200

    refused = [  # (user, request, operation, topics)
        ("analyst", f"CREATE STREAM COPY WITH (KAFKA_TOPIC='{prefix}.copy') AS SELECT * FROM "
                    "ORDERS;", "Create", f"{prefix}.copy"),
        ("owner", f"CREATE STREAM ELSEWHERE WITH (KAFKA_TOPIC='other{prefix}') AS SELECT * "
                  "FROM ORDERS;", "Create", f"other{prefix}"),
        ("analyst", "INSERT INTO ORDERS (ID, V) VALUES (1, 2);", "Write", f"{prefix}.orders"),
        ("stranger", "CREATE STREAM AGAIN (ID INT KEY) WITH (KAFKA_TOPIC="
                     f"'{prefix}.orders', VALUE_FORMAT='JSON');", "Read", f"{prefix}.orders"),
        ("analyst", f"CREATE TYPE T_{prefix} AS INT; DROP STREAM ORDERS DELETE TOPIC;",
         "Delete", f"{prefix}.orders"),
    ]
    for user, text, operation, topic in refused:
        status, body = ksql(user, text)
        assert (status, body["error_code"], body["message"]) == (
            403, 40301, f"Authorization denied to {operation} on topic(s): [{topic}]"), text

    status, listed = ksql("analyst", "SHOW STREAMS; SHOW TYPES;")
    assert status == 200, listed
    assert [s["name"] for s in listed[0]["streams"]] == ["ORDERS"], "nothing else written"
    assert f"T_{prefix}".upper() not in listed[1]["types"], "the refused request wrote nothing"
    admin = Admin(KafkaSettings(kafka_bootstrap))
    assert admin.describe(f"{prefix}.copy") is None and admin.describe(f"other{prefix}") is None
    select = "SELECT * FROM ORDERS EMIT CHANGES;"
    for path, body in (("/query-stream", {"sql": select}), ("/query", {"ksql": select}),
                       ("/query", {"ksql": f"PRINT '{prefix}.orders' LIMIT 1;"})):
        refused_read = httpx.post(f"{node.url}{path}", json=body, auth=("stranger", "s"),
                                  timeout=30)
        assert (refused_read.status_code, refused_read.json()["error_code"]) == (403, 40301)
        assert f"Read on topic(s): [{prefix}.orders]" in refused_read.json()["message"]
    history = f"{node.url}/v1/metastore/log"
    refused_history = httpx.get(history, auth=("stranger", "s"), timeout=30)
    assert (refused_history.status_code, refused_history.json()["error_code"]) == (403, 40301)
    assert httpx.get(history, auth=("analyst", "a"), timeout=30).status_code == 200, \
        "Read on every topic reads the command log's history"
    allowed = httpx.post(f"{node.url}/query-stream", json={"sql": select},
                         auth=("analyst", "a"), timeout=30)
    assert allowed.json()["error_code"] != 40301, "read, then refused for want of Spark"
    inserted = httpx.post(f"{node.url}/inserts-stream", auth=("analyst", "a"), timeout=30,
                          content=b'{"target": "ORDERS"}\n{"ID": 1, "V": 2}\n')
    assert (inserted.status_code, inserted.json()["error_code"]) == (403, 40301)
    status, body = ksql("owner", "CREATE SINK CONNECTOR OUT WITH ("
                                 "'connector.class'='FileStreamSink', 'topics'='x');")
    assert (status, body["error_code"], body["message"]) == (
        403, 40300, "Authorization denied to create or drop connector(s): [OUT]")
    assert ksql("owner", f"CREATE STREAM COPY WITH (KAFKA_TOPIC='{prefix}.copy') AS SELECT * "
                         "FROM ORDERS;")[0] == 200
    [query] = [q["id"] for q in ksql("analyst", "SHOW QUERIES;")[1][0]["queries"]]
    for text, operation, topic in (("ALTER STREAM ORDERS ADD COLUMN W INT;", "Write", "orders"),
                                   (f"TERMINATE {query};", "Write", "copy"),
                                   (f"PAUSE {query};", "Write", "copy")):
        status, body = ksql("analyst", text)  # a user who may only read changes nothing
        assert (status, body["message"]) == (
            403, f"Authorization denied to {operation} on topic(s): [{prefix}.{topic}]"), text
    terminated = httpx.post(f"{node.url}/ksql/terminate", auth=("analyst", "a"), timeout=30,
                            json={"deleteTopicList": [f"{prefix}.*"]})
    assert (terminated.status_code, terminated.json()["error_code"]) == (403, 40301)
    status, shown = ksql("analyst", "SHOW STREAMS; SHOW QUERIES;")
    assert len(shown[0]["streams"]) == 2 and len(shown[1]["queries"]) == 1, "nothing dropped"
    assert ksql("owner", f"TERMINATE {query}; DROP STREAM COPY DELETE TOPIC;")[0] == 200
    assert ksql("owner", "INSERT INTO ORDERS (ID, V) VALUES (1, 2);")[0] == 200
    assert ksql("owner", "DROP STREAM ORDERS DELETE TOPIC;")[0] == 200
