"""One local service process under a root directory: started, found again and stopped.

The Schema Registry, the Kafka Connect worker and PostgreSQL are each one process on 127.0.0.1
that the launcher starts with a port it chose: their state (port, pid) is in a JSON file under
the root and their output in a log file beside it. Only a process whose command line names the root is ever
signalled, so a stale state file never costs another process. Readiness is the service's own
answer, which each service says how to ask (:meth:`LocalService.answers`).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar, Generic, Self, TextIO, TypeVar

from metastore.dev.exceptions import LocalInfraError
from metastore.dev.processes import (
    log_tail,
    pid_alive,
    pid_exists,
    read_state,
    terminate,
    write_state,
)


@dataclass(frozen=True)
class ServiceState:
    """Where a started service listens, and its process."""

    port: int
    pid: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> Self:
        data = json.loads(text)
        return cls(port=int(data["port"]), pid=data.get("pid"))


S = TypeVar("S", bound=ServiceState)


class LocalService(ABC, Generic[S]):
    """One service process under ``root``: :meth:`launch` it, find it with :meth:`state`."""

    title: ClassVar[str]
    """The service's name in messages ("Schema Registry")."""
    file_stem: ClassVar[str]
    """Its state file is ``<stem>.json`` and its log ``<stem>.log`` under the root."""
    start_error: ClassVar[type[LocalInfraError]]
    state_type: type[S]
    stop_signal: ClassVar[signal.Signals] = signal.SIGTERM
    """What asks the process to stop (SIGKILL follows after the stop's timeout)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    @property
    def marker(self) -> str:
        return str(self.root)

    @property
    def state_path(self) -> Path:
        return self.root / f"{self.file_stem}.json"

    @property
    def log_path(self) -> Path:
        return self.root / f"{self.file_stem}.log"

    def state(self) -> S | None:
        return read_state(self.state_path, self.state_type.from_json)

    def is_running(self) -> bool:
        return self._running_pid(self.state()) is not None

    def _running_pid(self, state: S | None) -> int | None:
        if state is None or state.pid is None or not pid_alive(state.pid, self.marker):
            return None
        return state.pid

    @abstractmethod
    def answers(self, state: S) -> bool:
        """Whether the service at ``state`` answers as a ready one does."""

    def launch(self, command: list[str], state: S, progress: TextIO | None,
               timeout: float) -> S:
        """Run ``command`` (whose line names the root) as the service ``state`` says, and
        wait until it :meth:`answers`; a service that does not is stopped, with its log's tail."""
        self.root.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True,
                                       cwd=self.root)
        started = type(state)(**{**state.__dict__, "pid": process.pid})
        write_state(self.state_path, started.to_json())
        try:
            self._wait_ready(started, timeout)
        except LocalInfraError:
            self.stop()
            raise
        say(progress, f"{self.title} is ready at {started.url}")
        return started

    def _wait_ready(self, state: S, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if state.pid is None or not pid_exists(state.pid):
                raise self.start_error(f"the {self.title} exited during start-up:\n"
                                       f"{log_tail(self.log_path)}")
            if self.answers(state):
                return
            if time.monotonic() > deadline:
                raise self.start_error(f"the {self.title} did not answer within "
                                       f"{timeout:.0f}s; see {self.log_path}")
            time.sleep(0.2)

    def stop(self, timeout: float = 20.0) -> int:
        """Stop the process this launcher started; how many were running (0 or 1)."""
        pid = self._running_pid(self.state())
        if pid is None:
            return 0
        terminate([pid], self.marker, timeout, self.stop_signal)
        return 1


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""No proxy of the environment stands between the launcher and its own services."""


def answers_with_list(url: str, timeout: float = 2.0) -> bool:
    """Whether ``url`` answers a JSON list (the registry's subjects, Connect's connectors)."""
    try:
        with _DIRECT.open(url, timeout=timeout) as response:
            return isinstance(json.load(response), list)
    except (OSError, urllib.error.URLError, ValueError):
        return False


def say(progress: TextIO | None, message: str) -> None:
    """``message`` on ``progress``, unless the caller asked for quiet (None)."""
    if progress is not None:
        print(message, file=progress, flush=True)


__all__ = ["LocalService", "ServiceState", "answers_with_list", "say"]
