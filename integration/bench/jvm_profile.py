"""Where a JVM's time goes while a benchmark runs: a Java Flight Recorder recording of one
process (``jcmd <pid> JFR.start``) of its CPU samples alone (:data:`SETTINGS`), summed up as
the share of the samples in each part of a record's path; and from Linux's accounts of its
threads, the CPU seconds of the whole process, of its JIT compilers and of its garbage
collector. Each recording's samples are also kept as folded stacks (``<recording>.folded``,
one line per sample, outermost frame first), which flame-graph tools draw once counted.

A sample falls in the first part of :data:`PARTS` that one of its frames belongs to. The parts
are ordered so that a frame's callers do not steal it: a Spark task pulls each row through its
decoding, so a sample below a JSON parse is the parse's, whatever runs it. Frames that pull
rows (Spark's ``KafkaDataWriter.writeAll``, a source node's ``process``) name no part.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from integration.bench.common import stat_cpu_seconds
from metastore.dev import jars

PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("json_decode", ("JacksonParser", "JsonToStructs", "CreateJacksonParser", "JsonParser",
                     "JsonFactory.createParser", "ObjectMapper.read", "io.metastore.json",
                     "VariantBuilder")),
    ("json_encode", ("JacksonGenerator", "StructsToJson", "JsonGenerator",
                     "JsonFactory.createGenerator", "ObjectMapper.write")),
    ("kafka_read", ("org.apache.kafka.clients.consumer", "kafka010.consumer",
                    "KafkaBatchPartitionReader", "KafkaRecordToRowConverter",
                    "SourceNode.deserialize", "RecordDeserializer", "RecordQueue")),
    ("kafka_write", ("org.apache.kafka.clients.producer", "KafkaRowWriter",
                     "RecordCollectorImpl", "io.metastore.kafka")),
    ("state", ("rocksdb", "org.apache.spark.sql.execution.streaming.state",
               "org.apache.kafka.streams.state", "io.metastore.state", "io.metastore.window",
               "io.metastore.join", "io.metastore.aggregate")),
    ("planning_and_scheduling", ("org.apache.spark.sql.execution.streaming.runtime",
                                 "MicroBatchExecution", "QueryExecution", "catalyst.rules",
                                 "catalyst.optimizer", "catalyst.analysis", "DAGScheduler",
                                 "TaskSchedulerImpl", "TaskSetManager")),
    ("rows_and_expressions", ("GeneratedClass", "org.apache.spark.sql.catalyst",
                              "org.apache.spark.unsafe", "org.apache.spark.sql.execution")),
    ("engine", ("org.apache.spark", "org.apache.kafka.streams", "org.apache.kafka", "scala.")),
)
"""Each part of the path and the frames (class or method name fragments) that belong to it."""

SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="CPU samples only">
  <event name="jdk.ExecutionSample">
    <setting name="enabled">true</setting>
    <setting name="period">10 ms</setting>
  </event>
</configuration>
"""
"""The recording's settings: CPU samples of threads running Java code, every 10 ms, and no
other event. A sample is 10 ms of a thread's time: ``cpu_samples`` hundredths of a second
against ``all_cpu_s`` says how much of the CPU was not in Java code (the JIT compilers, the
collector, native code) and so in no part."""

STACK_DEPTH = 512
"""Frames kept of each sample's stack (JFR's default, 64, cuts a Spark task's in the middle,
where its part is no longer known)."""

COLLAPSER = Path(__file__).parent / "java" / "CollapsedStacks.java"

THREAD_KINDS = (("jit", ("C1 CompilerThre", "C2 CompilerThre")),
                ("gc", ("GC Thread", "G1 ", "VM Thread")))
"""The JVM's own threads by the names Linux knows them by (``/proc/<pid>/task/*/comm``, cut to
15 characters). A JVM pinned to one core runs the serial collector, whose collections run on
the VM thread, counted here with the VM thread's other stops."""


