"""PNG plots of benchmark results: latency CDFs, throughput against clients, replay against size."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _cdf(axis: Any, samples: list[float], label: str) -> None:
    ordered = sorted(samples)
    if not ordered:
        return
    axis.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], label=label)


def write(results: dict[str, Any], directory: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    latency = results.get("latency")
    if latency:
        figure, axis = plt.subplots(figsize=(7, 4))
        _cdf(axis, latency["statement_over_rest"]["samples_ms"], "CREATE STREAM over REST")
        _cdf(axis, latency["floor"]["reused_producer"]["samples_ms"], "floor: reused producer")
        _cdf(axis, latency["floor"]["fresh_producer"]["samples_ms"], "floor: fresh producer")
        axis.set_xscale("log")
        axis.set_xlabel("latency (ms, log scale)")
        axis.set_ylabel("fraction of statements")
        axis.set_title("Statement latency against the Kafka transaction floor")
        axis.legend()
        axis.grid(True, alpha=0.3)
        written.append(_save(figure, directory / "latency-cdf.png"))
    contention = results.get("contention")
    if contention:
        figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        modes = (("reuse", "reused producer"), ("per_statement", "producer per statement (ksqlDB)"))
        for mode, label in modes:
            points = contention[mode]["non_conflicting"]
            left.plot([p["clients"] for p in points], [p["statements_per_s"] for p in points],
                      marker="o", label=label)
            _cdf(right, points[-1]["samples_ms"], f"{label}, {points[-1]['clients']} clients")
        left.set_xlabel("concurrent clients over 3 nodes")
        left.set_ylabel("statements / s")
        left.set_title("Throughput, non-conflicting statements")
        left.legend()
        left.grid(True, alpha=0.3)
        right.set_xscale("log")
        right.set_xlabel("latency (ms, log scale)")
        right.set_title("Latency at the most clients")
        right.legend()
        right.grid(True, alpha=0.3)
        written.append(_save(figure, directory / "contention.png"))
    replay = results.get("replay")
    if replay:
        figure, axis = plt.subplots(figsize=(7, 4))
        sizes = [r["records"] for r in replay["in_memory"]]
        axis.plot(sizes, [r["seconds"] for r in replay["in_memory"]], marker="o",
                  label="decode + apply, in memory")
        axis.plot(sizes, [r["seconds"] for r in replay["from_kafka"]], marker="o",
                  label="replica, from Kafka to caught up")
        axis.plot(sizes, [r["first_start"]["ready_s"] for r in replay["start_to_ready_s"]],
                  marker="o", label="process start to READY, full replay")
        axis.plot(sizes, [r["restart"]["ready_s"] for r in replay["start_to_ready_s"]],
                  marker="o", label="process start to READY, from its checkpoint")
        axis.plot(sizes, [r["new_node_from_snapshot"]["ready_s"]
                          for r in replay["start_to_ready_s"]],
                  marker="o", label="new node, from the snapshot topic")
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("commands in the log")
        axis.set_ylabel("seconds")
        axis.set_title("Replay time against log length")
        axis.legend()
        axis.grid(True, alpha=0.3)
        written.append(_save(figure, directory / "replay.png"))
    return written


def _save(figure: Any, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path
