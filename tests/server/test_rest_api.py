"""The REST API of a real node process: entities, error codes, read-your-writes, auth."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from metastore.kafka.admin import Admin
from metastore.server.build import ShutdownSignals
from tests.support.kafka import unique
from tests.support.servers import ServerProcess, start_server, wait_until_serving
from tests.support.waiting import eventually

KSQL = "application/vnd.ksql.v1+json"


def ksql(server: ServerProcess, text: str, **extra: Any) -> httpx.Response:
    return httpx.post(f"{server.url}/ksql", json={"ksql": text, "streamsProperties": {}, **extra},
                      headers={"Content-Type": KSQL, "Accept": KSQL}, timeout=60)


def stream(name: str, topic: str | None = None) -> str:
    return (f"CREATE STREAM {name} (ID INT KEY, URL STRING) WITH (KAFKA_TOPIC="
            f"'{topic or unique(name.lower())}', VALUE_FORMAT='JSON', PARTITIONS=1);")


def test_entities_of_every_statement_kind(server: ServerProcess) -> None:
    response = ksql(server, stream("PV") + "CREATE TYPE ADDR AS STRUCT<STREET STRING>;"
                    "CREATE TABLE COUNTS AS SELECT URL, COUNT(*) AS C FROM PV GROUP BY URL;")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith(KSQL)
    created, typed, ctas = response.json()
    assert created["@type"] == "currentStatus" and created["commandId"] == "stream/PV/create"
    assert created["commandStatus"] == {"status": "SUCCESS", "message": "Stream created",
                                        "queryId": None}
    assert typed["commandId"] == "type/ADDR/create"
    query_id = ctas["commandStatus"]["queryId"]
    assert query_id == f"CTAS_COUNTS_{ctas['commandSequenceNumber']}"

    listing = ksql(server, "SHOW STREAMS; SHOW TABLES; SHOW QUERIES; SHOW TYPES; SHOW TOPICS;"
                           "DESCRIBE PV; DESCRIBE COUNTS EXTENDED;").json()
    assert [e["@type"] for e in listing] == ["streams", "tables", "queries", "type_list",
                                            "kafka_topics", "sourceDescription",
                                            "sourceDescription"]
    streams, tables, queries, types, topics, pv, counts = listing
    assert streams["streams"][0] | {"topic": None} == {
        "type": "STREAM", "name": "PV", "topic": None, "keyFormat": "KAFKA",
        "valueFormat": "JSON", "isWindowed": False}
    assert tables["tables"][0]["name"] == "COUNTS"
    assert queries["queries"][0]["id"] == query_id and queries["queries"][0]["sinks"] == ["COUNTS"]
    assert types["types"]["ADDR"]["type"] == "STRUCT"
    assert pv["sourceDescription"]["topic"] in {t["name"] for t in topics["topics"]}
    fields = pv["sourceDescription"]["fields"]
    assert fields[0] == {"name": "ID", "schema": {"type": "INTEGER", "fields": None,
                                                  "memberSchema": None}, "type": "KEY"}
    assert [q["id"] for q in pv["sourceDescription"]["readQueries"]] == [query_id]
    assert counts["sourceDescription"]["writeQueries"][0]["id"] == query_id
    for entity in listing:
        assert "statementText" in entity and entity["warnings"] == []

    topic = pv["sourceDescription"]["topic"]  # ksqlDB checks the topic before the name
    warning = ksql(server, f"CREATE STREAM IF NOT EXISTS PV (A INT) WITH (KAFKA_TOPIC='{topic}', "
                           "VALUE_FORMAT='JSON');").json()
    assert warning[0]["@type"] == "warning_entity"
    done = ksql(server, f"TERMINATE {query_id}; DROP TABLE COUNTS; DROP TYPE ADDR;").json()
    assert [e["commandStatus"]["status"] for e in done] == ["SUCCESS"] * 3


def test_error_codes(server: ServerProcess) -> None:
    def error(response: httpx.Response, status: int, code: int) -> dict[str, Any]:
        assert response.status_code == status, response.text
        body = response.json()
        assert body["error_code"] == code
        return dict(body)

    body = error(ksql(server, "CREATE STREAM X (A INT (KEY)) WITH (KAFKA_TOPIC='x');"), 400, 40001)
    assert body["@type"] == "statement_error" and "line 1:" in body["message"]
    body = error(ksql(server, "DROP STREAM NOPE;"), 400, 40001)
    assert body["message"] == "Stream NOPE does not exist." and body["statementText"]
    error(ksql(server, "SELECT * FROM X;"), 400, 40002)
    error(httpx.post(f"{server.url}/ksql", content=b"{not json", timeout=10), 400, 40000)
    error(httpx.post(f"{server.url}/ksql", json={"sql": "x"}, timeout=10), 400, 40000)
    error(httpx.post(f"{server.url}/ksql", json=["x"], timeout=10), 400, 40000)
    huge = httpx.post(f"{server.url}/ksql", json={"ksql": "x" * (2 << 20)}, timeout=10)
    assert huge.status_code == 413
    missing = httpx.get(f"{server.url}/status/stream/NOPE/create", timeout=10)
    assert missing.status_code == 404 and missing.json()["error_code"] == 40400


def test_streams_properties_override_the_configuration(server: ServerProcess) -> None:
    topic = unique("props")
    created = ksql(server, f"CREATE STREAM PROPS (K STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}',"
                           " PARTITIONS=1);",
                   streamsProperties={"ksql.persistence.default.format.value": "DELIMITED",
                                      "ksql.persistence.wrap.single.values": "false",
                                      "ksql.streams.auto.offset.reset": "earliest"})
    assert created.status_code == 200, created.text
    described = ksql(server, "DESCRIBE PROPS;").json()[0]["sourceDescription"]
    assert (described["keyFormat"], described["valueFormat"]) == ("KAFKA", "DELIMITED")

    for properties, message in (
            ({"ksql.no.such.setting": 1}, "Not recognizable as ksql, streams, consumer, or "
                                          "producer property: 'ksql.no.such.setting'"),
            ({"ksql.persistence.wrap.single.values": "maybe"}, "Failed to coerce type of value "
                                                              "'maybe'")):
        refused = ksql(server, "CREATE STREAM NEVER (V INT) WITH (KAFKA_TOPIC='never', "
                               "VALUE_FORMAT='JSON', PARTITIONS=1);",
                       streamsProperties=properties)
        assert refused.status_code == 400, refused.text
        body = refused.json()
        assert body["error_code"] == 40000 and message in body["message"]
    shown = ksql(server, "SHOW STREAMS;").json()[0]["streams"]
    assert "NEVER" not in {s["name"] for s in shown}


def test_waiting_for_an_unknown_sequence_number_times_out(
        server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory("--read-timeout", "1")
    response = ksql(server, "SHOW STREAMS;", commandSequenceNumber=10_000)
    assert response.status_code == 503 and response.json()["error_code"] == 50301


def test_read_your_writes_across_two_nodes(server_factory: Callable[..., ServerProcess]) -> None:
    first = server_factory(node_id="a")
    second = server_factory(service_id=first.service_id, node_id="b")
    for index in range(5):
        [written] = ksql(first, stream(f"S{index}")).json()
        sequence = written["commandSequenceNumber"]
        [listed] = ksql(second, "SHOW STREAMS;", commandSequenceNumber=sequence).json()
        assert f"S{index}" in {s["name"] for s in listed["streams"]}
    one = httpx.get(f"{first.url}/v1/metastore").json()
    two = httpx.get(f"{second.url}/v1/metastore").json()
    assert one["imageFingerprint"] == two["imageFingerprint"]
    assert {one["nodeId"], two["nodeId"]} == {"a", "b"}


def test_not_ready_during_catch_up(server_factory: Callable[..., ServerProcess],
                                   producer_factory: Callable[..., Producer]) -> None:
    seeded = server_factory()
    ksql(seeded, stream("SEED"))
    [record] = [line for line in [json.dumps({
        "version": 1, "commandId": "type/T/create", "statement": "CREATE TYPE T AS INT;",
        "command": {"type": "createType", "name": "T", "sqlType": "INTEGER"},
        "requestId": "", "originNode": "seed", "submitter": ""})]]
    drop = json.dumps({"version": 1, "commandId": "type/T/drop", "statement": "DROP TYPE T;",
                       "command": {"type": "dropType", "name": "T"}, "requestId": "",
                       "originNode": "seed", "submitter": ""})
    producer = producer_factory()
    topic = f"_metastore-{seeded.service_id}-command-log"
    for _ in range(2000):
        producer.produce(topic, key=b"type/T/create", value=record.encode())
        producer.produce(topic, key=b"type/T/drop", value=drop.encode())
        producer.poll(0)
    producer.flush(30)
    # --no-snapshots: the seeded node may have published a snapshot; this node must replay
    late = server_factory("--fault-injection", "slow-replay", "--no-snapshots",
                          service_id=seeded.service_id, node_id="late", wait=False)
    wait_until_serving(late, ready=False)
    health = httpx.get(f"{late.url}/healthcheck", timeout=10)
    assert health.status_code == 503
    live, ready = (httpx.get(f"{late.url}/chc/{probe}", timeout=10) for probe in ("live", "ready"))
    assert (live.status_code, live.json()) == (200, {})
    assert (ready.status_code, ready.json()) == (503, {
        "@type": "generic_error", "error_code": 50302,
        "message": "KSQL is not yet ready to serve requests."}), "no traffic while catching up"
    response = ksql(late, stream("DURING"))
    assert response.status_code == 503, response.text
    assert response.json()["error_code"] == 50302
    shown = ksql(late, "SHOW STREAMS;")
    assert shown.status_code == 200, "reads are served while catching up"


def test_degraded_node_refuses_writes_with_the_reason(
        server: ServerProcess, producer_factory: Callable[..., Producer]) -> None:
    ksql(server, stream("OK"))
    producer = producer_factory()
    producer.produce(f"_metastore-{server.service_id}-command-log", key=b"x", value=b"garbage")
    producer.flush(10)
    deadline_response = None
    for _ in range(100):
        state = httpx.get(f"{server.url}/v1/metastore").json()
        if state["state"] == "DEGRADED":
            deadline_response = state
            break
        import time

        time.sleep(0.1)
    assert deadline_response is not None
    assert "CORRUPTED at offset" in deadline_response["degradedReason"]
    response = ksql(server, stream("AFTER"))
    assert response.status_code == 500
    assert response.json()["error_code"] == 50000 and "DEGRADED" in response.json()["message"]
    assert ksql(server, "SHOW STREAMS;").status_code == 200


def test_terminate_cluster_empties_the_catalog_and_deletes_the_matched_sinks(
        server: ServerProcess, kafka_admin: Admin) -> None:
    source, kept, deleted = unique("src"), unique("kept"), unique("gone")
    assert ksql(server, f"""{stream("SRC", source)}
        CREATE STREAM KEPT WITH (KAFKA_TOPIC='{kept}') AS SELECT * FROM SRC;
        CREATE STREAM GONE WITH (KAFKA_TOPIC='{deleted}') AS SELECT * FROM SRC;
        CREATE TYPE ADDRESS AS STRUCT<STREET STRING>;""").status_code == 200
    terminate = f"{server.url}/ksql/terminate"
    bad = httpx.post(terminate, json={"deleteTopicList": ["[oops"]}, timeout=30)
    assert (bad.status_code, bad.json()) == (400, {
        "@type": "generic_error", "error_code": 40000, "message": "Invalid pattern: [oops"})
    assert httpx.post(terminate, content=b"not json", timeout=30).status_code == 400
    assert kafka_admin.describe(deleted) is not None, "a refused request changes nothing"

    answer = httpx.post(terminate, json={"deleteTopicList": [f"{deleted[:-3]}.*", source]},
                        timeout=60)
    assert answer.status_code == 200, answer.text
    [status] = answer.json()
    assert (status["statementText"], status["commandId"], status["commandStatus"]["status"]) \
        == ("TERMINATE CLUSTER;", "cluster/TerminateCluster/terminate", "SUCCESS")
    listed = ksql(server, "SHOW STREAMS; SHOW QUERIES; SHOW TYPES;",
                  commandSequenceNumber=status["commandSequenceNumber"]).json()
    assert [listed[0]["streams"], listed[1]["queries"], listed[2]["types"]] == [[], [], {}]
    eventually(lambda: kafka_admin.describe(deleted) is None, 30, "the matched sink's topic")
    assert kafka_admin.describe(kept) is not None, "a sink no pattern matches keeps its topic"
    assert kafka_admin.describe(source) is not None, "only query sinks' topics are deleted"
    assert ksql(server, stream("SRC", source)).status_code == 200, "the service serves on"


def test_info_health_status_cluster_and_metrics(server: ServerProcess) -> None:
    [created] = ksql(server, stream("M")).json()
    info = httpx.get(f"{server.url}/info").json()["KsqlServerInfo"]
    assert info["ksqlServiceId"] == server.service_id and info["kafkaClusterId"]
    assert info["serverStatus"] == "RUNNING"
    assert httpx.get(f"{server.url}/healthcheck").json()["isHealthy"] is True
    assert httpx.get(f"{server.url}/status").json()["commandStatuses"] == {
        "stream/M/create": "SUCCESS"}
    one = httpx.get(f"{server.url}/status/stream/M/create").json()
    assert one["status"] == "SUCCESS"
    assert one["commandSequenceNumber"] == created["commandSequenceNumber"]

    def past_the_marker() -> dict[str, Any] | None:
        # the writer applied the record; the reader then passes the transaction's marker with
        # its next fetch
        status = httpx.get(f"{server.url}/v1/metastore").json()
        return status if status["appliedOffset"] + 1 >= status["endOffset"] else None

    status = eventually(past_the_marker, 5, "the reader to pass the transaction's marker",
                        interval=0.05)
    assert set(status) == {"serviceId", "nodeId", "state", "degradedReason", "appliedOffset",
                           "endOffset", "imageFingerprint", "sparkCatalogFingerprint",
                           "sparkInSync", "sparkReason", "sparkCatalogCalls",
                           "sparkApplication", "startup", "lastWriter"}
    assert status["lastWriter"] == server.node_id, "this node wrote the statement"
    assert status["state"] == "READY" and status["appliedOffset"] + 1 >= status["endOffset"]
    assert status["startup"]["readySeconds"] > 0 and status["startup"]["resumedFrom"] is None
    assert status["startup"]["checkpoints"]["lastError"] is None
    cluster = httpx.get(f"{server.url}/clusterStatus").json()["clusterStatus"]
    assert cluster[server.url]["hostAlive"] is True
    metrics = httpx.get(f"{server.url}/metrics").text
    assert "metastore_statement_latency_seconds_count 1" in metrics
    assert 'metastore_state{state="READY"} 1' in metrics
    assert "metastore_fenced_retries_total 0" in metrics
    assert (f'metastore_image_info{{fingerprint="{status["imageFingerprint"][:16]}",'
            f'offset="{status["appliedOffset"]}"}} 1.0') in metrics
    assert httpx.get(f"{server.url}/openapi.json").json()["paths"]["/ksql"]


def test_probes_metadata_the_root_and_property_checks_answer_as_ksqldbs(
        plain_node: ServerProcess) -> None:
    for probe in ("live", "ready"):
        answer = httpx.get(f"{plain_node.url}/chc/{probe}")
        assert (answer.status_code, answer.json()) == (200, {})
    cluster_id = {"scope": {"path": [], "clusters": {
        "kafka-cluster": httpx.get(f"{plain_node.url}/info").json()["KsqlServerInfo"][
            "kafkaClusterId"], "ksql-cluster": plain_node.service_id}}, "id": ""}
    metadata = httpx.get(f"{plain_node.url}/v1/metadata").json()
    assert metadata == {"version": metadata["version"], "clusterId": cluster_id}
    assert httpx.get(f"{plain_node.url}/v1/metadata/id").json() == cluster_id
    root = httpx.get(f"{plain_node.url}/", follow_redirects=False)
    assert (root.status_code, root.headers["location"]) == (307, "/info")

    def valid(name: str) -> tuple[int, Any]:
        answer = httpx.get(f"{plain_node.url}/is_valid_property/{name}")
        return answer.status_code, answer.json()

    assert valid("ksql.streams.auto.offset.reset") == (200, True)
    assert valid("auto.offset.reset") == (200, True)
    assert valid("ksql.service.id") == (400, {
        "@type": "generic_error", "error_code": 40000, "message": "One or more properties "
        "overrides set locally are prohibited by the KSQL server denylist (use UNSET to reset "
        "their default value): [ksql.service.id]"})
    assert valid("ksql.no.such.setting") == (400, {
        "@type": "generic_error", "error_code": 40000, "message": "Not recognizable as ksql, "
        "streams, consumer, or producer property: 'ksql.no.such.setting'"})


def test_basic_auth(server_factory: Callable[..., ServerProcess], tmp_path: Path) -> None:
    credentials = tmp_path / "users"
    credentials.write_text("alice:s3cret\n")
    server = server_factory("--auth-file", str(credentials))
    assert httpx.get(f"{server.url}/info").status_code == 401
    assert httpx.get(f"{server.url}/info", auth=("alice", "wrong")).status_code == 401
    assert httpx.get(f"{server.url}/info", auth=("alice", "s3cret")).status_code == 200
    assert httpx.post(f"{server.url}/ksql", json={"ksql": "SHOW STREAMS;"}).status_code == 401
    assert httpx.get(f"{server.url}/healthcheck").status_code == 200
    for path in ("/chc/live", "/chc/ready", "/v1/metadata", "/v1/metadata/id"):
        assert httpx.get(f"{server.url}{path}").status_code == 200, path
    assert httpx.get(f"{server.url}/is_valid_property/auto.offset.reset").status_code == 401
    socket_url = server.url.replace("http://", "ws://") + "/ws/query?request=" + (
        urllib.parse.quote(json.dumps({"ksql": "SELECT * FROM X EMIT CHANGES;"})))
    with pytest.raises(InvalidStatus) as refused:
        connect(socket_url, open_timeout=10)
    assert refused.value.response.status_code == 403, "the handshake needs credentials"
    with connect(socket_url, open_timeout=10, additional_headers={
            "Authorization": "Basic " + base64.b64encode(b"alice:s3cret").decode()}) as socket:
        assert "runs without Spark" in json.loads(socket.recv(timeout=10))["error"]
    open_server = server_factory()
    assert httpx.get(f"{open_server.url}/info").status_code == 200


def test_sigterm_stops_cleanly(server: ServerProcess) -> None:
    ksql(server, stream("BEFORE_STOP"))
    assert server.stop(signal.SIGTERM) == 0


def test_signals_while_the_node_stops_are_harmless(server: ServerProcess) -> None:
    """A second SIGTERM or SIGINT (an impatient operator, an orchestrator's retry) while the node
    stops its services finds the server's event loop closed: it is ignored, the stop goes on."""
    ksql(server, stream("BEFORE_SIGNALS"))
    server.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 20
    while server.process.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError):
            server.process.send_signal(signal.SIGINT)
            server.process.send_signal(signal.SIGTERM)
        time.sleep(0.002)
    assert server.stop() == 0, server.output()
    assert "Traceback" not in server.output()
    assert "already stopping" in server.output()


