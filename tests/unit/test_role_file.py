"""The role file: topic names and prefixes per operation, a user it does not name allowed
nothing that needs a topic, and a file of another shape refused with the reason."""

from __future__ import annotations

from typing import Any

import pytest

from metastore.catalog.exceptions import TopicAuthorizationError
from metastore.engine.access import CREATE, READ, WRITE, Need
from metastore.server.roles import RoleFile, RoleFileError

ROLES = RoleFile.of({"users": {"team": {"read": ["orders.*", "clicks"], "write": ["orders.*"]},
                               "all": {"read": ["*"]}}})


def test_names_and_prefixes_allow_their_operation_only() -> None:
    ROLES.check("team", [Need(READ, "orders.eu"), Need(READ, "clicks"), Need(WRITE, "orders.x")])
    ROLES.check("all", [Need(READ, "anything")])
    ROLES.check("nobody", [])
    with pytest.raises(TopicAuthorizationError, match=r"^Authorization denied to Read on "
                                                      r"topic\(s\): \[clicks2, views\]$"):
        ROLES.check("team", [Need(READ, "views"), Need(READ, "orders.a"), Need(READ, "clicks2"),
                             Need(CREATE, "orders.b")])
    with pytest.raises(TopicAuthorizationError, match="Create on topic"):
        ROLES.check("nobody", [Need(CREATE, "orders.a")])


@pytest.mark.parametrize(("document", "reason"), [
    ({"user": {}}, "expected only \\[users.<name>\\] tables; found user"),
    ({"users": {"a": {"admin": ["*"]}}}, "\\[users.a\\] takes lists read, write, create, delete"),
    ({"users": {"a": {"read": "*"}}}, "users.a.read is a list of topic names"),
    ({"users": {"a": {"read": [""]}}}, "users.a.read is a list of topic names"),
])
def test_a_file_of_another_shape_is_refused(document: dict[str, Any], reason: str) -> None:
    with pytest.raises(RoleFileError, match=reason):
        RoleFile.of(document)
