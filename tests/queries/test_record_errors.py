"""A row a query's expressions cannot compute is ksqlDB's RECORD_PROCESSING_ERROR, on the suite's
Spark node: its column is NULL (or the row is dropped, when its WHERE failed), the query goes on,
the processing log has one entry per failed row with ksqlDB's logger and message, and /metrics
counts them per query. A PARTITION BY, a query over a table, a push query, joins of streams
with tables, with streams and of tables, and an aggregation's HAVING and SELECT over its
aggregated rows log theirs too."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from functools import partial
from typing import Any

import httpx
from confluent_kafka import Producer

from metastore.kafka.settings import KafkaSettings
from metastore.runtime.processing_log_settings import ProcessingLogSettings
from tests.queries.test_query_nodes import ksql, queries
from tests.queries.test_skipped_records import _pushed, _values, earliest, values_to_end
from tests.server.test_cli import cli
from tests.support.kafka import unique
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually

ROWS = [  # (ID, TXT, A, B)
    (1, "5", 4, 2),
    (2, "x", 4, 2),  # CAST('x' AS INT) fails: N is NULL
    (3, "7", 4, 0),  # A % B fails: the WHERE drops the row, though its OR A < 5 holds
    (4, "9", 6, 3),
]


def test_a_row_a_query_cannot_compute_is_logged_and_counted_and_the_query_goes_on(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer],
        kafka_settings: KafkaSettings) -> None:
    name = _rows_source(spark_node, "RPE")
    sink = f"{name}_OUT"
    _produce_rows(producer_factory(), name)
    earliest(spark_node, f"CREATE STREAM {sink} WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, "
                         f"CAST(TXT AS INT) AS N, A / B AS Q FROM {name} WHERE A % B = 0 OR A < 5;")
    assert _values(kafka_settings, sink, 3) == [{"N": 5, "Q": 2}, {"N": None, "Q": 2},
                                                 {"N": 9, "Q": 2}]
    [query_id] = [q["id"] for q in queries(spark_node).values() if q["sinks"] == [sink]]

    entries = eventually(lambda: _entries(kafka_settings, spark_node, query_id, 2), 90,
                         "the query's two failed rows in the processing log", interval=1)
    assert {(e["logger"], e["level"], e["message"]["type"]) for e in entries} == {
        (f"processing.{query_id}.Project", "ERROR", 1),
        (f"processing.{query_id}.WhereFilter", "ERROR", 1)}
    errors = sorted((e["message"]["recordProcessingError"] for e in entries),
                    key=lambda error: str(error["errorMessage"]))
    assert errors == [
        {"errorMessage": "Error evaluating predicate (((A % B) = 0) OR (A < 5))", "record": None,
         "cause": ["/ by zero"]},
        {"errorMessage": "Error processing INTEGER", "record": None,
         "cause": ['For input string: "x"']}], "rows.include is false on the suite's node"
    assert eventually(lambda: _processing_errors(spark_node, query_id) == 2 or None, 60,
                      "/metrics to count the query's two failed rows", interval=1)
    shown = eventually(lambda: queries(spark_node)[query_id] if queries(spark_node)[query_id][
        "processingErrors"] == 2 else None, 60, "SHOW QUERIES to count them", interval=1)
    assert shown["state"] == "RUNNING" and shown["skippedRecords"] == 0
    status = cli("status", "--server", spark_node.url)
    assert status.returncode == 0, status.stderr
    [row] = [[cell.strip() for cell in line.strip(" |").split("|")]
             for line in status.stdout.splitlines() if query_id in line]
    assert row[-2:] == ["0", "2"], f"Skipped 0, Errors 2: {status.stdout}"


def test_a_partition_by_a_table_source_and_a_push_query_log_the_rows_they_cannot_compute(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer],
        kafka_settings: KafkaSettings) -> None:
    name = _rows_source(spark_node, "RPK", table=True)
    _produce_rows(producer_factory(), name)
    earliest(spark_node, f"CREATE STREAM {name}_P AS SELECT * FROM {name} PARTITION BY A / B;"
                         f"CREATE TABLE {name}_Q AS SELECT ID, CAST(TXT AS INT) AS N "
                         f"FROM {name}_T;")
    assert [sorted(value.items()) for value in _values(kafka_settings, f"{name}_P", 4)] == [
        sorted({"ID": key, "TXT": text, "A": a, "B": b}.items()) for key, text, a, b in ROWS]
    assert _values(kafka_settings, f"{name}_Q", 4) == [{"N": 5}, {"N": None}, {"N": 7}, {"N": 9}]
    ids = {sink: query_id for query_id, q in queries(spark_node).items()
           for sink in q["sinks"] if sink.startswith(name)}
    partition_by, table = ids[f"{name}_P"], ids[f"{name}_Q"]
    [new_key] = eventually(lambda: _entries(kafka_settings, spark_node, partition_by, 1), 90,
                           "the PARTITION BY's failed row in the processing log", interval=1)
    assert (new_key["logger"], new_key["message"]["recordProcessingError"]["errorMessage"]) == (
        f"processing.{partition_by}.PartitionBy", "Error computing new key from expression "
        "(A / B)")
    [projected] = eventually(lambda: _entries(kafka_settings, spark_node, table, 1), 90,
                             "the table query's failed row in the processing log", interval=1)
    assert (projected["logger"], projected["message"]["recordProcessingError"]["cause"]) == (
        f"processing.{table}.Project", ['For input string: "x"'])

    assert _pushed(spark_node, f"SELECT ID, CAST(TXT AS INT) AS N, A / B AS Q FROM {name} "
                               "EMIT CHANGES;", len(ROWS), partial(
                                   _push_logged, kafka_settings, spark_node, name, 2)) == [
        [1, 5, 2], [2, None, 2], [3, 7, None], [4, 9, 2]]
    pushed = _push_entries(kafka_settings, spark_node, name) or []
    assert all(re.fullmatch(rf"processing\.transient_{name}_\d+\.Project", entry["logger"])
               for entry in pushed)
    assert sorted(entry["message"]["recordProcessingError"]["errorMessage"]
                  for entry in pushed) == [  # a push query's key column counts in the index
        "Error computing expression (A / B) for column Q with index 2",
        "Error processing INTEGER"]


def test_a_stream_table_join_logs_the_joined_rows_it_cannot_compute(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer],
        kafka_settings: KafkaSettings) -> None:
    name = _rows_source(spark_node, "RPJ")
    ksql(spark_node, f"CREATE TABLE {name}_T (ID INT PRIMARY KEY, NAME STRING) WITH ("
                     f"KAFKA_TOPIC='{name}_T', PARTITIONS=1, VALUE_FORMAT='JSON');")
    producer = producer_factory()
    for key in (1, 2, 3):  # 4 and 5 join no row
        producer.produce(f"{name}_T", key=struct.pack(">i", key),
                         value=json.dumps({"NAME": f"n{key}"}).encode())
    assert producer.flush(30) == 0
    _produce_rows(producer, name)
    producer.produce(name, key=struct.pack(">i", 5),  # fails, but an inner join drops it first
                     value=json.dumps({"TXT": "z", "A": 1, "B": 0}).encode())
    assert producer.flush(30) == 0
    sink = f"{name}_J"
    earliest(spark_node, f"CREATE STREAM {sink} AS SELECT S.ID, CAST(S.TXT AS INT) AS N, "
                         f"T.NAME FROM {name} S JOIN {name}_T T ON S.ID = T.ID "
                         "WHERE A % S.B = 0;")
    assert sorted(_values(kafka_settings, sink, 2), key=str) == [{"N": 5, "NAME": "n1"},
                                                                  {"N": None, "NAME": "n2"}]
    [query_id] = [q["id"] for q in queries(spark_node).values() if q["sinks"] == [sink]]
    entries = eventually(lambda: _entries(kafka_settings, spark_node, query_id, 2), 90,
                         "the join's two failed rows in the processing log", interval=1)
    errors = sorted(((e["logger"], e["message"]["type"], e["message"]["recordProcessingError"])
                     for e in entries), key=str)
    assert errors == [
        (f"processing.{query_id}.Project", 1, {"errorMessage": "Error processing INTEGER",
                                               "record": None,
                                               "cause": ['For input string: "x"']}),
        (f"processing.{query_id}.WhereFilter", 1, {
            "errorMessage": "Error evaluating predicate ((S_A % S_B) = 0)", "record": None,
            "cause": ["/ by zero"]})], "the unmatched row 5 is not evaluated"
    assert eventually(lambda: _processing_errors(spark_node, query_id) == 2 or None, 60,
                      "/metrics to count the join's two failed rows", interval=1)


def test_an_aggregations_having_and_select_log_the_aggregated_rows_they_cannot_compute(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer],
        kafka_settings: KafkaSettings) -> None:
    name = _rows_source(spark_node, "RPA")
    _produce_rows(producer_factory(), name)
    # the plain one: 1 and 2, its HAVING divides by 0 and drops the row (though ID < 3 holds);
    # 3, it is false; 4, R divides by 0. The windowed one's rows go through a stage that writes
    # them in time order; the HOPPING one's records are each in two windows' rows, and logged
    # once; the SESSION and EMIT FINAL ones' WHERE is evaluated before their windows' keyed
    # state.
    sink, windowed, hopping = f"{name}_A", f"{name}_W", f"{name}_H"
    session, final = f"{name}_S", f"{name}_F"
    earliest(spark_node, f"CREATE TABLE {sink} AS SELECT ID, SUM(A) / SUM(B) AS Q, "
                         f"SUM(A) / (SUM(B) - 3) AS R FROM {name} GROUP BY ID "
                         "HAVING SUM(A) / (SUM(B) - 2) >= 0 OR ID < 3;"
                         f"CREATE TABLE {windowed} AS SELECT ID, SUM(A) / (SUM(B) - 3) AS R "
                         f"FROM {name} WINDOW TUMBLING (SIZE 1 HOUR) GROUP BY ID;"
                         f"CREATE TABLE {hopping} AS SELECT ID, COUNT(*) AS C FROM {name} "
                         "WINDOW HOPPING (SIZE 1 HOUR, ADVANCE BY 30 MINUTES) "
                         "WHERE A % B = 0 GROUP BY ID;"
                         f"CREATE TABLE {session} AS SELECT ID, COUNT(*) AS C FROM {name} "
                         "WINDOW SESSION (1 HOUR) WHERE A % B = 0 GROUP BY ID;"
                         f"CREATE TABLE {final} AS SELECT ID, COUNT(*) AS C FROM {name} "
                         "WINDOW TUMBLING (SIZE 1 HOUR) WHERE A % B = 0 GROUP BY ID EMIT FINAL;")
    assert _values(kafka_settings, sink, 4) == [{"Q": 2, "R": None}]
    ids = {q["sinks"][0]: query_id for query_id, q in queries(spark_node).items()
           if q["sinks"] and q["sinks"][0].startswith(name)}
    entries = eventually(lambda: _entries(kafka_settings, spark_node, ids[sink], 3), 90,
                         "the aggregation's three failed rows in the processing log",
                         interval=1)
    errors = sorted(((e["logger"], e["message"]["recordProcessingError"]["errorMessage"],
                      e["message"]["recordProcessingError"]["cause"]) for e in entries), key=str)
    having = (f"processing.{ids[sink]}.Aggregate.HavingFilter", "Error evaluating predicate "
              "(((KSQL_AGG_VARIABLE_4 / (KSQL_AGG_VARIABLE_5 - 2)) >= 0) OR (ID < 3))",
              ["/ by zero"])
    assert errors == [having, having, (
        f"processing.{ids[sink]}.Aggregate.Project", "Error computing expression "
        "(KSQL_AGG_VARIABLE_2 / (KSQL_AGG_VARIABLE_3 - 3)) for column R with index 1",
        ["/ by zero"])]
    assert eventually(lambda: _processing_errors(spark_node, ids[sink]) == 3 or None, 60,
                      "/metrics to count the aggregation's three failed rows", interval=1)

    assert sorted(_values(kafka_settings, windowed, 4), key=str) == [  # in time order
        {"R": -1}, {"R": -4}, {"R": -4}, {"R": None}]
    assert _values(kafka_settings, hopping, 6) == [{"C": 1}] * 6
    for query, (logger, message) in {
            windowed: ("Aggregate.Project", "Error computing expression (KSQL_AGG_VARIABLE_0 / "
                                            "(KSQL_AGG_VARIABLE_1 - 3)) for column R with index 0"),
            **dict.fromkeys((hopping, session, final), (
                "WhereFilter", "Error evaluating predicate ((A % B) = 0)"))}.items():
        [entry] = eventually(partial(_entries, kafka_settings, spark_node, ids[query], 1), 90,
                             f"{query}'s failed row in the processing log", interval=1)
        assert (entry["logger"], entry["message"]["recordProcessingError"]["errorMessage"]) == (
            f"processing.{ids[query]}.{logger}", message)

    assert _pushed(spark_node, f"SELECT ID, 10 / (COUNT(*) - 1) AS X FROM {name} GROUP BY ID "
                               "EMIT CHANGES;", 4, partial(_push_logged, kafka_settings,
                                                           spark_node, name, 4)) == [
        [k, None] for k in range(1, 5)]
    pushed = _push_entries(kafka_settings, spark_node, name)
    assert pushed is not None and {e["message"]["recordProcessingError"]["errorMessage"]
                                   for e in pushed} == {
        "Error computing expression (10 / (KSQL_AGG_VARIABLE_0 - 1)) for column X with index 1"
    }, "a push query projects its grouping columns too"
    for query in (session, final):  # each record once, though their stages read it again
        assert _processing_errors(spark_node, ids[query]) == 1


def test_table_session_and_emit_final_aggregations_log_the_rows_their_stage_computes(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer],
        kafka_settings: KafkaSettings) -> None:
    """Their aggregate SELECT runs in the batch stage of each micro-batch, whose observations
    reach no streaming progress: the stage measures the rows it kept once they are written."""
    name = _rows_source(spark_node, "RPT", table=True)
    ksql(spark_node, f"CREATE STREAM {name}_L (ID INT KEY, A INT) WITH (KAFKA_TOPIC="
                     f"'{name}_L', PARTITIONS=1, VALUE_FORMAT='JSON');")
    producer = producer_factory()
    _produce_rows(producer, name)
    for key, at in [(1, 1000), (1, 1500), (3, 2500), (2, 3500)]:  # 2,500 closes ID 1's window,
        # 3,500 ID 3's
        producer.produce(f"{name}_L", key=struct.pack(">i", key),
                         value=json.dumps({"A": key}).encode(), timestamp=at)
    assert producer.flush(30) == 0
    # the table's groups: A=4 (B: 2, 2, 0), whose R divides by 0; A=6 (B: 3), whose HAVING
    # does. The closed windows and the sessions: ID 1 (2 records) is kept, the HAVING of ID 3
    # (and of ID 2's session) divides by 0. The EMIT FINAL sessions (gap 500 ms, kept an hour
    # after they end): 2,500 closes ID 1's, 3,500 ID 3's, whose HAVING divides by 0; ID 2's
    # stays open.
    grouped, final, sessions = f"{name}_G", f"{name}_FH", f"{name}_SH"
    final_sessions = f"{name}_FS"
    earliest(spark_node, f"CREATE TABLE {grouped} AS SELECT A, COUNT(*) AS C, "
                         f"10 / (SUM(B) - 4) AS R FROM {name}_T GROUP BY A "
                         "HAVING 6 / (SUM(B) - 3) >= 0;"
                         f"CREATE TABLE {final} AS SELECT ID, COUNT(*) AS C FROM {name}_L "
                         "WINDOW TUMBLING (SIZE 1 SECOND, GRACE PERIOD 0 SECONDS) GROUP BY ID "
                         "HAVING 10 / (COUNT(*) - 1) > 0 EMIT FINAL;"
                         f"CREATE TABLE {sessions} AS SELECT ID, COUNT(*) AS C FROM {name}_L "
                         "WINDOW SESSION (1 HOUR) GROUP BY ID HAVING 10 / (COUNT(*) - 1) > 0;"
                         f"CREATE TABLE {final_sessions} AS SELECT ID, COUNT(*) AS C FROM "
                         f"{name}_L WINDOW SESSION (500 MILLISECONDS, RETENTION 1 HOUR, GRACE PERIOD "
                         "0 SECONDS) "
                         "GROUP BY ID HAVING 10 / (COUNT(*) - 1) > 0 EMIT FINAL;")
    assert _values(kafka_settings, final, 1) == [{"C": 2}]
    assert _values(kafka_settings, final_sessions, 1) == [{"C": 2}]
    assert _values(kafka_settings, sessions, 1) == [{"C": 2}]
    ids = {q["sinks"][0]: query_id for query_id, q in queries(spark_node).items()
           if q["sinks"] and q["sinks"][0].startswith(name)}
    for query, expected in {
            grouped: [("Aggregate.HavingFilter", "Error evaluating predicate ((6 / "
                                                 "(KSQL_AGG_VARIABLE_2 - 3)) >= 0)"),
                      ("Aggregate.Project", "Error computing expression (10 / "
                                            "(KSQL_AGG_VARIABLE_1 - 4)) for column R with "
                                            "index 1")],
            **{closing: [("Aggregate.HavingFilter", "Error evaluating predicate ((10 / "
                                                  "(KSQL_AGG_VARIABLE_1 - 1)) > 0)")]
               for closing in (final, final_sessions)},
            sessions: [("Aggregate.HavingFilter", "Error evaluating predicate ((10 / "
                                                  "(KSQL_AGG_VARIABLE_1 - 1)) > 0)")] * 2
            }.items():
        entries = eventually(partial(_entries, kafka_settings, spark_node, ids[query],
                                     len(expected)), 90,
                             f"{query}'s failed rows in the processing log", interval=1)
        assert sorted((e["logger"], e["message"]["recordProcessingError"]["errorMessage"],
                       e["message"]["recordProcessingError"]["cause"]) for e in entries) == [
            (f"processing.{ids[query]}.{logger}", message, ["/ by zero"])
            for logger, message in expected]
    table = f"{name}_T"
    assert _pushed(spark_node, f"SELECT A, 10 / (SUM(B) - 4) AS R FROM {table} GROUP BY A "
                               "EMIT CHANGES;", 2, partial(_push_logged, kafka_settings,
                                                           spark_node, table, 1)) == [
        [4, None], [6, -10]]
    [pushed] = _push_entries(kafka_settings, spark_node, table) or [None]
    assert pushed["message"]["recordProcessingError"]["errorMessage"] == (
        "Error computing expression (10 / (KSQL_AGG_VARIABLE_0 - 4)) for column R with index 1")

    # a micro-batch that changes A=6 alone (B: 3, 3: kept, R is 5) evaluates no other group
    producer.produce(name, key=struct.pack(">i", 5),
                     value=json.dumps({"TXT": "1", "A": 6, "B": 3}).encode())
    assert producer.flush(30) == 0
    eventually(lambda: {"C": 2, "R": 5} in [json.loads(value) for value in values_to_end(
        kafka_settings, grouped) if value is not None] or None, 60, "A=6's new row")
    assert _entries(kafka_settings, spark_node, ids[grouped], 2) is not None
    for query, failed in {grouped: 2, final: 1, sessions: 2, final_sessions: 1}.items():
        assert eventually(lambda q=ids[query], n=failed: _processing_errors(spark_node, q) == n
                          or None, 60, f"/metrics to count {query}'s failed rows", interval=1)


def test_joins_of_streams_and_of_tables_log_the_joined_rows_they_cannot_compute(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer],
        kafka_settings: KafkaSettings) -> None:
    name = _rows_source(spark_node, "RPS", table=True)
    ksql(spark_node, f"CREATE STREAM {name}_R (ID INT KEY, C INT) WITH (KAFKA_TOPIC='{name}_R', "
                     "PARTITIONS=1, VALUE_FORMAT='JSON');"
                     f"CREATE TABLE {name}_U (ID INT PRIMARY KEY, C INT) WITH ("
                     f"KAFKA_TOPIC='{name}_R', VALUE_FORMAT='JSON');"
                     f"CREATE TABLE {name}_V (ID INT PRIMARY KEY, C INT) WITH ("
                     f"KAFKA_TOPIC='{name}_V', PARTITIONS=1, VALUE_FORMAT='JSON');"
                     f"CREATE STREAM {name}_Q (ID INT KEY, C INT) WITH (KAFKA_TOPIC='{name}_Q', "
                     "PARTITIONS=1, VALUE_FORMAT='JSON');")
    producer = producer_factory()
    for key, divisor in [(1, 2), (2, 0), (3, 1), (4, 3)]:
        for topic in (f"{name}_R", f"{name}_V", f"{name}_Q"):
            producer.produce(topic, key=struct.pack(">i", key),
                             value=json.dumps({"C": divisor}).encode())
    _produce_rows(producer, name)
    # 2: CAST('x' AS INT) and A / C fail; 3: the WHERE's A % B fails and drops the row. The
    # third query joins the table V (keyed state) before the stream R, the fourth three streams,
    # the fifth V after the streams' joined records.
    earliest(spark_node, f"CREATE STREAM {name}_SJ AS SELECT L.ID, CAST(L.TXT AS INT) AS N, "
                         f"L.A / R.C AS Q FROM {name} L JOIN {name}_R R WITHIN 1 HOUR "
                         "ON L.ID = R.ID WHERE L.A % L.B = 0;"
                         f"CREATE STREAM {name}_SV AS SELECT L.ID, CAST(L.TXT AS INT) AS N, "
                         f"L.A / V.C AS Q FROM {name} L JOIN {name}_V V ON L.ID = V.ID "
                         f"JOIN {name}_R R WITHIN 1 HOUR ON L.ID = R.ID WHERE L.A % L.B = 0;"
                         f"CREATE STREAM {name}_S3 AS SELECT L.ID, CAST(L.TXT AS INT) AS N, "
                         f"L.A / Q.C AS Q FROM {name} L JOIN {name}_R R WITHIN 1 HOUR ON "
                         f"L.ID = R.ID JOIN {name}_Q Q WITHIN 1 HOUR ON L.ID = Q.ID "
                         "WHERE L.A % L.B = 0;"
                         f"CREATE STREAM {name}_SA AS SELECT L.ID, CAST(L.TXT AS INT) AS N, "
                         f"L.A / V.C AS Q FROM {name} L JOIN {name}_R R WITHIN 1 HOUR ON "
                         f"L.ID = R.ID JOIN {name}_V V ON L.ID = V.ID WHERE L.A % L.B = 0;"
                         f"CREATE TABLE {name}_TJ AS SELECT T.ID, CAST(T.TXT AS INT) AS N, "
                         f"T.A / U.C AS Q FROM {name}_T T JOIN {name}_U U ON T.ID = U.ID "
                         "WHERE T.A % T.B = 0;")
    expected = [{"N": 5, "Q": 2}, {"N": None, "Q": None}, {"N": 9, "Q": 2}]
    for joined in (f"{name}_SJ", f"{name}_SV", f"{name}_S3", f"{name}_SA"):
        assert sorted(_values(kafka_settings, joined, 3), key=str) == sorted(expected, key=str)
    assert sorted(_values(kafka_settings, f"{name}_TJ", 4), key=str) == sorted(expected, key=str)
    ids = {sink: query_id for query_id, q in queries(spark_node).items()
           for sink in q["sinks"] if sink.startswith(name)}
    for sink, left, right in ((f"{name}_SJ", "L", "R"), (f"{name}_TJ", "T", "U"),
                              (f"{name}_SV", "L", "V"), (f"{name}_S3", "L", "Q"),
                              (f"{name}_SA", "L", "V")):
        query_id = ids[sink]
        entries = eventually(partial(_entries, kafka_settings, spark_node, query_id, 3), 90,
                             f"{sink}'s three failed rows in the processing log", interval=1)
        assert sorted((e["logger"], e["message"]["recordProcessingError"]["errorMessage"],
                       e["message"]["recordProcessingError"]["cause"]) for e in entries) == [
            (f"processing.{query_id}.Project", f"Error computing expression ({left}_A / "
             f"{right}_C) for column Q with index 1", ["/ by zero"]),
            (f"processing.{query_id}.Project", "Error processing INTEGER",
             ['For input string: "x"']),
            (f"processing.{query_id}.WhereFilter",
             f"Error evaluating predicate (({left}_A % {left}_B) = 0)", ["/ by zero"])], sink


def _rows_source(server: ServerProcess, prefix: str, table: bool = False) -> str:
    """A new stream for :data:`ROWS` (ID INT KEY, TXT, A, B, one partition), named from
    ``prefix``; with ``table``, also the table ``<name>_T`` over its topic. Its name."""
    name = unique(prefix).upper().replace("-", "_")
    columns = f"TXT STRING, A INT, B INT) WITH (KAFKA_TOPIC='{name}', VALUE_FORMAT='JSON'"
    ksql(server, f"CREATE STREAM {name} (ID INT KEY, {columns}, PARTITIONS=1);" + (
        f"CREATE TABLE {name}_T (ID INT PRIMARY KEY, {columns});" if table else ""))
    return name


def _produce_rows(producer: Producer, topic: str) -> None:
    for key, text, a, b in ROWS:
        producer.produce(topic, key=struct.pack(">i", key),
                         value=json.dumps({"TXT": text, "A": a, "B": b}).encode())
    assert producer.flush(30) == 0


def _push_entries(settings: KafkaSettings, server: ServerProcess, source: str
                  ) -> list[dict[str, Any]] | None:
    """The RECORD_PROCESSING_ERROR entries of the push queries over ``source``."""
    entries = [json.loads(value) for value in
               values_to_end(settings, ProcessingLogSettings().topic(server.service_id))]
    return [e for e in entries if e["message"]["type"] == 1 and e["logger"].startswith(
        f"processing.transient_{source}_")] or None


def _push_logged(settings: KafkaSettings, server: ServerProcess, source: str,
                 expected: int) -> None:
    """Wait for the push queries over ``source`` to have logged ``expected`` entries."""
    def logged() -> list[dict[str, Any]] | None:
        found = _push_entries(settings, server, source)
        return found if found is not None and len(found) == expected else None

    eventually(logged, 90, f"the push query's {expected} failed rows in the processing log",
               interval=1)


def _entries(settings: KafkaSettings, server: ServerProcess, query_id: str,
             expected: int) -> list[dict[str, Any]] | None:
    entries = [json.loads(value) for value in
               values_to_end(settings, ProcessingLogSettings().topic(server.service_id))]
    mine = [e for e in entries if e["logger"].startswith(f"processing.{query_id}.")]
    assert len(mine) <= expected, f"logged more than once: {mine}"
    return mine if len(mine) == expected else None


def _processing_errors(server: ServerProcess, query_id: str) -> float | None:
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    found = re.search(r'^metastore_query_processing_errors_total\{query_id="'
                      + re.escape(query_id) + r'"\} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else None
