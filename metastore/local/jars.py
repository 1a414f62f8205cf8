"""Resolve jar sets from Maven Central into the local cache, once.

A jar set is a pom in ``poms/`` whose runtime dependencies Maven copies into
``<cache>/jars/<name>/``. A stamp file records the pom's hash and parameters, so a second call
costs one file read and a changed pom resolves again. The project's own Java classes (a producer
interceptor, the PROTOBUF_NOSR codec) are compiled with javac into one jar beside them.
"""

from __future__ import annotations

import hashlib
import json
import os
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


def _pom_text(pom: str) -> str:
    return resources.files("metastore.local").joinpath("poms", pom).read_text(encoding="utf-8")


def _stamp_for(jar_set: JarSet) -> dict[str, object]:
    digest = hashlib.sha256(_pom_text(jar_set.pom).encode()).hexdigest()
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
WINDOWED_PARTITIONER_CLASS = "io.metastore.kafka.WindowedKeyPartitioner"
"""The partitioner of windowed sinks: a key's windows in its unwindowed key's partition."""
WINDOW_KEY_BYTES_CONFIG = "metastore.window.key.bytes"
"""Its producer setting: the bytes of the window each key ends with (8, or 16 for SESSION)."""
PROTOBUF_CODEC_CLASS = "io.metastore.protobuf.ProtobufNoSrCodec"
"""PROTOBUF_NOSR records to and from ksqlDB's JSON, called from Spark SQL (see the source)."""
AVRO_CODEC_CLASS = "io.metastore.avro.AvroCodec"
"""AVRO records (Confluent's wire format) to and from ksqlDB's JSON, called from Spark SQL."""
PROTOBUF_SR_CODEC_CLASS = "io.metastore.protobuf.ProtobufSrCodec"
"""PROTOBUF records (Confluent's wire format) to and from ksqlDB's JSON, called from Spark SQL."""
REGISTRY_CALLS_CLASS = "io.metastore.avro.RegistryCalls"
"""A schema's registration and wire-format header, called from Spark SQL (JSON_SR sinks)."""
TABLE_SIDE_JOIN_CLASS = "io.metastore.join.TableSideJoin"
"""A stream-table join's table side as keyed state, under ``transformWithState`` (see the source)."""
TABLE_TABLE_JOIN_CLASS = "io.metastore.join.TableTableJoin"
"""A primary-key join of tables as keyed state, under ``transformWithState`` (see the source)."""
FOREIGN_KEY_JOIN_CLASS = "io.metastore.join.ForeignKeyJoin"
"""A foreign-key join of tables as keyed state, under ``transformWithState`` (see the source)."""
JSON_KINDS_CLASS = "io.metastore.json.JsonKinds"
"""Whether ksqlDB's JSON deserializer takes a value at every level of its type (see the source)."""
DATETIMES_CLASS = "io.metastore.functions.Datetimes"
"""ksqlDB's formatting of a time in a named zone, called from Spark SQL (see the source)."""
ROW_VERSIONS_CLASS = "io.metastore.aggregate.RowVersions"
"""A table's latest row per key as keyed state, for an aggregation of the table (see the source)."""
GROUP_MEMBERS_CLASS = "io.metastore.aggregate.GroupMembers"
"""A table aggregation's groups and their rows as keyed state (see the source)."""
STREAM_TIME_CLASS = "io.metastore.window.StreamTime"
"""An aggregation's stream time per source partition as keyed state (see the source)."""
SESSION_MEMBERS_CLASS = "io.metastore.window.SessionMembers"
"""A SESSION aggregation's sessions and their records as keyed state (see the source)."""
FINAL_WINDOWS_CLASS = "io.metastore.window.FinalWindows"
"""An EMIT FINAL time-windowed aggregation's open windows as keyed state (see the source)."""
UNMATCHED_RECORDS_CLASS = "io.metastore.join.UnmatchedRecords"
"""An outer stream-stream join's unmatched records without GRACE PERIOD (see the source)."""
LOCAL_FILE_SYSTEM_CLASS = "io.metastore.fs.NoForkLocalFileSystem"
"""Hadoop's local file system with permissions by NIO, no forked chmod (see the source)."""
LOCAL_FS_CLASS = "io.metastore.fs.NoForkLocalFs"
"""The same for ``FileContext``, which Spark's streaming checkpoints use."""
_JAVA_SOURCES = ("java/io/metastore/kafka/RecordTimestampInterceptor.java",
                 "java/io/metastore/kafka/WindowedKeyPartitioner.java",
                 "java/io/metastore/protobuf/ProtobufNoSrCodec.java",
                 "java/io/metastore/avro/RegistryCalls.java",
                 "java/io/metastore/avro/AvroCodec.java",
                 "java/io/metastore/protobuf/ProtobufSrCodec.java",
                 "java/io/metastore/join/TableSideJoin.java",
                 "java/io/metastore/join/TableTableJoin.java",
                 "java/io/metastore/join/Arrival.java",
                 "java/io/metastore/join/TableColumns.java",
                 "java/io/metastore/join/ForeignKeySubscriptions.java",
                 "java/io/metastore/join/ForeignKeyJoin.java",
                 "java/io/metastore/join/UnmatchedRecords.java",
                 "java/io/metastore/state/KeyColumn.java",
                 "java/io/metastore/state/Keyed.java",
                 "java/io/metastore/state/Rows.java",
                 "java/io/metastore/functions/Datetimes.java",
                 "java/io/metastore/json/JsonKinds.java",
                 "java/io/metastore/aggregate/RowVersions.java",
                 "java/io/metastore/aggregate/GroupMembers.java",
                 "java/io/metastore/window/StreamTime.java",
                 "java/io/metastore/window/SessionMembers.java",
                 "java/io/metastore/window/FinalWindows.java",
                 "java/io/metastore/catalog/CatalogClones.java",
                 "java/io/metastore/fs/NoForkRawLocalFileSystem.java",
                 "java/io/metastore/fs/NoForkLocalFileSystem.java",
                 "java/io/metastore/fs/NoForkLocalFs.java")
