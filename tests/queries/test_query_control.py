"""PAUSE, RESUME, EXPLAIN and SHOW QUERIES EXTENDED on a node process with Spark and real
Kafka: a paused query stops reading and goes on from its checkpoint when resumed (nothing lost,
nothing twice), and EXPLAIN shows Spark's plan of a running query or of a statement that would
start one, without starting it. A plan Spark refuses is the client's error, tested with a
stand-in for Spark."""

from __future__ import annotations

import json
import time

import pytest
from py4j.protocol import Py4JNetworkError
from pyspark.errors import AnalysisException

from metastore.engine.overrides import NO_OVERRIDES
from metastore.engine.validation import Explained
from metastore.kafka.settings import KafkaSettings
from metastore.runtime.explain import SparkExplainer
from metastore.server.http import error_codes as codes
from metastore.server.http.answers import failure
from metastore.spark.exceptions import SparkQueryError, SparkUnavailableError
from metastore.testing.check import run_script
from tests.queries.test_push_queries import create_stream, insert, node  # noqa: F401
from tests.queries.test_query_nodes import ksql, queries
from tests.queries.test_spark_jobs import read_all
from tests.support.servers import ServerProcess, gauge
from tests.support.waiting import eventually


def _values(settings: KafkaSettings, topic: str, count: int,
            timeout: float = 90) -> list[dict[str, object]]:
    return [json.loads(value) for _, value, _ in read_all(settings, topic, count, timeout)
            if value is not None]


def test_a_paused_query_stops_and_resumes_from_its_checkpoint(
        node: ServerProcess, kafka_settings: KafkaSettings) -> None:  # noqa: F811 - the fixture
    stream = create_stream(node)
    sink = f"{stream}_UP"
    [created] = ksql(node, f"CREATE STREAM {sink} AS SELECT ID, UCASE(V) AS U FROM {stream};")
    query_id = created["commandStatus"]["queryId"]
    eventually(lambda: queries(node)[query_id]["state"] == "RUNNING", 120, "the query to run", interval=0.5)
    insert(node, stream, (1, "one"))
    assert _values(kafka_settings, sink, 1) == [{"U": "ONE"}]

    running = gauge(node, "metastore_spark_streaming_queries")
    [paused] = ksql(node, f"PAUSE {query_id};")
    assert paused["commandStatus"]["message"] == "Query paused."
    assert paused["commandId"] == f"pause/{query_id}/execute"
    assert queries(node)[query_id]["state"] == "PAUSED"
    eventually(lambda: gauge(node, "metastore_spark_streaming_queries") == running - 1, 60,
               "the paused query's Spark query to stop", interval=0.5)
    insert(node, stream, (2, "two"))
    eventually(lambda: queries(node)[query_id].get("lag") == 1, 30,
               lambda: f"the paused query's lag to count the record it has not read: "
                       f"{queries(node)[query_id]}", interval=0.5)
    assert gauge(node, f'metastore_query_lag{{query_id="{query_id}"}}') == 1.0
    time.sleep(1)
    assert _values(kafka_settings, sink, 2, timeout=3) == [{"U": "ONE"}], "read while paused"

    [resumed] = ksql(node, "RESUME ALL;")
    assert resumed["commandStatus"]["message"] == "Query resumed."
    assert resumed["commandId"] == "resume/ALL/execute"
    eventually(lambda: queries(node)[query_id]["state"] == "RUNNING", 120, "the query to resume",
               interval=0.5)
    assert _values(kafka_settings, sink, 2) == [{"U": "ONE"}, {"U": "TWO"}]
    eventually(lambda: queries(node)[query_id].get("lag") == 0, 30,
               "the resumed query's lag to fall to 0", interval=0.5)
    time.sleep(2)
    assert len(_values(kafka_settings, sink, 3, timeout=3)) == 2, "a record written twice"

    [refused] = ksql(node, "PAUSE NOPE_1;", status=400)
    assert refused["message"].startswith("Unknown queryId: NOPE_1")


