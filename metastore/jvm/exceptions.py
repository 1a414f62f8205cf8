"""Errors of the project's JVM jars as a node finds them."""

from __future__ import annotations

from metastore.core.exceptions import MetastoreError


class JvmJarsError(MetastoreError):
    """The project's JVM jars are missing, or were built from other sources than the checkout's.
    ``reason``: ``missing`` or ``stale``."""

    code = "jvm_jars"

    def __init__(self, reason: str, directory: str, detail: str) -> None:
        super().__init__(f"The project's JVM jars ({directory}) are {reason}: {detail}")
        self.reason = reason