def test_only_the_first_signal_wakes_the_server_loop() -> None:
    async def serve(signals: ShutdownSignals, first: int | None) -> None:
        stop = asyncio.Event()
        signals.serving(asyncio.get_running_loop(), stop)
        if first is not None:
            signals(first, None)
            await asyncio.wait_for(stop.wait(), 5)
        signals.served()

    woken = ShutdownSignals()
    asyncio.run(serve(woken, signal.SIGTERM))
    assert woken.requested
    woken(signal.SIGINT, None)  # the loop is closed: nothing to wake
    never = ShutdownSignals()  # the server ended without a signal (its port was taken, say)
    asyncio.run(serve(never, None))
    never(signal.SIGTERM, None)
    assert not never.requested


def test_unreachable_kafka_exits_non_zero(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "server", "--bootstrap-servers", "127.0.0.1:1",
         "--service-id", "x", "--listen", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "Kafka is unreachable at 127.0.0.1:1" in result.stderr


def test_one_node_serves_while_another_is_down(server_factory: Callable[..., ServerProcess],
                                               kafka_bootstrap: str, tmp_path: Path) -> None:
    first = server_factory(node_id="a")
    ksql(first, stream("KEPT"))
    first.stop()
    second = start_server(kafka_bootstrap, tmp_path, first.service_id, "b", "--spark-master", "none")
    try:
        [listed] = ksql(second, "SHOW STREAMS;").json()
        assert [s["name"] for s in listed["streams"]] == ["KEPT"]
    finally:
        second.stop()
