"""Who may do what, for deployments without Kafka ACLs: a role file of each user's topic
permissions (``--roles-file``, with ``--auth-file`` or client certificates: its users are the ones
authenticated, :mod:`metastore.server.peer_certificates`).

```toml
[users.analyst]          # reads every topic, writes none: runs queries, creates nothing
read = ["*"]

[users.orders-team]
read = ["orders.*", "customers"]
write = ["orders.*"]
create = ["orders.*"]
delete = ["orders.*"]
```

Each list holds topic names, or prefixes ending in ``*`` (``*`` alone: every topic), per
operation (:mod:`metastore.engine.access`): ``read``, ``write``, ``create``, ``delete``; and
``connect``, the names of the connectors the user may create and drop (a connector touches
topics as the Connect worker, so this is a grant of its own). A user
the file does not name may do nothing that needs a topic; statements that need none (SHOW,
DESCRIBE, TERMINATE, types, variables) are everyone's. A request with one statement its user may
not run is refused whole, ksqlDB's 40301 naming the operation and the topics, and nothing is
written. Every node of a service should read the same file: the node that writes checks a
forwarded request for the user who sent it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metastore.core.exceptions import MetastoreError
from metastore.engine.access import OPERATIONS, Need, refuse


class RoleFileError(MetastoreError):
    """A role file the node cannot read as permissions."""


@dataclass(frozen=True)
class Permissions:
    """A user's topic patterns per operation."""

    patterns: Mapping[str, tuple[str, ...]]

    def allows(self, need: Need) -> bool:
        return any(_matches(pattern, need.topic)
                   for pattern in self.patterns.get(need.operation, ()))


def _matches(pattern: str, topic: str) -> bool:
    if pattern.endswith("*"):
        return topic.startswith(pattern[:-1])
    return topic == pattern


@dataclass(frozen=True)
class RoleFile:
    users: Mapping[str, Permissions]

    @classmethod
    def load(cls, path: Path) -> RoleFile:
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise RoleFileError(f"the role file {path} cannot be read: {error}") from error
        return cls.of(document, str(path))

    @classmethod
    def of(cls, document: Mapping[str, Any], name: str = "the role file") -> RoleFile:
        unknown = sorted(set(document) - {"users"})
        users = document.get("users", {})
        if unknown or not isinstance(users, dict):
            raise RoleFileError(f"{name}: expected only [users.<name>] tables; found "
                                f"{', '.join(unknown) or 'users = ' + type(users).__name__}")
        return cls({str(user): _permissions(name, str(user), table)
                    for user, table in users.items()})

    def check(self, user: str, needs: Iterable[Need]) -> None:
        """Refuse, naming the first operation and every topic of it ``user`` may not touch."""
        permissions = self.users.get(user, Permissions({}))
        refuse([need for need in needs if not permissions.allows(need)])


def _permissions(name: str, user: str, table: Any) -> Permissions:
    keys = {operation.lower(): operation for operation in OPERATIONS}
    if not isinstance(table, dict) or set(table) - set(keys):
        raise RoleFileError(f"{name}: [users.{user}] takes lists {', '.join(keys)}")
    patterns: dict[str, tuple[str, ...]] = {}
    for key, listed in table.items():
        if not isinstance(listed, list) or not all(isinstance(p, str) and p for p in listed):
            raise RoleFileError(f"{name}: users.{user}.{key} is a list of topic names or "
                                "prefixes ending in '*'")
        patterns[keys[key]] = tuple(listed)
    return Permissions(patterns)


__all__ = ["Permissions", "RoleFile", "RoleFileError"]