def test_explain_shows_the_spark_plan_without_starting_anything(
        node: ServerProcess) -> None:  # noqa: F811 - the fixture
    stream = create_stream(node)
    [created] = ksql(node, f"CREATE STREAM {stream}_F AS SELECT ID, V FROM {stream} WHERE ID > 5;")
    query_id = created["commandStatus"]["queryId"]

    [explained] = ksql(node, f"EXPLAIN {query_id};")
    assert explained["@type"] == "queryDescription"
    description = explained["queryDescription"]
    assert description["id"] == query_id and description["sources"] == [stream]
    assert description["sinks"] == [f"{stream}_F"] and description["queryType"] == "PERSISTENT"
    assert [f["name"] for f in description["fields"]] == ["ID", "V"]
    assert "== Physical Plan ==" in description["executionPlan"]
    assert "> 5" in description["executionPlan"]

    before = {s["name"] for s in ksql(node, "SHOW STREAMS;")[0]["streams"]}
    known = set(queries(node))
    [would] = ksql(node, f"EXPLAIN CREATE STREAM {stream}_G AS SELECT ID, V FROM {stream};")
    assert would["queryDescription"]["sinks"] == [f"{stream}_G"]
    assert would["queryDescription"]["id"].startswith(f"CSAS_{stream}_G_")
    assert "== Physical Plan ==" in would["queryDescription"]["executionPlan"]
    [push] = ksql(node, f"EXPLAIN SELECT V FROM {stream} EMIT CHANGES;")
    assert push["queryDescription"]["queryType"] == "PUSH"
    assert [f["name"] for f in push["queryDescription"]["fields"]] == ["V"]
    assert {s["name"] for s in ksql(node, "SHOW STREAMS;")[0]["streams"]} == before
    assert set(queries(node)) == known, "EXPLAIN started a query"

    [listing] = ksql(node, "SHOW QUERIES EXTENDED;")
    assert listing["@type"] == "query_descriptions"
    assert query_id in {d["id"] for d in listing["queryDescriptions"]}

    [unknown] = ksql(node, "EXPLAIN NOPE_2;", status=400)
    assert unknown["message"].startswith(
        "Query with id:NOPE_2 does not exist, use SHOW QUERIES to view the full set of queries.")
    [not_a_query] = ksql(node, f"EXPLAIN DROP STREAM {stream};", status=400)
    assert not_a_query["message"].startswith("The provided statement does not run a ksql query")


class FailingSpark:
    """A Spark session whose every use fails with ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def newSession(self) -> FailingSpark:  # noqa: N802 - Spark's name
        raise self.error


def test_a_plan_spark_refuses_is_the_clients_error_not_a_server_error() -> None:
    _, image = run_script("CREATE STREAM A (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='a', "
                          "VALUE_FORMAT='JSON', PARTITIONS=1); CREATE STREAM B AS SELECT * FROM A;")
    explained = Explained(image, query=image.queries["CSAS_B_1"])
    refused = AnalysisException(message="[UNRESOLVED_COLUMN] `X` cannot be resolved.\nat ...")
    with pytest.raises(SparkQueryError) as error:
        SparkExplainer(lambda: FailingSpark(refused), {})(explained, NO_OVERRIDES)
    assert error.value.message == ("Spark could not plan the query: [UNRESOLVED_COLUMN] `X` "
                                   "cannot be resolved.")
    answer = failure(error.value, "EXPLAIN CSAS_B_1;")
    assert answer.status_code == 400
    assert json.loads(answer.body)["error_code"] == codes.BAD_STATEMENT
    with pytest.raises(SparkUnavailableError) as gone:
        SparkExplainer(lambda: FailingSpark(Py4JNetworkError("Answer from Java side is empty")),
                       {})(explained, NO_OVERRIDES)
    assert failure(gone.value, "EXPLAIN CSAS_B_1;").status_code == 503
