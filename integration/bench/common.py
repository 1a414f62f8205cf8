"""Shared pieces of the benchmarks: percentiles, a Kafka to run against, records to replay."""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from metastore.catalog.commands import CreateSourceCommand, DropSourceCommand
from metastore.catalog.model import Column, DataSource
from metastore.local.kafka_cluster import LocalKafkaCluster
from metastore.log.record import CommandRecord
from metastore.sql import types as ty
from metastore.sql.statements import ColumnRole, SourceKind


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(samples: list[float]) -> dict[str, float]:
    millis = [s * 1000 for s in samples]
    return {"n": len(millis), "p50_ms": round(percentile(millis, 50), 2),
            "p90_ms": round(percentile(millis, 90), 2), "p99_ms": round(percentile(millis, 99), 2),
            "mean_ms": round(statistics.fmean(millis), 2)}


@contextlib.contextmanager
def kafka(brokers: int = 1) -> Iterator[str]:
    """KAFKA_BOOTSTRAP_SERVERS, or a fresh local cluster for the duration of the benchmark."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        yield external
        return
    with tempfile.TemporaryDirectory(prefix="metastore-bench-") as root:
        cluster = LocalKafkaCluster(Path(root), brokers=brokers)
        state = cluster.start(progress=None)
        try:
            yield state.bootstrap_servers
        finally:
            cluster.stop()


def source(index: int, topic: str = "bench") -> DataSource:
    return DataSource(
        name=f"S{index}", kind=SourceKind.STREAM if index % 2 else SourceKind.TABLE,
        columns=(Column("ID", ty.INTEGER, ColumnRole.KEY if index % 2 else ColumnRole.PRIMARY_KEY),
                 Column("NAME", ty.STRING), Column("N", ty.BIGINT)),
        topic=topic, key_format="KAFKA", value_format="JSON", partitions=1,
        statement=f"CREATE ... S{index}")


def records(count: int) -> list[CommandRecord]:
    """A log of ``count`` commands: mostly creates, every tenth a drop of an earlier source."""
    out = []
    for index in range(count):
        if index % 10 == 9:
            command: CreateSourceCommand | DropSourceCommand = DropSourceCommand(
                SourceKind.TABLE if (index - 1) % 2 == 0 else SourceKind.STREAM, f"S{index - 1}")
        else:
            command = CreateSourceCommand(source(index))
        out.append(CommandRecord(command, "statement", f"req-{index}", "bench"))
    return out


def wait_healthy(process: subprocess.Popen[bytes], url: str, timeout: float = 300) -> None:
    """Until the node at ``url`` answers /healthcheck with 200 (it is READY)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the node at {url} exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/healthcheck", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.02)
    raise RuntimeError(f"the node at {url} was not READY within {timeout:.0f}s")
