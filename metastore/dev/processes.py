"""Processes the local launchers start: are they alive, are they ours, and the state files that
record them."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def pid_alive(pid: int, marker: str) -> bool:
    """True when ``pid`` runs and its command line contains ``marker`` (so it is ours)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if marker.encode() not in cmdline:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def pid_exists(pid: int) -> bool:
    """True while ``pid`` runs (and is not a zombie), whatever its command line says yet.

    Right after a fork, before exec, a child still shows its parent's command line: use this, not
    :func:`pid_alive`, to ask whether a process just started is still there.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def send(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def reap(pid: int) -> None:
    """Collect a child's exit status when it is ours (no zombie left behind)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def terminate(pids: list[int], marker: str, timeout: float,
              sig: signal.Signals = signal.SIGTERM) -> None:
    """``sig`` (SIGTERM), wait up to ``timeout``, then SIGKILL whatever of ours still runs."""
    for pid in pids:
        send(pid, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_alive(p, marker) for p in pids):
        for pid in pids:
            reap(pid)
        time.sleep(0.1)
    killed = [pid for pid in pids if pid_alive(pid, marker)]
    for pid in killed:
        send(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10  # SIGKILL is delivered asynchronously: wait until gone
    while killed and time.monotonic() < deadline:
        for pid in killed:
            reap(pid)
        killed = [pid for pid in killed if pid_alive(pid, marker)]
        if killed:
            time.sleep(0.05)
    for pid in pids:
        reap(pid)


def write_state(path: Path, text: str) -> None:
    """Replace the state file ``path`` with ``text`` at once: a reader sees the old or the new."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    partial.write_text(text)
    partial.replace(path)


def read_state(path: Path, parse: Callable[[str], T]) -> T | None:
    """The launcher state in ``path``, or None when there is none or it cannot be read."""
    try:
        return parse(path.read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a daemon's log, for an error saying why it did not start."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
