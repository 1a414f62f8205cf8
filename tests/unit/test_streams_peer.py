"""The benchmark's Kafka Streams peer runs the broker's Kafka version, and its ratios compare
the node with Kafka Streams at the same cores."""

from __future__ import annotations

import re
from importlib import resources

from integration.bench.streams_peer import ratios


def _kafka_version(package: str, pom: str) -> str:
    text = resources.files(package).joinpath("poms", pom).read_text(encoding="utf-8")
    found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", text)
    assert found is not None
    return found.group(1)


def test_the_peer_runs_the_brokers_kafka_version() -> None:
    assert _kafka_version("integration.bench", "kafka-streams.xml") == _kafka_version(
        "metastore.dev", "kafka.xml")


def test_ratios_are_the_node_over_kafka_streams_at_the_same_cores() -> None:
    def figures(rate: int, p99: float) -> dict[str, object]:
        return {q: {"records_per_s": rate, "latency": {"p99_ms": p99}}
                for q in ("filter", "count", "join")}

    found = ratios({"kafka_streams_1_core": figures(100, 10.0),
                    "metastore_1_core": figures(80, 25.0),
                    "kafka_streams_2_cores": figures(200, 10.0)})
    assert found["filter_1_core_throughput_ratio"] == 0.8
    assert found["join_1_core_p99_ratio"] == 2.5
    assert not any("2_cores" in name for name in found), "no node run at 2 cores: no ratio"
