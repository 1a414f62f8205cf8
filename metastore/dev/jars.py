"""Resolve jar sets from Maven Central into the local cache, once.

A jar set is a pom in ``poms/`` whose runtime dependencies Maven copies into
``<cache>/jars/<name>/``. A stamp file records the pom's hash and parameters, so a second call
costs one file read and a changed pom resolves again. The project's own JVM module is built by
:mod:`metastore.dev.jvm_build`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TextIO

from metastore.dev.exceptions import JarResolutionError, ToolMissingError
from metastore.dev.paths import jar_dir

STAMP = ".resolved.json"


@dataclass(frozen=True)
class JarSet:
    name: str
    pom: str
    properties: dict[str, str] = field(default_factory=dict)
    package: str = "metastore.dev"
    """The package whose ``poms/`` holds the pom (the benchmarks keep theirs)."""


def kafka_broker() -> JarSet:
    return JarSet(name="kafka", pom="kafka.xml")


def spark_kafka_connector(version: str | None = None) -> JarSet:
    """The jars a node's Spark adds to pyspark's: Spark's Kafka connector for the pyspark that is
    installed, or ``version`` (versions must match exactly), and protobuf-java, which the
    project's PROTOBUF_NOSR codec (:data:`PROTOBUF_CODEC_CLASS`) runs with."""
    if version is None:
        import pyspark

        version = pyspark.__version__
    return JarSet(name=f"spark-connectors-{version}", pom="spark-connectors.xml",
                  properties={"spark.version": version})


def pyspark_jars() -> Path:
    """The directory of the jars pyspark ships (Spark itself, Jackson, ...)."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def require_tool(tool: str, hint: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ToolMissingError(tool, hint)
    return path


def require_java() -> str:
    return require_tool("java", "Install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre).")


def _pom_text(pom: str, package: str = "metastore.dev") -> str:
    return resources.files(package).joinpath("poms", pom).read_text(encoding="utf-8")


def _stamp_for(jar_set: JarSet) -> dict[str, object]:
    digest = hashlib.sha256(_pom_text(jar_set.pom, jar_set.package).encode()).hexdigest()
    return {"pom_sha256": digest, "properties": jar_set.properties}


def is_built(target: Path, stamp: object, artifact: Path) -> bool:
    """Whether ``target`` holds ``artifact`` built from what ``stamp`` describes (its stamp file)."""
    try:
        return bool(json.loads((target / STAMP).read_text()) == stamp) and artifact.exists()
    except (OSError, ValueError):
        return False


def is_resolved(jar_set: JarSet) -> bool:
    target = jar_dir(jar_set.name)
    return is_built(target, _stamp_for(jar_set), target)


def resolve(jar_set: JarSet, progress: TextIO | None = sys.stderr) -> list[Path]:
    """The jars of ``jar_set``, downloading them with Maven the first time."""
    target = jar_dir(jar_set.name)
    if not is_resolved(jar_set):
        _download(jar_set, target, progress)
    jars = sorted(target.glob("*.jar"))
    if not jars:
        raise JarResolutionError(jar_set.name, f"no jars in {target}")
    return jars


def _download(jar_set: JarSet, target: Path, progress: TextIO | None) -> None:
    mvn = require_tool("mvn", "Install Apache Maven 3.8+ (Debian: apt-get install maven).")
    require_java()
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pom_path = staging / "pom.xml"
    pom_path.write_text(_pom_text(jar_set.pom, jar_set.package), encoding="utf-8")
    settings = staging / "maven-settings.xml"
    settings.write_text(_pom_text("maven-settings.xml"), encoding="utf-8")
    command = [
        mvn, "-B", "-f", str(pom_path), "-gs", str(settings),
        "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
        f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
        *[f"-D{key}={value}" for key, value in sorted(jar_set.properties.items())],
    ]
    if progress is not None:
        print(f"Resolving the {jar_set.name} jars from Maven Central (first run only)...",
              file=progress, flush=True)
    lines: list[str] = []
    downloaded = 0
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line.rstrip())
        if "Downloaded from" in line:
            downloaded += 1
            if progress is not None and downloaded % 25 == 0:
                print(f"  {downloaded} files downloaded...", file=progress, flush=True)
    if process.wait() != 0:
        errors = [line for line in lines if "ERROR" in line][:5] or lines[-5:]
        shutil.rmtree(staging, ignore_errors=True)
        raise JarResolutionError(jar_set.name, "\n".join(errors))
    pom_path.unlink()
    settings.unlink()
    (staging / STAMP).write_text(json.dumps(_stamp_for(jar_set)))
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    if progress is not None:
        count = len(list(target.glob("*.jar")))
        print(f"Resolved {count} {jar_set.name} jars into {target} ({downloaded} files downloaded)",
              file=progress, flush=True)
