"""Errors of the local development infrastructure (jar resolution, builds, local daemons)."""

from __future__ import annotations

from metastore.core.exceptions import MetastoreError


class LocalInfraError(MetastoreError):
    """Something the local launcher needs is missing or failed."""

    code = "local_infra"


class ToolMissingError(LocalInfraError):
    """A required program (java, mvn) is not on PATH."""

    code = "tool_missing"

    def __init__(self, tool: str, hint: str) -> None:
        super().__init__(f"'{tool}' was not found on PATH. {hint}")
        self.tool = tool


class JarResolutionError(LocalInfraError):
    """Maven could not resolve a jar set."""

    code = "jar_resolution"

    def __init__(self, jar_set: str, detail: str) -> None:
        super().__init__(f"Could not resolve the {jar_set} jars with Maven: {detail}")
        self.jar_set = jar_set


class JavaBuildError(LocalInfraError):
    """Java the project builds (its own classes, the local Schema Registry) did not build."""

    code = "java_build"

    def __init__(self, detail: str, what: str = "the project's JVM classes") -> None:
        super().__init__(f"Could not build {what}: {detail}")


class BrokerStartError(LocalInfraError):
    """A local broker did not start or did not become ready in time."""

    code = "broker_start"