_PROJECT_JAR = "metastore-java.jar"
_FILE_SYSTEM_JAR = "metastore-fs.jar"
_FILE_SYSTEM_PACKAGE = "io/metastore/fs"
"""Classes of a jar of their own: they load with the JVM (on ``spark.driver.extraClassPath``),
where the others, which use the Kafka client, could not."""


def file_system_jar(progress: TextIO | None = sys.stderr) -> Path:
    """The jar of :data:`LOCAL_FILE_SYSTEM_CLASS` and :data:`LOCAL_FS_CLASS`, built with the
    project's Java jar (:func:`project_jar`)."""
    return project_jar(progress).parent / _FILE_SYSTEM_JAR


def record_timestamp_interceptor(progress: TextIO | None = sys.stderr) -> Path:
    """The jar of :data:`INTERCEPTOR_CLASS`: the project's Java jar (:func:`project_jar`)."""
    return project_jar(progress)


def project_jar(progress: TextIO | None = sys.stderr) -> Path:
    """The jar of the project's Java classes (:data:`INTERCEPTOR_CLASS`,
    :data:`PROTOBUF_CODEC_CLASS`), compiled against the Spark connector jars (the Kafka client,
    protobuf-java) and pyspark's (Jackson) the first time, and again when a source changes."""
    sources = {path: resources.files("metastore.local").joinpath(path).read_text(encoding="utf-8")
               for path in _JAVA_SOURCES}
    connector = resolve(spark_kafka_connector(), progress)
    stamp_value = {"sources_sha256": {path: hashlib.sha256(text.encode()).hexdigest()
                                      for path, text in sources.items()},
                   "classpath": sorted(j.name for j in connector)}
    target = jar_dir("metastore-java")
    jar = target / _PROJECT_JAR
    if is_built(target, stamp_value, jar) and (target / _FILE_SYSTEM_JAR).is_file():
        return jar
    javac = require_tool("javac", "Install a Java 17+ JDK (Debian: apt-get install openjdk-17-jdk).")
    jar_tool = require_tool("jar", "Install a Java 17+ JDK (Debian: apt-get install openjdk-17-jdk).")
    target.parent.mkdir(parents=True, exist_ok=True)
    # a staging directory of its own: nodes starting together may compile at the same time
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".partial-", dir=target.parent))
    (staging / "classes").mkdir(parents=True)
    java_files = []
    for path, text in sources.items():
        java_file = staging / "src" / path
        java_file.parent.mkdir(parents=True, exist_ok=True)
        java_file.write_text(text, encoding="utf-8")
        java_files.append(str(java_file))
    if progress is not None:
        print("Compiling the project's Java classes (first run only)...", file=progress, flush=True)
    classpath = os.pathsep.join([*(str(j) for j in connector), str(pyspark_jars() / "*")])
    compile_classes = [javac, "--release", "17", "-nowarn", "-cp", classpath, "-d",
                       str(staging / "classes"), *java_files]
    package = [jar_tool, "cf", str(staging / _PROJECT_JAR), "-C", str(staging / "classes"), "."]
    package_fs = [jar_tool, "cf", str(staging / _FILE_SYSTEM_JAR), "-C",
                  str(staging / "fs-classes"), "."]
    for command in (compile_classes, package, package_fs):
        if command is package:  # the file system's classes go in their own jar
            moved = staging / "fs-classes" / _FILE_SYSTEM_PACKAGE
            moved.parent.mkdir(parents=True)
            (staging / "classes" / _FILE_SYSTEM_PACKAGE).rename(moved)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise JavaBuildError((done.stderr or done.stdout).strip()[:2000])
    for built in ("classes", "fs-classes", "src"):
        shutil.rmtree(staging / built)
    (staging / STAMP).write_text(json.dumps(stamp_value))
    shutil.rmtree(target, ignore_errors=True)
    try:
        staging.rename(target)
    except OSError:  # another process put the same build in place first
        shutil.rmtree(staging, ignore_errors=True)
        if not jar.exists():
            raise
    return jar
