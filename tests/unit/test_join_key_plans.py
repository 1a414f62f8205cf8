"""The key of an outer join's record is the join key whichever side has it, for a key column
named in the SELECT and for the one SELECT * selects alike."""

from __future__ import annotations

import pytest

from metastore.planner.plan import compile_query
from metastore.testing.check import run_script

STREAMS = ("CREATE STREAM L (ID BIGINT KEY, A STRING) WITH (kafka_topic='l', value_format='JSON');"
           "CREATE STREAM R (ID BIGINT KEY, B STRING) WITH (kafka_topic='r', value_format='JSON');")


@pytest.mark.parametrize("projection", ["*", "l.id AS L_ID, A, B"])
def test_a_right_join_keys_a_record_without_a_left_side_by_the_right_key(projection: str) -> None:
    results, image = run_script(STREAMS + f"CREATE STREAM O AS SELECT {projection} FROM L l "
                                          "RIGHT JOIN R r WITHIN 1 SECOND ON l.id = r.id;")
    assert all(r.ok for r in results), results
    plan = compile_query(next(iter(image.queries.values())), image)
    # a stream-stream join's records are written in time order by a stage of their own
    assert "COALESCE(`L`.`ID`, `R`.`ID`) AS `L_ID`" in f"{plan.sql} {plan.batch}"
