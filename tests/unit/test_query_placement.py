"""``/clusterStatus``'s ``hostStoreLags`` of a host: a stateful query's store per source
partition, a table kept materialized for pull queries as ``<table>#materialized``, and
nothing for a query without state."""

from __future__ import annotations

from metastore.runtime.query_placement import active_standby, store_lags

COUNTING = {"state": "RUNNING", "statistics": {"stateRows": 3},
            "offsets": {"in": {"0": [0, 7, 9], "1": [2, 4, 4]}}}
PROJECTING = {"state": "RUNNING", "statistics": {"stateRows": None},
              "offsets": {"in": {"0": [0, 9, 9], "1": [0, "nine", 9]}}}


def test_stores_of_queries_and_materialized_tables_with_their_lags() -> None:
    lags = store_lags({"CTAS_C_1": COUNTING, "CSAS_P_2": PROJECTING},
                      {"USERS": {"0": [5, 8], "1": [3, 3]}, "BAD": {"0": [1], "1": ["x", 2]}},
                      1_000)
    assert lags["updateTimeMs"] == 1_000
    stores = lags["stateStoreLags"]
    assert sorted(stores) == ["BAD#materialized", "CTAS_C_1#state", "USERS#materialized"]
    assert stores["CTAS_C_1#state"]["lagByPartition"]["0"] == {
        "currentOffsetPosition": 7, "endOffsetPosition": 9, "offsetLag": 2}
    assert stores["USERS#materialized"] == {"size": 2, "lagByPartition": {
        "0": {"currentOffsetPosition": 5, "endOffsetPosition": 8, "offsetLag": 3},
        "1": {"currentOffsetPosition": 3, "endOffsetPosition": 3, "offsetLag": 0}}}
    assert stores["BAD#materialized"] == {"size": 0, "lagByPartition": {}}, "malformed: no lags"


def test_only_a_query_with_state_has_an_active_store() -> None:
    placed = active_standby({"CTAS_C_1": COUNTING, "CSAS_P_2": PROJECTING})
    assert placed["CTAS_C_1"]["activeStores"] == ["state"]
    assert placed["CSAS_P_2"]["activeStores"] == []
    assert placed["CSAS_P_2"]["activePartitions"] == [{"topic": "in", "partition": 0}]
