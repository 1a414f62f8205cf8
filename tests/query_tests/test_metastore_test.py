"""`metastore test` end to end: ksqlDB's test files run on the real broker and a real Spark.

One CLI run covers a passing, a failing and a refused test, a table compared on its final value
per key, the regression cases of the runtime below and a slice of ksqlDB's own query tests that
exercise the runner; a second runs ksql-test-runner's three files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.main import app
from metastore.dev.schema_registry import SchemaRegistryState
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from tests.support.waiting import eventually

# `metastore test` starts a SparkSession of its own in this process; its runs share the registry's
# worker, so no other run's topics or subjects appear while one counts what it left behind.
pytestmark = [pytest.mark.usefixtures("own_spark"), pytest.mark.xdist_group("schema-registry")]

DEV_RECORDS = Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / (
    "ksql-records-dev.jsonl")
DEV_SLICE = (  # cases that exercise the runner itself: what it feeds, when, and how it compares
    "qtt/headers.json::Can create and query stream with HEADER('key') columns",  # input headers
    "qtt/count.json::should support removing zero counts from table",  # a tombstone expected
    "qtt/latest-offset-udaf.json::merging session windows",  # session-windowed keys compared
    "qtt/window-bounds.json::table hopping",  # time-windowed keys compared
    "qtt/multi-col-keys.json::select * from stream",  # keys of several columns
    "qtt/timestamp-extractor.json::sink bigint timestamp column",  # record times compared
    "qtt/collect-set.json::collect_set with limit of 1",  # the test's properties apply
    "qtt/serdes.json::serialization should pick up value wrapping from config",
    "qtt/joins.json::table join pipeline - JSON",  # partitions as ksqlDB's test driver makes them
    "qtt/suppress.json::should suppress multiple keys",  # late records, record by record
    "qtt/joins.json::stream stream inner join with out of order messages - PROTOBUF_NOSR",  # a
    # late record, fed in an arrival of its own, is joined after the records piped before it
)
"""Every dev case whose plans are stored (893 of 900) runs in CI's replay of the stored plans
(``python -m integration.plans replay``, after the suite), which the planner's own plans equal
(``tests/unit/test_plan_versions.py``), and the suite replays a case of every plan shape and
format (``test_historical_plans.py``): the slice keeps what those runs would not show of
``metastore test``."""
INPUT = ("CREATE STREAM INPUT (ID INT KEY, NAME STRING, AMOUNT DOUBLE) WITH (KAFKA_TOPIC='input', "
         "VALUE_FORMAT='JSON');")
PROJECT = ("CREATE STREAM OUTPUT AS SELECT ID, UCASE(NAME) AS NAME, AMOUNT * 2 AS DOUBLED "
           "FROM INPUT WHERE AMOUNT > 1;")
INPUTS = [
    {"topic": "input", "key": 1, "value": {"NAME": "a", "AMOUNT": 0.5}, "timestamp": 0},
    {"topic": "input", "key": 2, "value": {"NAME": "b", "AMOUNT": 1.5}, "timestamp": 0,
     "headers": [{"KEY": "h", "VALUE": "AQ=="}]},
    {"topic": "input", "key": 1, "value": {"NAME": "c", "AMOUNT": 2}, "timestamp": 1000},
]
OUTPUTS = [
    {"topic": "OUTPUT", "key": 2, "value": {"NAME": "B", "DOUBLED": 3.0}, "timestamp": 0},
    {"topic": "OUTPUT", "key": 1, "value": {"NAME": "C", "DOUBLED": 4.0}, "timestamp": 1000},
]

T_AND_S = (
    "CREATE TABLE T (ID STRING PRIMARY KEY, R STRING) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');",
    "CREATE STREAM S (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');",
)
FINAL_OVER_JOIN = {  # the stream time EMIT FINAL replays counts only the joined, filtered rows
    "name": "final over a join", "statements": [
        *T_AND_S,
        "CREATE TABLE OUTPUT AS SELECT T.R AS R, COUNT(*) AS N FROM S JOIN T ON S.ID = T.ID "
        "WINDOW TUMBLING (SIZE 10 MILLISECONDS, GRACE PERIOD 0 MILLISECONDS) WHERE S.V > 0 "
        "GROUP BY T.R EMIT FINAL;"],
    "inputs": [
        {"topic": "t", "key": "a", "value": {"R": "x"}, "timestamp": 0},
        {"topic": "s", "key": "a", "value": {"V": 1}, "timestamp": 1},
        {"topic": "s", "key": "a", "value": {"V": 0}, "timestamp": 2},
        {"topic": "s", "key": "a", "value": {"V": 5}, "timestamp": 3},
        {"topic": "s", "key": "b", "value": {"V": 5}, "timestamp": 12},  # no T row
        {"topic": "s", "key": "a", "value": {"V": 5}, "timestamp": 13}],  # closes [0, 10)
    "outputs": [{"topic": "OUTPUT", "key": "x", "value": {"N": 2}, "timestamp": 3,
                 "window": {"start": 0, "end": 10, "type": "time"}}],
}


WINDOW_OVER_JOIN = {  # the joined records fall into windows after the table's keyed state
    "name": "window over a join", "statements": [
        *T_AND_S,
        "CREATE TABLE OUTPUT AS SELECT T.R AS R, COUNT(*) AS N FROM S JOIN T ON S.ID = T.ID "
        "WINDOW TUMBLING (SIZE 10 MILLISECONDS, GRACE PERIOD 5 MILLISECONDS) GROUP BY T.R "
        "EMIT CHANGES;"],
    "inputs": [
        {"topic": "t", "key": "a", "value": {"R": "x"}, "timestamp": 0},
        {"topic": "s", "key": "a", "value": {"V": 1}, "timestamp": 1},
        {"topic": "s", "key": "b", "value": {"V": 1}, "timestamp": 2},  # no T row
        {"topic": "s", "key": "a", "value": {"V": 2}, "timestamp": 3},
        {"topic": "t", "key": "a", "value": {"R": "y"}, "timestamp": 20},
        {"topic": "s", "key": "a", "value": {"V": 3}, "timestamp": 25}],
    "outputs": [
        {"topic": "OUTPUT", "key": "x", "value": {"N": 1}, "timestamp": 1,
         "window": {"start": 0, "end": 10, "type": "time"}},
        {"topic": "OUTPUT", "key": "x", "value": {"N": 2}, "timestamp": 3,
         "window": {"start": 0, "end": 10, "type": "time"}},
        {"topic": "OUTPUT", "key": "y", "value": {"N": 1}, "timestamp": 25,
         "window": {"start": 20, "end": 30, "type": "time"}}],
}


STRING_SINK_TIME = {  # the sink's time parsed from a STRING column; text that fails is dropped
    "name": "string sink time", "statements": [
        "CREATE STREAM S (K STRING KEY, AT STRING) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');",
        "CREATE STREAM OUTPUT WITH (TIMESTAMP='AT', TIMESTAMP_FORMAT='yyyy-MM-dd HH:mm:ssX') AS "
        "SELECT K, AT FROM S;"],
    "inputs": [
        {"topic": "s", "key": "a", "value": {"AT": "2021-03-04 05:06:07Z"}, "timestamp": 1},
        {"topic": "s", "key": "b", "value": {"AT": "yesterday"}, "timestamp": 2},
        {"topic": "s", "key": "c", "value": {"AT": "2021-03-04 05:06:08+01"}, "timestamp": 3}],
    "outputs": [
        {"topic": "OUTPUT", "key": "a", "value": {"AT": "2021-03-04 05:06:07Z"},
         "timestamp": 1614834367000},
        {"topic": "OUTPUT", "key": "c", "value": {"AT": "2021-03-04 05:06:08+01"},
         "timestamp": 1614830768000}],
}


STRING_SOURCE_TIME = {  # a source's time parsed from a STRING column; text that fails is skipped
    "name": "string source time", "statements": [
        "CREATE STREAM S (K STRING KEY, AT STRING, V INT) WITH (KAFKA_TOPIC='s', "
        "VALUE_FORMAT='JSON', TIMESTAMP='AT', TIMESTAMP_FORMAT='dd/MM/yyyy HH:mm');",
        "CREATE STREAM OUTPUT AS SELECT K, V FROM S;"],
    "inputs": [
        {"topic": "s", "key": "a", "value": {"AT": "04/03/2021 05:06", "V": 1}, "timestamp": 1},
        {"topic": "s", "key": "b", "value": {"AT": "soon", "V": 2}, "timestamp": 2}],
    "outputs": [
        {"topic": "OUTPUT", "key": "a", "value": {"V": 1}, "timestamp": 1614834360000}],
}

BIGINT_SOURCE_TIME = {  # a negative or NULL time from the TIMESTAMP column skips the record
    "name": "bigint source time", "statements": [
        "CREATE STREAM S (K STRING KEY, AT BIGINT, V INT) WITH (KAFKA_TOPIC='s', "
        "VALUE_FORMAT='JSON', TIMESTAMP='AT');",
        "CREATE STREAM OUTPUT AS SELECT K, V FROM S;"],
    "inputs": [
        {"topic": "s", "key": "a", "value": {"AT": 5, "V": 1}, "timestamp": 1},
        {"topic": "s", "key": "b", "value": {"AT": -1, "V": 2}, "timestamp": 2},
        {"topic": "s", "key": "c", "value": {"AT": None, "V": 3}, "timestamp": 3},
        {"topic": "s", "key": "d", "value": {"AT": 0, "V": 4}, "timestamp": 4}],
    "outputs": [
        {"topic": "OUTPUT", "key": "a", "value": {"V": 1}, "timestamp": 5},
        {"topic": "OUTPUT", "key": "d", "value": {"V": 4}, "timestamp": 0}],
}

JSON_KEY_TEXT = {  # a JSON key's string "10" is the INT 10, as ksqlDB's JSON deserializer reads it
    "name": "json key text", "statements": [
        "CREATE STREAM S (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='s', KEY_FORMAT='JSON', "
        "VALUE_FORMAT='JSON');",
        "CREATE STREAM OUTPUT AS SELECT * FROM S;"],
    "inputs": [{"topic": "s", "key": "10", "value": {"V": "a"}, "timestamp": 0},
               {"topic": "s", "key": 11, "value": {"V": "b"}, "timestamp": 1}],
    "outputs": [{"topic": "OUTPUT", "key": 10, "value": {"V": "a"}, "timestamp": 0},
                {"topic": "OUTPUT", "key": 11, "value": {"V": "b"}, "timestamp": 1}],
}

REPEATED_FIELDS = {  # a field of the column's own name wins, else the last in another case
    "name": "repeated fields", "statements": [INPUT, PROJECT],
    "inputs": [
        {"topic": "input", "key": 1, "value": {"NAME": "b", "name": "a", "AMOUNT": 2,
                                                "amount": 0}, "timestamp": 0},
        {"topic": "input", "key": 2, "value": {"Name": "c", "name": "d", "amount": 0,
                                                "Amount": 3}, "timestamp": 1}],
    "outputs": [
        {"topic": "OUTPUT", "key": 1, "value": {"NAME": "B", "DOUBLED": 4.0}, "timestamp": 0},
        {"topic": "OUTPUT", "key": 2, "value": {"NAME": "D", "DOUBLED": 6.0}, "timestamp": 1}],
}

QUOTED_JOIN = {  # a joined table's columns named with characters its keyed state cannot name
    "name": "quoted join", "statements": [
        "CREATE STREAM L (`the key` STRING KEY, `on` STRING) WITH (KAFKA_TOPIC='l', "
        "VALUE_FORMAT='JSON');",
        "CREATE TABLE R (`a.b` STRING PRIMARY KEY, `c d!` INT) WITH (KAFKA_TOPIC='r', "
        "VALUE_FORMAT='JSON');",
        "CREATE STREAM OUTPUT AS SELECT * FROM L JOIN R ON L.`on` = R.`a.b`;"],
    "inputs": [
        {"topic": "r", "key": "x", "value": {"c d!": 7}, "timestamp": 0},
        {"topic": "l", "key": "k", "value": {"on": "x"}, "timestamp": 1}],
    "outputs": [
        {"topic": "OUTPUT", "key": "x", "value": {"L_the key": "k", "R_a.b": "x", "R_c d!": 7},
         "timestamp": 1}],
}

AGGREGATED_JOIN = {  # a table-table join's rows aggregated as a table: rows change group, a
    # group HAVING rejects is deleted, a deleted right row leaves the left row's sum
    "name": "aggregated join", "statements": [
        "CREATE TABLE A (ID INT PRIMARY KEY, K STRING, V INT) WITH (KAFKA_TOPIC='a', "
        "VALUE_FORMAT='JSON');",
        "CREATE TABLE B (ID INT PRIMARY KEY, W INT) WITH (KAFKA_TOPIC='b', VALUE_FORMAT='JSON');",
        "CREATE TABLE OUT AS SELECT A.K, SUM(A.V + COALESCE(B.W, 0)) AS S FROM A LEFT JOIN B "
        "ON A.ID = B.ID WHERE A.V > 0 GROUP BY A.K HAVING SUM(A.V) < 100;"],
    "inputs": [
        {"topic": "a", "key": 1, "value": {"K": "x", "V": 1}, "timestamp": 10},
        {"topic": "b", "key": 1, "value": {"W": 10}, "timestamp": 11},
        {"topic": "a", "key": 2, "value": {"K": "x", "V": 2}, "timestamp": 12},
        {"topic": "a", "key": 1, "value": {"K": "y", "V": 1}, "timestamp": 13},
        {"topic": "a", "key": 2, "value": {"K": "x", "V": 200}, "timestamp": 14},
        {"topic": "b", "key": 1, "value": None, "timestamp": 15}],
    "outputs": [
        {"topic": "OUT", "key": "x", "value": {"S": 1}, "timestamp": 10},
        {"topic": "OUT", "key": "x", "value": {"S": 11}, "timestamp": 11},
        {"topic": "OUT", "key": "x", "value": {"S": 13}, "timestamp": 12},
        {"topic": "OUT", "key": "x", "value": {"S": 2}, "timestamp": 13},
        {"topic": "OUT", "key": "y", "value": {"S": 11}, "timestamp": 13},
        {"topic": "OUT", "key": "x", "value": None, "timestamp": 14},
        {"topic": "OUT", "key": "y", "value": {"S": 1}, "timestamp": 15}],
}

STREAMS = [
    "CREATE STREAM L (ID INT KEY, A STRING) WITH (KAFKA_TOPIC='l', VALUE_FORMAT='JSON');",
    "CREATE STREAM R (ID INT KEY, B INT) WITH (KAFKA_TOPIC='r', VALUE_FORMAT='JSON');",
]
WINDOW = {"start": 0, "end": 100000, "type": "time"}
AGGREGATED_STREAM_JOIN = {  # an outer join without GRACE PERIOD writes an unmatched record at
    # once, then its pair; each joined record counts in the window of the join's time
    "name": "aggregated stream join", "statements": [
        *STREAMS,
        "CREATE TABLE OUT AS SELECT COALESCE(L.A, 'none') AS A, COUNT(*) AS C, SUM(R.B) AS S "
        "FROM L FULL JOIN R WITHIN 1 SECONDS ON L.ID = R.ID WINDOW TUMBLING (SIZE 100 SECONDS) "
        "GROUP BY COALESCE(L.A, 'none');"],
    "inputs": [
        {"topic": "l", "key": 1, "value": {"A": "x"}, "timestamp": 99500},
        {"topic": "r", "key": 1, "value": {"B": 10}, "timestamp": 100200},  # window 100000..
        {"topic": "r", "key": 2, "value": {"B": 7}, "timestamp": 600},
        {"topic": "l", "key": 3, "value": {"A": "x"}, "timestamp": 99800}],
    "outputs": [
        {"topic": "OUT", "key": "x", "value": {"C": 1, "S": 0}, "timestamp": 99500,
         "window": WINDOW},
        {"topic": "OUT", "key": "x", "value": {"C": 1, "S": 10}, "timestamp": 100200,
         "window": {"start": 100000, "end": 200000, "type": "time"}},
        {"topic": "OUT", "key": "none", "value": {"C": 1, "S": 7}, "timestamp": 600,
         "window": WINDOW},
        {"topic": "OUT", "key": "x", "value": {"C": 2, "S": 0}, "timestamp": 99800,
         "window": WINDOW}],
}

AGGREGATED_STREAMS_AND_TABLE = {  # a table joined after a stream-stream join, aggregated
    "name": "aggregated streams and table", "statements": [
        *STREAMS,
        "CREATE TABLE T (ID INT PRIMARY KEY, NAME STRING) WITH (KAFKA_TOPIC='t', "
        "VALUE_FORMAT='JSON');",
        "CREATE TABLE OUT AS SELECT T.NAME, SUM(R.B) AS S FROM L JOIN R WITHIN 2 SECONDS "
        "ON L.ID = R.ID JOIN T ON L.ID = T.ID GROUP BY T.NAME HAVING SUM(R.B) > 1;"],
    "inputs": [
        {"topic": "t", "key": 1, "value": {"NAME": "n"}, "timestamp": 0},
        {"topic": "t", "key": 2, "value": {"NAME": "m"}, "timestamp": 0},
        {"topic": "l", "key": 1, "value": {"A": "x"}, "timestamp": 10},
        {"topic": "l", "key": 2, "value": {"A": "x"}, "timestamp": 10},
        {"topic": "r", "key": 1, "value": {"B": 1}, "timestamp": 20},
        {"topic": "r", "key": 2, "value": {"B": 1}, "timestamp": 20},
        {"topic": "r", "key": 1, "value": {"B": 5}, "timestamp": 30}],
    "outputs": [{"topic": "OUT", "key": "n", "value": {"S": 6}, "timestamp": 30}],
}

TWO_COLUMN_FOREIGN_KEY = {  # a foreign-key join's left rows keyed by two columns; a deleted
    # left row's tombstone has both
    "name": "two-column foreign key", "statements": [
        "CREATE TABLE L2 (A BIGINT PRIMARY KEY, B BIGINT PRIMARY KEY, NAME STRING) WITH "
        "(KAFKA_TOPIC='l2', FORMAT='JSON');",
        "CREATE TABLE R (ID BIGINT PRIMARY KEY, F STRING) WITH (KAFKA_TOPIC='r', FORMAT='JSON');",
        "CREATE TABLE OUT AS SELECT A, B, NAME, F FROM L2 LEFT JOIN R ON B = R.ID;"],
    "inputs": [
        {"topic": "r", "key": 0, "value": {"F": "x"}, "timestamp": 0},
        {"topic": "l2", "key": {"A": 1, "B": 0}, "value": {"NAME": "n"}, "timestamp": 10},
        {"topic": "l2", "key": {"A": 2, "B": 5}, "value": {"NAME": "m"}, "timestamp": 20},
        {"topic": "r", "key": 0, "value": {"F": "y"}, "timestamp": 30},
        {"topic": "l2", "key": {"A": 1, "B": 0}, "value": None, "timestamp": 40}],
    "outputs": [
        {"topic": "OUT", "key": {"A": 1, "B": 0}, "value": {"NAME": "n", "F": "x"},
         "timestamp": 10},
        {"topic": "OUT", "key": {"A": 2, "B": 5}, "value": {"NAME": "m", "F": None},
         "timestamp": 20},
        {"topic": "OUT", "key": {"A": 1, "B": 0}, "value": {"NAME": "n", "F": "y"},
         "timestamp": 30},
        {"topic": "OUT", "key": {"A": 1, "B": 0}, "value": None, "timestamp": 40}],
}

FIELD_NAMED_AS_SOURCE = {  # s->s is the field, s.s the source's column, a struct
    "name": "field named as its source", "statements": [
        "CREATE STREAM S (K STRING KEY, S STRUCT<S STRING>) WITH (KAFKA_TOPIC='s', "
        "VALUE_FORMAT='JSON');",
        "CREATE STREAM OUT AS SELECT K, S->S AS A, S.S AS B, S.S->S AS C FROM S;"],
    "inputs": [{"topic": "s", "key": "k", "value": {"S": {"S": "x"}}, "timestamp": 0}],
    "outputs": [{"topic": "OUT", "key": "k", "value": {"A": "x", "B": {"S": "x"}, "C": "x"},
                 "timestamp": 0}],
}

NOTHING_AGGREGATED = {  # a table aggregation whose WHERE is never true: Spark must still run
    # (and commit) the keyed operators of each micro-batch, though the stage's rows are none
    "name": "nothing aggregated", "statements": [
        "CREATE TABLE T (K STRING PRIMARY KEY, V INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');",
        "CREATE TABLE OUT AS SELECT V, COUNT(*) AS C FROM T WHERE 1 = 0 GROUP BY V;"],
    "inputs": [{"topic": "t", "key": "a", "value": {"V": 1}}],
    "outputs": [],
}

DECIMAL_OVERFLOW = {  # a query that fails on its records, where ksqlDB's throws in process
    "name": "decimal overflow", "statements": [
        "CREATE STREAM D (ID INT KEY, V DECIMAL(3, 1)) WITH (KAFKA_TOPIC='d', "
        "VALUE_FORMAT='JSON');",
        "CREATE TABLE T AS SELECT ID, SUM(V) AS S FROM D GROUP BY ID;"],
    "inputs": [{"topic": "d", "key": 1, "value": {"V": 60.5}},
               {"topic": "d", "key": 1, "value": {"V": 50.0}}],
    "outputs": [],
    "expectedException": {"type": "org.apache.kafka.streams.errors.StreamsException",
                          "message": "Exception caught in process"},
}


PIPELINES = Path(__file__).resolve().parents[1] / "data" / "pipelines" / "hopping_sink_stream.json"
HOPPING_SINK_STREAM = next(  # a stream over a hopping CTAS's sink gets each of its changes, a
    # record's windows in order, a key's windows in its partition
    case for case in json.loads(PIPELINES.read_text())["tests"]
    if case["name"] == "two partitions, several windows per record")


LATE_JOIN = Path(__file__).resolve().parents[1] / "data" / "pipelines" / (
    "avro_join_timestamp_format.json")
LATE_RIGHT_STREAM = next(  # AVRO streams of four partitions timed by TIMESTAMP_FORMAT text: a
    # join's records later than its GRACE PERIOD, within its window and grace, still join
    case for case in json.loads(LATE_JOIN.read_text())["tests"]
    if case["name"] == "inner join on the key, the right stream late")


def qtt_topics(bootstrap: str) -> set[str]:
    """The topics `metastore test` runs have made (``qtt-<run>-<n>-<topic>``)."""
    listed = Admin(KafkaSettings(bootstrap)).list_topics()
    return {topic.name for topic in listed if topic.name.startswith("qtt-")}


def invoke(bootstrap: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(app, ["test", *args, "--bootstrap-servers", bootstrap, "--json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


@pytest.fixture(scope="module")
def dev_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wanted = {line["id"]: line for line in map(json.loads, DEV_RECORDS.read_text().splitlines())
              if line["id"] in DEV_SLICE}
    assert sorted(wanted) == sorted(DEV_SLICE), "the slice names cases of the dev records file"
    path = tmp_path_factory.mktemp("slice") / "slice.jsonl"
    path.write_text("".join(json.dumps(wanted[i]) + "\n" for i in DEV_SLICE))
    return path


EXACTLY_ONCE = [  # the transactional sink: a stream, a table and a batch stage's writes
    {**case, "name": f"{case['name']} exactly once",
     "properties": {"processing.guarantee": "exactly_once_v2"}}
    for case in ({"name": "passes", "statements": [INPUT, PROJECT], "inputs": INPUTS,
                  "outputs": OUTPUTS},
                 {"name": "table", "statements": [
                     INPUT, "CREATE TABLE COUNTS AS SELECT ID, COUNT(*) AS N FROM INPUT "
                            "GROUP BY ID;"],
                  "inputs": INPUTS, "outputs": [
                      {"topic": "COUNTS", "key": 1, "value": {"N": 1}, "timestamp": 0},
                      {"topic": "COUNTS", "key": 2, "value": {"N": 1}, "timestamp": 0},
                      {"topic": "COUNTS", "key": 1, "value": {"N": 2}, "timestamp": 1000}]},
                 FINAL_OVER_JOIN)]


@pytest.mark.timeout(900)  # one run of every case of the slice, a few seconds each
def test_a_run_reports_passed_failed_and_refused_tests(kafka_bootstrap: str, tmp_path: Path,
                                                       dev_slice: Path,
                                                       registry: SchemaRegistryState) -> None:
    wrong = [dict(OUTPUTS[0]), {**OUTPUTS[1], "value": {"NAME": "C", "DOUBLED": 5.0}}]
    tests = {"tests": [
        {"name": "passes", "statements": [INPUT, PROJECT], "inputs": INPUTS, "outputs": OUTPUTS},
        {"name": "fails", "statements": [INPUT, PROJECT], "inputs": INPUTS, "outputs": wrong},
        {"name": "refused", "statements": [INPUT, "CREATE STREAM OUTPUT AS SELECT * FROM NOPE;"],
         "inputs": [], "outputs": []},
        {"name": "table", "statements": [
            INPUT, "CREATE TABLE COUNTS AS SELECT ID, COUNT(*) AS N, SUM(AMOUNT) AS TOTAL "
                   "FROM INPUT GROUP BY ID;"],
         "inputs": INPUTS, "outputs": [
             {"topic": "COUNTS", "key": 1, "value": {"N": 1, "TOTAL": 0.5}, "timestamp": 0},
             {"topic": "COUNTS", "key": 2, "value": {"N": 1, "TOTAL": 1.5}, "timestamp": 0},
             {"topic": "COUNTS", "key": 1, "value": {"N": 2, "TOTAL": 2.5}, "timestamp": 1000}]},
        FINAL_OVER_JOIN,
        WINDOW_OVER_JOIN,
        STRING_SINK_TIME,
        STRING_SOURCE_TIME,
        BIGINT_SOURCE_TIME,
        JSON_KEY_TEXT,
        REPEATED_FIELDS,
        QUOTED_JOIN,
        AGGREGATED_JOIN,
        AGGREGATED_STREAM_JOIN,
        AGGREGATED_STREAMS_AND_TABLE,
        TWO_COLUMN_FOREIGN_KEY,
        FIELD_NAMED_AS_SOURCE,
        NOTHING_AGGREGATED,
        DECIMAL_OVERFLOW,
        HOPPING_SINK_STREAM,
        LATE_RIGHT_STREAM,
        *EXACTLY_ONCE,
    ]}
    test_file = tmp_path / "tests.json"
    test_file.write_text(json.dumps(tests))
    code, report = invoke(kafka_bootstrap, str(test_file), str(dev_slice),  # AVRO cases
                          "--schema-registry-url", registry.url, "--parallel", "3")

    def left() -> set[str]:  # other runs of the suite may be making topics of their own
        return {t for t in qtt_topics(kafka_bootstrap) if t.startswith(f"qtt-{report['runId']}-")}

    # a run deletes the topics it made (the brokers' metadata has 10 s to follow the deletions)
    eventually(lambda: not left(), 10, lambda: f"the run's topics to be deleted, left: {left()}")
    by_name = {case["name"]: case for case in report["cases"]}
    assert code == 1
    assert by_name["passes"]["status"] == "passed", by_name["passes"]
    assert by_name["passes"]["id"] == f"{test_file}::passes"
    assert by_name["fails"]["status"] == "failed"
    assert '1 -> {"NAME": "C", "DOUBLED": 5.0} @1000' in by_name["fails"]["reason"]
    assert '1 -> {"NAME": "C", "DOUBLED": 4.0} @1000' in by_name["fails"]["reason"]
    assert by_name["refused"]["status"] == "refused"
    assert "NOPE" in by_name["refused"]["reason"]
    assert by_name["table"]["status"] == "passed", by_name["table"]
    assert by_name["final over a join"]["status"] == "passed", by_name["final over a join"]
    assert by_name["window over a join"]["status"] == "passed", by_name["window over a join"]
    assert by_name["string sink time"]["status"] == "passed", by_name["string sink time"]
    assert by_name["string source time"]["status"] == "passed", by_name["string source time"]
    assert by_name["bigint source time"]["status"] == "passed", by_name["bigint source time"]
    assert by_name["json key text"]["status"] == "passed", by_name["json key text"]
    assert by_name["repeated fields"]["status"] == "passed", by_name["repeated fields"]
    assert by_name["quoted join"]["status"] == "passed", by_name["quoted join"]
    assert by_name["aggregated join"]["status"] == "passed", by_name["aggregated join"]
    for name in (*(case["name"] for case in EXACTLY_ONCE),
                 "aggregated stream join", "aggregated streams and table",
                 "two-column foreign key", "field named as its source", "nothing aggregated",
                 HOPPING_SINK_STREAM["name"], LATE_RIGHT_STREAM["name"]):
        assert by_name[name]["status"] == "passed", by_name[name]
    assert by_name["decimal overflow"]["status"] == "passed", by_name["decimal overflow"]
    from_dev = [case for case in report["cases"] if case["id"] in DEV_SLICE]
    assert [case["id"] for case in from_dev] == list(DEV_SLICE)
    assert [case for case in from_dev if case["status"] != "passed"] == []
    assert report["total"] == 21 + len(EXACTLY_ONCE) + len(DEV_SLICE)
    assert report["passed"] == 19 + len(EXACTLY_ONCE) + len(DEV_SLICE)


def test_ksql_test_runner_files(kafka_bootstrap: str, tmp_path: Path) -> None:
    (tmp_path / "s.sql").write_text(f"{INPUT}\n{PROJECT}\n")
    (tmp_path / "in.json").write_text(json.dumps({"inputs": INPUTS}))
    (tmp_path / "out.json").write_text(json.dumps({"outputs": OUTPUTS}))
    code, report = invoke(kafka_bootstrap, "--sql-file", str(tmp_path / "s.sql"),
                          "--input-file", str(tmp_path / "in.json"),
                          "--output-file", str(tmp_path / "out.json"))
    assert report["cases"][0]["status"] == "passed", report
    assert (code, report["passed"], report["total"]) == (0, 1, 1)


def test_insert_values_statements_are_produced_before_the_inputs(kafka_bootstrap: str,
                                                                  tmp_path: Path) -> None:
    tests = {"tests": [
        {"name": "inserts", "statements": [
            INPUT, "INSERT INTO INPUT (ID, NAME, AMOUNT, ROWTIME) VALUES (5, 'v', 3, 7);",
            PROJECT],
         "inputs": INPUTS[2:], "outputs": [
             {"topic": "OUTPUT", "key": 5, "value": {"NAME": "V", "DOUBLED": 6.0},
              "timestamp": 7}, OUTPUTS[1]]},
        {"name": "bad value", "statements": [
            INPUT, "INSERT INTO INPUT (ID, NAME) VALUES ('x', 'v');"],
         "inputs": [], "outputs": [], "expectedException": {
             "type": "io.confluent.ksql.util.KsqlStatementException",
             "message": "Failed to insert values into 'INPUT'. Expected type INTEGER for field "
                        "`ID` but got STRING(x)"}},
    ]}
    test_file = tmp_path / "tests.json"
    test_file.write_text(json.dumps(tests))
    code, report = invoke(kafka_bootstrap, str(test_file))
    by_name = {case["name"]: case for case in report["cases"]}
    assert by_name["inserts"]["status"] == "passed", by_name["inserts"]
    assert by_name["bad value"]["status"] == "passed", by_name["bad value"]
    assert code == 0
