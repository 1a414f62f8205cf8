"""What DESCRIBE EXTENDED reports of a source's traffic, as ksqlDB prints it.

From the runtime statuses of the queries that read and write the source (each carries its
owner's figures: records read per source topic, records written, skipped records, offsets):

- ``statistics``: the source topic's records read by the queries reading it
  (``consumer-messages-per-sec``, ``consumer-total-messages``) and written by the queries
  writing it when their sink counts them (``messages-per-sec``, ``total-messages``), then
  ``last-message``, each stat as ksqlDB formats it (``%16s:%10.0f``, or ``%10.2f`` for a
  fraction), after the notice ksqlDB's server puts before it;
- ``errorStats``: its records the reading queries could not deserialize
  (``consumer-failed-messages``), then ``last-failed``, when the first reader listed last
  skipped one (its micro-batch's start);
- ``clusterStatistics`` and ``clusterErrorStats``: the same per stat and owner
  (``{name, host, value, timestamp}``, the host as ksqlDB's clients read it: ``host:port``);
- ``queryOffsetSummaries``: where each query writing the source is in its own sources, per
  partition (log start, the query's offset, log end). A query keeps its offsets in its Spark
  checkpoint, not in a consumer group: the summary's ``groupId`` is the query's id.

Figures are those the queries' owners last reported (every 2 s); a source nobody reads or
writes has none, and its strings are empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

Status = Mapping[str, Any]

STATISTICS_NOTICE = ("The statistics field is deprecated and will be removed in a future "
                     "version of ksql. Please update your client to the latest version and use "
                     "statisticsMap instead.\n")
ERROR_STATS_NOTICE = ("The errorStats field is deprecated and will be removed in a future "
                      "version of ksql. Please update your client to the latest version and use "
                      "errorStatsMap instead.\n")


@dataclass(frozen=True)
class Stat:
    """One figure of a topic on one node."""

    name: str
    host: str
    value: float
    timestamp: int  # epoch ms of the last record it counts; 0: none

    def formatted(self) -> str:
        pattern = "{:>16}:{:10.0f}" if self.value == round(self.value) else "{:>16}:{:10.2f}"
        return pattern.format(self.name, self.value)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "host": self.host, "value": self.value,
                "timestamp": self.timestamp}


def traffic(topic: str, readers: Sequence[Status], writers: Sequence[Status]) -> list[Stat]:
    """The records of ``topic`` its readers read and its writers wrote, per owner node."""
    stats: list[Stat] = []
    for status in readers:
        flow = _consumed(status, topic)
        if flow is not None:
            host = _host(status)
            stats += [Stat("consumer-messages-per-sec", host, _number(flow, "perSecond"),
                           _last(flow)),
                      Stat("consumer-total-messages", host, _number(flow, "total"), _last(flow))]
    for status in writers:
        flow = _produced(status)
        if flow is not None:
            host = _host(status)
            stats += [Stat("messages-per-sec", host, _number(flow, "perSecond"), _last(flow)),
                      Stat("total-messages", host, _number(flow, "total"), _last(flow))]
    return stats


def failures(source: str, readers: Sequence[Status]) -> list[Stat]:
    """The records of ``source`` its readers skipped because they cannot deserialize them."""
    stats = []
    for status in readers:
        skipped, last = status.get("skipped"), status.get("skippedMs")
        count = skipped.get(source, 0) if isinstance(skipped, Mapping) else 0
        at = last.get(source) if isinstance(last, Mapping) else None
        if count:
            stats.append(Stat("consumer-failed-messages", _host(status), float(count),
                              at if isinstance(at, int) else 0))
    return stats


def statistics_text(stats: Sequence[Stat]) -> str:
    """ksqlDB's ``statistics`` string: its notice, then the stats summed by name."""
    text = _formatted(stats, "last-message")
    return STATISTICS_NOTICE + text if text else ""


def error_stats_text(stats: Sequence[Stat]) -> str:
    """ksqlDB's ``errorStats`` string."""
    text = _formatted(stats, "last-failed")
    return ERROR_STATS_NOTICE + text + "\n" if text else ""


def offset_summaries(writers: Mapping[str, Status]) -> list[dict[str, Any]]:
    """ksqlDB's ``queryOffsetSummaries``: per writing query (by id), its sources' partitions."""
    summaries = []
    for query_id, status in sorted(writers.items()):
        topics = _offsets(status.get("offsets"))
        if topics:
            summaries.append({"groupId": query_id, "topicSummaries": [
                {"kafkaTopic": topic, "offsets": partitions}
                for topic, partitions in sorted(topics.items())]})
    return summaries


def _offsets(reported: Any) -> dict[str, list[dict[str, int]]]:
    """A status' offsets (topic, partition: [log start, consumer, log end]) as ksqlDB's
    ``ConsumerPartitionOffsets``; what is malformed is left out."""
    topics: dict[str, list[dict[str, int]]] = {}
    if not isinstance(reported, Mapping):
        return topics
    for topic, partitions in reported.items():
        if not isinstance(partitions, Mapping):
            continue
        rows = [{"partition": int(partition), "logStartOffset": int(marks[0]),
                 "logEndOffset": int(marks[2]), "consumerOffset": int(marks[1])}
                for partition, marks in partitions.items()
                if str(partition).isdigit() and isinstance(marks, list) and len(marks) == 3
                and all(isinstance(mark, int) for mark in marks)]
        if rows:
            topics[str(topic)] = sorted(rows, key=lambda row: row["partition"])
    return topics


def _formatted(stats: Sequence[Stat], last_label: str) -> str:
    """The stats summed by name (in their first order), then the first one's time."""
    summed: dict[str, Stat] = {}
    for stat in stats:
        first = summed.get(stat.name)
        summed[stat.name] = stat if first is None else Stat(
            first.name, first.host, first.value + stat.value, first.timestamp)
    if not summed:
        return ""
    text = "".join(stat.formatted() + " " for stat in summed.values())
    return text + f"{last_label:>16}: " + f"{_instant(next(iter(summed.values())).timestamp):>9}"


def _instant(epoch_ms: int) -> str:
    """As Java's ``ISO_OFFSET_DATE_TIME`` prints an instant in UTC: the fraction of a second
    without its trailing zeros, none when whole."""
    if epoch_ms == 0:
        return "n/a"
    moment = datetime.fromtimestamp(epoch_ms // 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{epoch_ms % 1000:03d}".rstrip("0")
    return moment + (f".{fraction}" if fraction else "") + "Z"


def _host(status: Status) -> str:
    """The owner as ksqlDB names a host: ``host:port``."""
    return str(status.get("ownerHost") or status.get("ownerNode") or "")


def _consumed(status: Status, topic: str) -> Mapping[str, Any] | None:
    statistics = status.get("statistics")
    consumed = statistics.get("consumed") if isinstance(statistics, Mapping) else None
    flow = consumed.get(topic) if isinstance(consumed, Mapping) else None
    return flow if isinstance(flow, Mapping) else None


def _produced(status: Status) -> Mapping[str, Any] | None:
    statistics = status.get("statistics")
    flow = statistics.get("produced") if isinstance(statistics, Mapping) else None
    return flow if isinstance(flow, Mapping) else None


def _number(flow: Mapping[str, Any], name: str) -> float:
    value = flow.get(name)
    return float(value) if isinstance(value, int | float) else 0.0


def _last(flow: Mapping[str, Any]) -> int:
    value = flow.get("lastMs")
    return int(value) if isinstance(value, int | float) else 0


__all__ = ["Stat", "error_stats_text", "failures", "offset_summaries", "statistics_text",
           "traffic"]
