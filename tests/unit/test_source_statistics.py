"""DESCRIBE EXTENDED's traffic strings as ksqlDB's server prints them: each stat
``%16s:%10.0f`` (``%10.2f`` for a fraction) and a space, stats of one name summed, then the
first stat's time as Java's ISO_OFFSET_DATE_TIME prints it, after ksqlDB's notice; hosts as
``host:port``; offsets summaries that leave out what a heartbeat got wrong."""

from __future__ import annotations

from typing import Any

from metastore.engine import source_statistics as stats


def status(host: str, total: int, per_second: float, last_ms: int) -> dict[str, Any]:
    flow = {"total": total, "perSecond": per_second, "lastMs": last_ms}
    return {"ownerNode": "node-1", "ownerHost": host,
            "statistics": {"consumed": {"orders": flow}, "produced": flow}}


def test_two_readers_are_summed_in_ksqldbs_layout() -> None:
    readers = [status("10.0.0.1:8088", 10, 0.5, 1_538_842_403_035),
               status("10.0.0.2:8088", 5, 1.0, 1_538_842_400_000)]
    text = stats.statistics_text(stats.traffic("orders", readers, []))
    assert text == (stats.STATISTICS_NOTICE
                    + "consumer-messages-per-sec:      1.50 consumer-total-messages:        15 "
                    + "    last-message: 2018-10-06T16:13:23.035Z")
    assert [s.host for s in stats.traffic("orders", readers, [])][:1] == ["10.0.0.1:8088"]


def test_a_whole_second_and_a_writer() -> None:
    text = stats.statistics_text(stats.traffic("orders", [], [status("h:1", 3, 2.0, 1_000)]))
    assert text.endswith("messages-per-sec:         2   total-messages:         3 "
                         "    last-message: 1970-01-01T00:00:01Z")


def test_failures_and_no_traffic() -> None:
    failed = stats.failures("ORDERS", [{"ownerHost": "h:1", "skipped": {"ORDERS": 2}}])
    assert stats.error_stats_text(failed) == (stats.ERROR_STATS_NOTICE
                                              + "consumer-failed-messages:         2 "
                                              + "     last-failed:       n/a\n")
    assert stats.statistics_text([]) == "" and stats.error_stats_text([]) == ""
    timed = stats.failures("ORDERS", [{"ownerHost": "h:1", "skipped": {"ORDERS": 2},
                                       "skippedMs": {"ORDERS": 1_538_842_403_035}}])
    assert stats.error_stats_text(timed).endswith(
        "     last-failed: 2018-10-06T16:13:23.035Z\n"), "when the reader last skipped one"


def test_offsets_summaries_leave_out_what_is_malformed() -> None:
    writers = {"CSAS_A_1": {"offsets": {"orders": {"1": [0, 4, 5], "0": [0, 3, 3],
                                                   "x": [1, 2, 3], "2": ["a", 1, 2]}}},
               "CSAS_B_2": {"offsets": "nonsense"}}
    assert stats.offset_summaries(writers) == [{"groupId": "CSAS_A_1", "topicSummaries": [
        {"kafkaTopic": "orders", "offsets": [
            {"partition": 0, "logStartOffset": 0, "logEndOffset": 3, "consumerOffset": 3},
            {"partition": 1, "logStartOffset": 0, "logEndOffset": 5, "consumerOffset": 4}]}]}]
