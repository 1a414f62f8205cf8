"""Where the test suite's CPU goes: ``python -m integration.bench suite-cpu`` runs the README's
test command (``python3 -m integration.bootstrap test``; ``--quick``: its quick tier) and samples
every process's CPU from ``/proc`` every few seconds, then reports CPU seconds by kind of process
(the broker, Spark drivers of nodes and of pytest workers, executors, the registry, node
processes, pytest). Every process of the machine counts from the moment sampling began, so the
figure is the run's only on an otherwise idle machine. A process's CPU after its last sample is
not counted, so short-lived processes are undercounted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
INTERVAL_SECONDS = 3.0
_TICKS = os.sysconf("SC_CLK_TCK")
_JAVA_KINDS = (("kafka.Kafka", "broker"), ("CoarseGrainedExecutorBackend", "Spark executor"),
               ("deploy.worker.Worker", "Spark daemons"), ("deploy.master.Master", "Spark daemons"),
               ("apicurio", "Schema Registry"), ("quarkus", "Schema Registry"))


def run(quick: bool) -> dict[str, Any]:
    command = [sys.executable, "-m", "integration.bootstrap", "test", *(["--quick"] if quick else [])]
    seen: dict[int, tuple[float, str]] = {}
    done = threading.Event()
    sampler = threading.Thread(target=_sample_until, args=(done, seen), daemon=True)
    started = time.monotonic()
    sampler.start()
    try:
        code = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, check=False).returncode
    finally:
        done.set()
        sampler.join()
    wall = time.monotonic() - started
    by_kind: Counter[str] = Counter()
    for cpu, kind in seen.values():
        by_kind[kind] += cpu
    total = sum(by_kind.values())
    return {"exit_code": code, "wall_seconds": round(wall, 1), "cpu_seconds": round(total, 1),
            "cores_busy": round(total / wall, 2) if wall else 0.0,
            "by_kind": {kind: {"cpu_seconds": round(cpu, 1), "share": round(cpu / total, 3)}
                        for kind, cpu in by_kind.most_common()}}


def _sample_until(done: threading.Event, seen: dict[int, tuple[float, str]]) -> None:
    """CPU each process spent since sampling began, until ``done``: a process already running
    then counts from its CPU at that moment."""
    me = os.getpid()
    before = _cpu_by_pid()
    while True:
        for pid, cpu in _cpu_by_pid().items():
            if pid == me:
                continue
            kind = seen[pid][1] if pid in seen else _kind(pid)
            seen[pid] = (cpu - before.get(pid, 0.0), kind)
        if done.wait(INTERVAL_SECONDS):
            return


def _cpu_by_pid() -> dict[int, float]:
    cpu: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(int(name))
            if fields:
                cpu[int(name)] = (int(fields[11]) + int(fields[12])) / _TICKS
    return cpu


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (empty: the process is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def _kind(pid: int) -> str:
    command = _command(pid)
    program = os.path.basename(command.split(" ", 1)[0])
    if program == "java":
        for marker, kind in _JAVA_KINDS:
            if marker in command:
                return kind
        if "SparkSubmit" in command or "pyspark-shell" in command:
            fields = _stat(pid)
            parent = _command(int(fields[1])) if fields else ""
            return "Spark driver of a node" if " server" in parent else "Spark driver of pytest"
        return "other JVM"
    if program.startswith("python") or program in ("metastore", "pytest"):
        if (" server" in command and "metastore" in command) or "cli.main server" in command:
            return "node process (Python)"
        if "pytest" in command or "execnet" in command:
            return "pytest"
        return "other Python"
    return "other" if program else "gone before sampled"
