"""Resolve jar sets from Maven Central into the local cache, once.

A jar set is a pom in ``poms/`` whose runtime dependencies Maven copies into
``<cache>/jars/<name>/``. A stamp file records the pom's hash and parameters, so a second call
costs one file read and a changed pom resolves again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TextIO

from metastore.local.exceptions import JarResolutionError, JavaBuildError, ToolMissingError
from metastore.local.paths import jar_dir

STAMP = ".resolved.json"


@dataclass(frozen=True)
class JarSet:
    name: str
    pom: str
    properties: dict[str, str] = field(default_factory=dict)


def kafka_broker() -> JarSet:
    return JarSet(name="kafka", pom="kafka.xml")


def spark_kafka_connector() -> JarSet:
    """Spark's Kafka connector for the pyspark that is installed (versions must match exactly)."""
    import pyspark

    version = pyspark.__version__
    return JarSet(name=f"spark-kafka-{version}", pom="spark-kafka.xml",
                  properties={"spark.version": version})


def require_tool(tool: str, hint: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ToolMissingError(tool, hint)
    return path


def require_java() -> str:
    return require_tool("java", "Install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre).")


def _pom_text(pom: str) -> str:
    return resources.files("metastore.local").joinpath("poms", pom).read_text(encoding="utf-8")


def _stamp_for(jar_set: JarSet) -> dict[str, object]:
    digest = hashlib.sha256(_pom_text(jar_set.pom).encode()).hexdigest()
    return {"pom_sha256": digest, "properties": jar_set.properties}


def is_resolved(jar_set: JarSet) -> bool:
    stamp = jar_dir(jar_set.name) / STAMP
    try:
        return bool(json.loads(stamp.read_text()) == _stamp_for(jar_set))
    except (OSError, ValueError):
        return False


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
    pom_path.write_text(_pom_text(jar_set.pom), encoding="utf-8")
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


# -- the project's own Java ------------------------------------------------------------------------
INTERCEPTOR_CLASS = "io.metastore.kafka.RecordTimestampInterceptor"
"""The producer interceptor that sets a sink record's timestamp from its header (see the source)."""
_INTERCEPTOR_SOURCE = "java/io/metastore/kafka/RecordTimestampInterceptor.java"
_INTERCEPTOR_JAR = "metastore-kafka-interceptor.jar"


def record_timestamp_interceptor(progress: TextIO | None = sys.stderr) -> Path:
    """The jar of :data:`INTERCEPTOR_CLASS`, compiled against the Spark connector's Kafka client
    the first time (and again when its source changes)."""
    source = resources.files("metastore.local").joinpath(_INTERCEPTOR_SOURCE).read_text(
        encoding="utf-8")
    clients = [j for j in resolve(spark_kafka_connector(), progress)
               if j.name.startswith("kafka-clients")]
    if not clients:
        raise JavaBuildError("no kafka-clients jar to compile against in the Spark Kafka "
                             "connector's jars")
    stamp_value = {"source_sha256": hashlib.sha256(source.encode()).hexdigest(),
                   "classpath": clients[0].name}
    target = jar_dir("metastore-kafka-interceptor")
    jar = target / _INTERCEPTOR_JAR
    try:
        if json.loads((target / STAMP).read_text()) == stamp_value and jar.exists():
            return jar
    except (OSError, ValueError):
        pass
    javac = require_tool("javac", "Install a Java 17+ JDK (Debian: apt-get install openjdk-17-jdk).")
    jar_tool = require_tool("jar", "Install a Java 17+ JDK (Debian: apt-get install openjdk-17-jdk).")
    target.parent.mkdir(parents=True, exist_ok=True)
    # a staging directory of its own: nodes starting together may compile at the same time
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".partial-", dir=target.parent))
    (staging / "classes").mkdir(parents=True)
    java_file = staging / Path(_INTERCEPTOR_SOURCE).name
    java_file.write_text(source, encoding="utf-8")
    if progress is not None:
        print("Compiling the record timestamp interceptor (first run only)...", file=progress,
              flush=True)
    for command in ([javac, "--release", "17", "-cp", str(clients[0]), "-d",
                     str(staging / "classes"), str(java_file)],
                    [jar_tool, "cf", str(staging / _INTERCEPTOR_JAR), "-C",
                     str(staging / "classes"), "."]):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise JavaBuildError((done.stderr or done.stdout).strip()[:2000])
    shutil.rmtree(staging / "classes")
    java_file.unlink()
    (staging / STAMP).write_text(json.dumps(stamp_value))
    shutil.rmtree(target, ignore_errors=True)
    try:
        staging.rename(target)
    except OSError:  # another process put the same build in place first
        shutil.rmtree(staging, ignore_errors=True)
        if not jar.exists():
            raise
    return jar
