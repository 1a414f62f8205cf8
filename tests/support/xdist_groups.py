"""The parallel phase's xdist scheduler: ``--dist loadgroup`` with the groups of
``tests.support.schedule``, handed from the workers to the controller in a file.

pytest-xdist's own loadgroup reads a test's group from a ``@group`` suffix it writes into the
node id at collection; since pytest 9.2 a node id no longer carries it, so every test would be
scheduled alone and a shared fixture started on every worker. Here each worker writes the groups
it computed (all compute the same from the same collection) to
``<cache>/xdist/<test run id>.json``; the controller's scheduler reads them when it splits the
collection into work units, and keeps the collection's order (lanes first).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling


def run_id(config: pytest.Config) -> str:
    """The test run's id, which the controller hands to the workers; set here when absent."""
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        return str(worker["testrunuid"])
    if config.option.testrunuid is None:
        config.option.testrunuid = uuid.uuid4().hex
    return str(config.option.testrunuid)


def groups_file(cache: Path, config: pytest.Config) -> Path:
    return cache / "xdist" / f"{run_id(config)}.json"


def publish(path: Path, groups: Mapping[str, str | None]) -> None:
    """Write the groups (every worker writes the same content)."""
    replace_json(path, dict(groups))


def replace_json(path: Path, value: object) -> None:
    """Replace ``path`` whole, so that no other process ever reads half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(value, indent=0) + "\n")
    partial.replace(path)


def plain_nodeid(nodeid: str) -> str:
    """A node id without the ``@group`` suffix xdist appends before pytest 9.2."""
    at, bracket = nodeid.rfind("@"), nodeid.rfind("]")
    return nodeid[:at] if at > bracket else nodeid


class GroupScheduling(LoadScopeScheduling):
    """Work units are the published groups; a test without one is a unit of its own."""

    def __init__(self, config: pytest.Config, log: Any, path: Path) -> None:
        super().__init__(config, log)
        self._path = path
        self._groups: dict[str, str] | None = None
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:
            if not self._path.exists():
                raise RuntimeError(f"no worker published the test groups to {self._path}")
            self._groups = json.loads(self._path.read_text())
        plain = plain_nodeid(nodeid)
        return self._groups.get(plain) or plain

    def schedule(self) -> None:
        super().schedule()
        self._path.unlink(missing_ok=True)
