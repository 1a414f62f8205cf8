"""A local Confluent-compatible Schema Registry on 127.0.0.1: Apicurio Registry, in memory.

Apicurio Registry's ``ccompat`` API (``/apis/ccompat/v7``) is the Confluent Schema Registry REST
API; that base URL is what a node's ``--schema-registry-url`` takes. Maven Central publishes
Apicurio's application module but no runnable build, so :func:`build` packages it with Quarkus from
the project's ``schema_registry_app/`` (its ``pom.xml`` says why that version), once, into
``<cache>/jars/schema-registry/``; a stamp of the sources' hash makes the next call a file read.

:class:`LocalSchemaRegistry` starts one registry process under a root, its port and pid in
``schema-registry.json``, its log in ``schema-registry.log``. Only a process whose command line
names the root is ever signalled. Readiness is the API's own answer: ``GET /subjects`` gives a
JSON list. Schemas live in the process's memory: a restart starts empty, as a test wants.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TextIO

from metastore.dev import jars
from metastore.dev.exceptions import JavaBuildError, LocalInfraError
from metastore.dev.kafka_cluster import free_ports
from metastore.dev.local_service import LocalService, ServiceState, answers_with_list, say
from metastore.dev.paths import jar_dir

APP_DIR = "schema_registry_app"
RUNNER_JAR = "schema-registry-1-runner.jar"
CCOMPAT_PATH = "/apis/ccompat/v7"
HEAP = "-Xmx256m"


class SchemaRegistryStartError(LocalInfraError):
    """The local Schema Registry did not start, or not in time."""

    code = "schema_registry_start"


@dataclass(frozen=True)
class SchemaRegistryState(ServiceState):
    @property
    def url(self) -> str:
        """The Confluent Schema Registry API's base URL."""
        return f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"


# -- build ---------------------------------------------------------------------------------------
BUILD_FILES = ("pom.xml", "src")
"""What the build reads from the app directory (a ``target/`` of a manual build is not)."""
BUILD_TIMEOUT_SECONDS = 1800


def _sources() -> dict[str, str]:
    """The build's files (path relative to the app directory: text)."""
    found: dict[str, str] = {}

    def walk(entry: Traversable, prefix: str) -> None:
        for child in entry.iterdir():
            path = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, f"{path}/")
            elif not child.name.endswith((".pyc", "~")):
                found[path] = child.read_text(encoding="utf-8")

    app = resources.files("metastore.dev").joinpath(APP_DIR)
    for name in BUILD_FILES:
        entry = app.joinpath(name)
        if entry.is_dir():
            walk(entry, f"{name}/")
        else:
            found[name] = entry.read_text(encoding="utf-8")
    return found


def _stamp(sources: dict[str, str]) -> dict[str, dict[str, str]]:
    return {"sources_sha256": {path: hashlib.sha256(text.encode()).hexdigest()
                               for path, text in sorted(sources.items())}}


def is_built() -> bool:
    """Whether the registry's runner jar is built from the current sources."""
    target = jar_dir("schema-registry")
    return jars.is_built(target, _stamp(_sources()), target / RUNNER_JAR)


def build(progress: TextIO | None = sys.stderr) -> Path:
    """The registry's runner jar (its ``lib/`` beside it), built with Maven the first time and
    again when a source of the build changes. Builds of several processes take turns (a lock
    file); a build that fails or is interrupted leaves nothing behind."""
    sources = _sources()
    stamp = _stamp(sources)
    target = jar_dir("schema-registry")
    runner = target / RUNNER_JAR
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / "schema-registry.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if jars.is_built(target, stamp, runner):
            return runner
        staging = Path(tempfile.mkdtemp(prefix=target.name + ".partial-", dir=target.parent))
        try:
            _maven_package(sources, staging, progress)
            (staging / "output").mkdir()
            (staging / "target" / RUNNER_JAR).rename(staging / "output" / RUNNER_JAR)
            (staging / "target" / "lib").rename(staging / "output" / "lib")
            (staging / "output" / jars.STAMP).write_text(json.dumps(stamp))
            shutil.rmtree(target, ignore_errors=True)
            (staging / "output").rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    if progress is not None:
        print(f"Built the Schema Registry into {target}", file=progress, flush=True)
    return runner


def _maven_package(sources: dict[str, str], staging: Path, progress: TextIO | None) -> None:
    mvn = jars.require_tool("mvn", "Install Apache Maven 3.8+ (Debian: apt-get install maven).")
    jars.require_tool("javac", "Install a Java 17+ JDK (Debian: apt-get install openjdk-17-jdk).")
    for path, text in sources.items():
        (staging / path).parent.mkdir(parents=True, exist_ok=True)
        (staging / path).write_text(text, encoding="utf-8")
    settings = staging / "maven-settings.xml"
    settings.write_text(resources.files("metastore.dev").joinpath(
        "poms", "maven-settings.xml").read_text(encoding="utf-8"), encoding="utf-8")
    if progress is not None:
        print("The local Schema Registry is needed and not built yet: building it (Apicurio "
              "Registry, about 210 MB from Maven Central) once, a few minutes; `metastore dev "
              "fetch --all` builds it ahead of time...", file=progress, flush=True)
    try:
        done = subprocess.run([mvn, "-B", "-q", "-f", str(staging / "pom.xml"), "-gs",
                               str(settings), "package", "-DskipTests"], capture_output=True,
                              text=True, check=False, timeout=BUILD_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired as error:
        raise JavaBuildError(f"mvn did not finish within {BUILD_TIMEOUT_SECONDS} s",
                             "the local Schema Registry") from error
    if done.returncode != 0 or not (staging / "target" / RUNNER_JAR).exists():
        errors = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line]
        raise JavaBuildError("\n".join(errors[:5]) or f"mvn exited {done.returncode}",
                             "the local Schema Registry")


# -- run -----------------------------------------------------------------------------------------
class LocalSchemaRegistry(LocalService[SchemaRegistryState]):
    """One in-memory registry process under ``root``."""

    title = "Schema Registry"
    file_stem = "schema-registry"
    start_error = SchemaRegistryStartError
    state_type = SchemaRegistryState

    def start(self, progress: TextIO | None = sys.stderr,
              timeout: float = 60.0) -> SchemaRegistryState:
        """Start the registry (or return it when it runs) once its API answers."""
        existing = self.state()
        if existing is not None and self.is_running():
            return existing
        self.stop()
        runner = build(progress)
        java = jars.require_java()
        [chosen] = free_ports(1)
        say(progress, f"Starting a Schema Registry on 127.0.0.1:{chosen}...")
        command = [java, HEAP, f"-Dmetastore.local.root={self.root}",
                   f"-Dquarkus.http.port={chosen}", "-Dquarkus.http.host=127.0.0.1",
                   "-Dquarkus.log.level=WARN", "-jar", str(runner)]
        return self.launch(command, SchemaRegistryState(chosen), progress, timeout)

    def answers(self, state: SchemaRegistryState) -> bool:
        return answers(state.url)


def answers(url: str, timeout: float = 2.0) -> bool:
    """Whether a Confluent-compatible registry answers at ``url`` (its subjects, a JSON list)."""
    return answers_with_list(f"{url.rstrip('/')}/subjects", timeout)
