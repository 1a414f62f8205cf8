"""Where a JVM's time goes while a benchmark runs: a Java Flight Recorder recording of one
process (``jcmd <pid> JFR.start``) of its CPU samples and nothing else (:data:`SETTINGS`), summed up
as the share of its CPU samples in each part of a record's path; and from Linux's accounts of
its threads, the CPU seconds of the whole process, of its JIT compilers and of its garbage
collector.

A sample falls in the first part of :data:`PARTS` that one of its frames belongs to. The parts
are ordered so that a frame's callers do not steal it: a Spark sink pulls each row through its
decoding, so a sample below a JSON parse is the parse's, whatever runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from metastore.dev import jars

PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("json_decode", ("JacksonParser", "JsonToStructs", "CreateJacksonParser", "JsonParser",
                     "JsonFactory.createParser", "ObjectMapper.read", "io.metastore.json",
                     "VariantBuilder", "NumberConverter")),
    ("json_encode", ("JacksonGenerator", "StructsToJson", "JsonGenerator",
                     "JsonFactory.createGenerator", "ObjectMapper.write")),
    ("kafka_read", ("org.apache.kafka.clients.consumer", "kafka010.consumer",
                    "KafkaSourceRDD", "org.apache.kafka.streams.processor.internals.SourceNode",
                    "RecordQueue")),
    ("kafka_write", ("org.apache.kafka.clients.producer", "KafkaRowWriter", "KafkaDataWriter",
                     "RecordCollectorImpl", "io.metastore.kafka")),
    ("state", ("rocksdb", "org.apache.spark.sql.execution.streaming.state",
               "org.apache.kafka.streams.state", "io.metastore.state", "io.metastore.window",
               "io.metastore.join", "io.metastore.aggregate")),
    ("rows_and_expressions", ("GeneratedClass", "org.apache.spark.sql.catalyst",
                              "org.apache.spark.unsafe", "org.apache.spark.sql.execution")),
    ("engine", ("org.apache.spark", "org.apache.kafka.streams", "org.apache.kafka", "scala.")),
)
"""Each part of the path and the frames (class or method name fragments) that belong to it."""


def part_of(frames: list[str]) -> str:
    """The part of :data:`PARTS` a sample's frames (innermost first) belong to."""
    for part, markers in PARTS:
        if any(marker in frame for frame in frames for marker in markers):
            return part
    return "other"


SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="CPU samples only">
  <event name="jdk.ExecutionSample">
    <setting name="enabled">true</setting>
    <setting name="period">10 ms</setting>
  </event>
</configuration>
"""
"""The recording's settings: CPU samples of Java code every 10 ms, the least a recording can
cost."""


STACK_DEPTH = 512


def prime(pid: int, folder: Path) -> None:
    """Start and stop a recording in the JVM ``pid``, before it is warmed up. JFR's first start
    in a JVM rewrites the JDK's file and socket classes to time their reads and writes, which
    sends the compiled code that inlined them (a node's Kafka clients among it) back to the JIT
    compilers: a node's filter over a million records then took 21.5 s instead of 8.6. Its
    stacks are kept 512 frames deep (JFR's default, 64, cuts a Spark task's stack in the
    middle, where its part is no longer known)."""
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
    jcmd = str(Path(jars.require_java()).with_name("jcmd"))
    subprocess.run([jcmd, str(pid), *command], check=True, capture_output=True)


def _events(path: Path, *names: str) -> list[dict[str, Any]]:
    jfr = str(Path(jars.require_java()).with_name("jfr"))
    printed = subprocess.run([jfr, "print", "--json", "--events", ",".join(names), str(path)],
                             check=True, capture_output=True, text=True).stdout
    return list(json.loads(printed)["recording"]["events"])


def _frames(event: dict[str, Any]) -> list[str]:
    trace = event["values"].get("stackTrace") or {"frames": []}
    return [f"{frame['method']['type']['name'].replace('/', '.')}.{frame['method']['name']}"
            for frame in trace["frames"]]


def shares(path: Path) -> dict[str, Any]:
    """The recording at ``path``: its CPU samples of Java code and their share per part."""
    parts = Counter(part_of(_frames(sample))
                    for sample in _events(path, "jdk.ExecutionSample"))
    total = max(sum(parts.values()), 1)
    return {"cpu_samples": sum(parts.values()),
            "shares": {part: round(parts[part] / total, 3)
                       for part in [*(name for name, _ in PARTS), "other"] if parts[part]}}


THREAD_KINDS = (("jit", ("C1 CompilerThre", "C2 CompilerThre")),
                ("gc", ("GC Thread", "G1 ")))
"""The JVM's own threads by the names Linux knows them by (``/proc/<pid>/task/*/comm``)."""


def cpu_seconds(pid: int) -> dict[str, float]:
    """The CPU seconds so far of the process ``pid``'s threads: all of them, its JIT compilers'
    and its garbage collector's (a thread that ended counts in neither kind, only in all)."""
    tick = os.sysconf("SC_CLK_TCK")
    found = dict.fromkeys((kind for kind, _ in THREAD_KINDS), 0.0)
    fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    found["all"] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    for task in (Path("/proc") / str(pid) / "task").iterdir():
        try:
            name = (task / "comm").read_text()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        for kind, prefixes in THREAD_KINDS:
            if name.startswith(prefixes):
                found[kind] += (int(fields[11]) + int(fields[12])) / tick
    return found


def cpu_between(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {f"{kind}_cpu_s": round(after[kind] - before[kind], 2) for kind in after}


def jvms_below(root: int, marker: str) -> list[int]:
    """The ``java`` processes descended from ``root`` whose command line holds ``marker``."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, pending = [], list(children.get(root, []))
    while pending:
        pid = pending.pop()
        pending += children.get(pid, [])
        try:
            command = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if command and command[0].endswith(b"java") and marker.encode() in b" ".join(command):
            found.append(pid)
    return sorted(found)
