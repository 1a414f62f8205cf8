"""Push queries as SHOW QUERIES lists them from the nodes' claims, and a query's rows as
ksqlDB's Protobuf answer carries them."""

from __future__ import annotations

import base64

from metastore.engine.responses import push_query_summaries
from metastore.formats.protobuf import values as protobuf_values
from metastore.runtime.status import Claim, push_queries
from metastore.server.http.protobuf_rows import ProtobufRows
from metastore.sql import types as ty


def test_each_push_query_is_listed_once_with_the_node_that_runs_it() -> None:
    here = Claim("a", "http://10.0.0.1:8088", {"transient_S_1": {"queryString": "SELECT 1"}})
    peer = Claim("b", "http://10.0.0.2:8088", {"transient_S_2": {"queryString": "SELECT 2"},
                                               "transient_S_1": {"queryString": "stale"},
                                               "broken": "not an object"})
    listed = push_queries([here, peer])
    assert list(listed) == ["transient_S_1", "transient_S_2"]
    assert listed["transient_S_1"]["ownerNode"] == "a"
    assert listed["transient_S_2"] == {
        "queryType": "PUSH", "queryString": "SELECT 2", "state": "RUNNING", "ownerNode": "b",
        "ownerHost": "10.0.0.2:8088", "ownerUrl": "http://10.0.0.2:8088"}


def test_show_queries_entries_of_push_queries_are_ksqldbs_running_query() -> None:
    statuses = {**push_queries([Claim("a", "http://h:1", {"transient_S_1": {
        "queryString": "SELECT * FROM S EMIT CHANGES;"}})]), "CSAS_T_0": {"state": "RUNNING"}}
    assert push_query_summaries(statuses) == [{
        "queryString": "SELECT * FROM S EMIT CHANGES;", "sinks": [], "sinkKafkaTopics": [],
        "id": "transient_S_1", "statusCount": {"RUNNING": 1}, "queryType": "PUSH",
        "state": "RUNNING", "ownerNode": "a"}]
    assert push_query_summaries(None) == []


def test_protobuf_rows_carry_each_row_as_a_message_of_the_header_schema() -> None:
    rows = ProtobufRows.of([("ID", ty.INTEGER), ("D", ty.DATE), ("T", ty.TIME),
                            ("TAGS", ty.ArrayType(ty.STRING))])
    header = rows.header("q1", "`ID` INTEGER KEY, `D` DATE, `T` TIME, `TAGS` ARRAY<STRING>")
    assert "message ConnectDefault1" in header["header"]["protoSchema"]
    encoded = rows.row([7, "1970-01-03", "00:00:01.500000", ["x"]])
    message = base64.b64decode(encoded["row"]["protobufBytes"])
    assert protobuf_values.decode(rows.schema, message) == {
        "ID": 7, "D": 2, "T": 1500, "TAGS": ["x"]}
