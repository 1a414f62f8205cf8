"""`metastore test` feeds a test's records in arrivals whose time order is their piped order."""

from __future__ import annotations

from metastore.testing.arrivals import arrivals, event_time, reads_changelog
from metastore.testing.cases import CaseRecord
from metastore.testing.check import run_script


def record(topic: str, timestamp: int | None) -> CaseRecord:
    return CaseRecord(topic, None, {}, timestamp)


def times(runs: list[list[CaseRecord]]) -> list[list[tuple[str, int | None]]]:
    return [[(r.topic, r.timestamp) for r in run] for run in runs]


def test_records_in_time_order_are_one_arrival() -> None:
    records = [record("l", 0), record("r", 5), record("l", 5), record("l", 9), record("r", 10)]
    assert times(arrivals(records)) == [[("l", 0), ("r", 5)], [("l", 5), ("l", 9), ("r", 10)]]
    in_order = [record("l", 0), record("l", 0), record("r", 1), record("l", 2)]
    assert len(arrivals(in_order)) == 1  # the same time on one topic is offset order


def test_a_late_record_starts_an_arrival() -> None:
    records = [record("l", 0), record("r", 330), record("l", 90), record("r", 90),
               record("l", 60)]
    assert times(arrivals(records)) == [[("l", 0), ("r", 330)], [("l", 90)], [("r", 90)],
                                        [("l", 60)]]


def test_a_record_without_a_time_is_at_zero() -> None:
    assert times(arrivals([record("s1", None), record("s2", None)])) == [
        [("s1", None)], [("s2", None)]]
    assert arrivals([]) == []


def test_times_are_the_event_times_of_a_timestamp_column() -> None:
    _, image = run_script("CREATE STREAM S (ID BIGINT KEY, TS BIGINT) WITH (KAFKA_TOPIC='s', "
                          "VALUE_FORMAT='JSON', TIMESTAMP='TS');", runtime_check=False)
    time = event_time(image.sources["S"])
    records = [CaseRecord("t", 0, {"RTS": 13000}, 90000),
               CaseRecord("s", 10, {"ts": 11000}, 800000)]
    assert time(records[1]) == 11000
    assert time(CaseRecord("s", 10, None, 5)) == 5  # a tombstone has no column
    assert len(arrivals(records, lambda r: time(r) if r.topic == "s" else 13000)) == 2
    assert event_time(None)(records[0]) == 90000


def test_records_go_singly_where_a_query_reads_a_tables_changes() -> None:
    records = [record("s", 0), record("s", 5), record("s", 9)]
    assert times(arrivals(records, singly=True)) == [[("s", 0)], [("s", 5)], [("s", 9)]]
    clicks = ("CREATE STREAM C (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='c', "
              "VALUE_FORMAT='JSON');")
    counts = "CREATE TABLE N WITH (KAFKA_TOPIC='n') AS SELECT ID, COUNT(*) AS K FROM C GROUP BY ID;"
    over_counts = [  # a stream declared over the table's topic, and a query of that stream
        "CREATE STREAM NS (ID STRING KEY, K BIGINT) WITH (KAFKA_TOPIC='n', VALUE_FORMAT='JSON');",
        "CREATE STREAM BIG AS SELECT * FROM NS WHERE K > 1;"]
    pipeline = ["CREATE STREAM P AS SELECT * FROM C;", "CREATE STREAM Q AS SELECT * FROM P;"]
    for script, singly in [([clicks, counts, *over_counts], True), ([clicks, counts], False),
                           ([clicks, *pipeline], False), ([clicks, *over_counts[:1]], False)]:
        results, image = run_script("".join(script))
        assert all(r.ok for r in results), results
        assert reads_changelog(image) is singly, script