def part_of(frames: list[str]) -> str:
    """The part of :data:`PARTS` a sample's frames belong to."""
    for part, markers in PARTS:
        if any(marker in frame for frame in frames for marker in markers):
            return part
    return "other"


def kind_of(thread_name: str) -> str | None:
    """Which of :data:`THREAD_KINDS` the thread of that name is, if any."""
    for kind, prefixes in THREAD_KINDS:
        if thread_name.startswith(prefixes):
            return kind
    return None


def prime(pid: int, folder: Path) -> None:
    """Set the JVM ``pid``'s stack depth and start and stop a recording, before it is warmed
    up. JFR's first start in a JVM rewrites the JDK's file and socket classes to time their
    reads and writes, which sends the compiled code that inlined them (a node's Kafka clients
    among it) back to the JIT compilers: a node's filter over a million records then took 21.5 s
    instead of 8.6."""
    _jcmd(pid, "JFR.configure", f"stackdepth={STACK_DEPTH}")
    with recording(pid, folder / f"{pid}-prime.jfr"):
        pass


@contextmanager
def recording(pid: int, path: Path) -> Iterator[Path]:
    """A JFR recording of the JVM ``pid`` for the duration of the block, written to ``path``."""
    name = f"bench-{path.stem}"
    settings = path.with_suffix(".jfc")
    settings.write_text(SETTINGS)
    _jcmd(pid, "JFR.start", f"name={name}", f"settings={settings}", f"filename={path}")
    try:
        yield path
    finally:
        _jcmd(pid, "JFR.stop", f"name={name}")


def _jcmd(pid: int, *command: str) -> None:
    jcmd = jars.require_tool("jcmd", "Install a JDK 17+ (Debian: apt-get install "
                                     "openjdk-17-jdk-headless).")
    done = subprocess.run([jcmd, str(pid), *command], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0 or "error" in done.stdout.lower():
        raise RuntimeError(f"jcmd {pid} {' '.join(command)}: {done.stdout}{done.stderr}")


def folded(path: Path) -> Path:
    """The recording's samples as folded stacks, written beside it (:data:`COLLAPSER`)."""
    lines = subprocess.run([jars.require_java(), str(COLLAPSER), str(path)], check=True,
                           capture_output=True, text=True).stdout.splitlines()
    counted = Counter(lines)
    target = path.with_suffix(".folded")
    target.write_text("".join(f"{stack} {count}\n" for stack, count in counted.most_common()))
    return target


def shares(path: Path) -> dict[str, Any]:
    """The recording at ``path``: its CPU samples and their share per part."""
    parts: Counter[str] = Counter()
    for line in folded(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        parts[part_of(stack.split(";"))] += int(count)
    total = max(sum(parts.values()), 1)
    return {"cpu_samples": sum(parts.values()),
            "shares": {part: round(parts[part] / total, 3)
                       for part in [*(name for name, _ in PARTS), "other"] if parts[part]}}


def cpu_seconds(pid: int) -> dict[str, float]:
    """The CPU seconds so far of the process ``pid`` (its threads that ended too) and of its
    live threads of each of :data:`THREAD_KINDS`."""
    found = dict.fromkeys((kind for kind, _ in THREAD_KINDS), 0.0)
    found["all"] = stat_cpu_seconds(Path("/proc") / str(pid) / "stat")
    for task in (Path("/proc") / str(pid) / "task").iterdir():
        try:
            kind = kind_of((task / "comm").read_text())
            if kind is not None:
                found[kind] += stat_cpu_seconds(task / "stat")
        except OSError:  # the thread ended
            continue
    return found


def cpu_between(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The CPU seconds of each kind between two :func:`cpu_seconds`. A compiler thread that
    ends between them (HotSpot starts and stops them with the load, on more than one core)
    takes its seconds out of ``jit``."""
    return {f"{kind}_cpu_s": round(after[kind] - before[kind], 2) for kind in after}
