"""PNG plots of benchmark results: latency CDFs, throughput against clients, replay against size."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _cdf(axis: Any, samples: list[float], label: str) -> None:
    ordered = sorted(samples)
    if not ordered:
        return
    axis.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], label=label)


def _label(axis: Any, xlabel: str, ylabel: str | None = None, title: str | None = None,
           log_y: bool = False) -> None:
    """Log-scale x, labels, legend and a light grid: the look every plot here shares."""
    axis.set_xscale("log")
    if log_y:
        axis.set_yscale("log")
    axis.set_xlabel(xlabel)
    if ylabel:
        axis.set_ylabel(ylabel)
    if title:
        axis.set_title(title)
    axis.legend()
    axis.grid(True, alpha=0.3)


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
        _label(axis, "latency (ms, log scale)", "fraction of statements",
               "Statement latency against the Kafka transaction floor")
        written.append(_save(figure, directory / "latency-cdf.png"))
    contention = results.get("contention")
    if contention:
        figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        modes = (("reuse", "forwarded to the writer, group commit"),
                 ("reuse_local", "each node writes, group commit"),
                 ("per_statement", "producer per statement (ksqlDB)"))
        for mode, label in modes:
            if mode not in contention:
                continue
            points = contention[mode]["non_conflicting"]
            left.plot([p["clients"] for p in points], [p["statements_per_s"] for p in points],
                      marker="o", label=label)
            _cdf(right, points[-1]["samples_ms"], f"{label}, {points[-1]['clients']} clients")
        left.set_xlabel("concurrent clients over 3 nodes")
        left.set_ylabel("statements / s")
        left.set_title("Throughput, non-conflicting statements")
        left.legend()
        left.grid(True, alpha=0.3)
        _label(right, "latency (ms, log scale)", title="Latency at the most clients")
        written.append(_save(figure, directory / "contention.png"))
    replay = results.get("replay")
    if replay:
        figure, axis = plt.subplots(figsize=(7, 4))
        sizes = [r["records"] for r in replay["in_memory"]]
        axis.plot(sizes, [r["seconds"] for r in replay["in_memory"]], marker="o",
                  label="decode + apply, in memory")
        axis.plot(sizes, [r["seconds"] for r in replay["from_kafka"]], marker="o",
                  label="replica, from Kafka to caught up")
        for start, label in (("first_start", "process start to READY, full replay"),
                             ("restart", "process start to READY, from its checkpoint"),
                             ("new_node_from_snapshot", "new node, from the snapshot topic")):
            axis.plot(sizes, [r[start]["ready_s"] for r in replay["start_to_ready_s"]],
                      marker="o", label=label)
        _label(axis, "commands in the log", "seconds", "Replay time against log length",
               log_y=True)
        written.append(_save(figure, directory / "replay.png"))
    peer = results.get("streams-peer")
    if peer:
        written.append(_streams_peer(plt, peer, directory / "streams-peer.png"))
    return written


def _streams_peer(plt: Any, peer: dict[str, Any], path: Path) -> Path:
    """Records/s per core and p99 latency, per query and cores, Kafka Streams beside the node."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    runs = [(engine, cores) for cores in (1, 2) for engine in ("kafka_streams", "metastore")
            if f"{engine}_{cores}_core{'s' if cores > 1 else ''}" in peer]
    queries = ("filter", "count", "join")
    width = 0.8 / max(len(runs), 1)
    for index, (engine, cores) in enumerate(runs):
        figures = peer[f"{engine}_{cores}_core{'s' if cores > 1 else ''}"]
        label = f"{'Kafka Streams' if engine == 'kafka_streams' else 'metastore'}, {cores} core" \
                f"{'s' if cores > 1 else ''}"
        places = [q + index * width for q in range(len(queries))]
        left.bar(places, [figures[q]["records_per_s_per_core"] for q in queries], width,
                 label=label)
        right.bar(places, [figures[q]["latency"]["p99_ms"] for q in queries], width, label=label)
    for axis, title in ((left, "records/s per core"), (right, "end-to-end p99 latency (ms)")):
        axis.set_xticks([q + 0.4 - width / 2 for q in range(len(queries))], queries)
        axis.set_title(title)
        axis.grid(True, axis="y", alpha=0.3)
    left.legend()
    return _save(figure, path)


def _save(figure: Any, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path
