"""Shared pieces of the benchmarks: percentiles, a Kafka to run against, records to replay."""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Producer

from metastore.catalog.commands import CreateSourceCommand, DropSourceCommand
from metastore.catalog.model import Column, DataSource
from metastore.dev.kafka_cluster import LocalKafkaCluster, free_ports
from metastore.dev.node_cluster import LocalNodeCluster, NodeClusterState
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from metastore.log.record import CommandRecord
from metastore.log.topic import CommandTopicSpec, ensure_command_topic
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
        statement=(f"CREATE {'STREAM' if index % 2 else 'TABLE'} S{index} (ID INT "
                   f"{'KEY' if index % 2 else 'PRIMARY KEY'}, NAME STRING, N BIGINT) WITH "
                   f"(KAFKA_TOPIC='{topic}', KEY_FORMAT='KAFKA', VALUE_FORMAT='JSON', "
                   "PARTITIONS=1);"))


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



@contextlib.contextmanager
def node_processes(bootstrap: str, count: int, *args: str) -> Iterator[NodeClusterState]:
    """``count`` `metastore server` processes of a fresh service, READY, stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="metastore-bench-nodes-") as root:
        nodes = LocalNodeCluster(Path(root))
        service_id = f"bench-{uuid.uuid4().hex[:8]}"
        try:
            yield nodes.up(count, service_id, bootstrap, args, ports=free_ports(count))
        finally:
            nodes.down()


def fill(bootstrap: str, topic: str, count: int) -> None:
    """The :func:`records` log of ``count`` commands, written straight to ``topic``."""
    ensure_command_topic(Admin(KafkaSettings(bootstrap)), CommandTopicSpec(topic), 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.num.messages": 10000, "compression.type": "lz4"})
    for record in records(count):
        key, value = record.encode()
        while True:
            try:
                producer.produce(topic, key=key, value=value)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0, "not every record was acknowledged"


def rss_mib(pid: int | None) -> int:
    """A process's resident memory in MiB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def stat_fields(path: Path) -> list[str]:
    """The fields of a ``/proc/<pid>/stat`` (or a thread's) after the command's name, from the
    state on: the parent's pid is the second, user and system CPU ticks the 12th and 13th."""
    return path.read_text().rsplit(")", 1)[1].split()


def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found.setdefault(int(stat_fields(entry / "stat")[1]), []).append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _java_command(pid: int) -> bytes | None:
    """The command line of ``pid`` when it is a ``java`` process (arguments space-separated)."""
    try:
        command = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return b" ".join(command) if b"java" in command[0] else None


def jvm_of(pid: int) -> int | None:
    """The java process among ``pid``'s children (the node's Spark driver)."""
    return next((child for child in _children().get(pid, [])
                 if _java_command(child) is not None), None)


def jvms_below(root: int, marker: str) -> list[int]:
    """The ``java`` processes descended from ``root`` whose command line holds ``marker``."""
    children = _children()
    found: list[int] = []
    pending = list(children.get(root, []))
    while pending:
        pid = pending.pop()
        pending += children.get(pid, [])
        command = _java_command(pid)
        if command is not None and marker.encode() in command:
            found.append(pid)
    return sorted(found)


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has taken, user and system (0 once it is gone)."""
    try:
        return stat_cpu_seconds(Path(f"/proc/{pid}/stat"))
    except OSError:
        return 0.0


def stat_cpu_seconds(path: Path) -> float:
    """The user and system CPU seconds a ``/proc/.../stat`` file counts."""
    fields = stat_fields(path)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
