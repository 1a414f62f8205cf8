"""Where a node finds the project's JVM jars, and whether they are the ones its sources build.

The jars are built by Maven from ``jvm/`` (:mod:`metastore.dev.jvm_build`, which the
bootstrap and ``metastore dev fetch`` run) and copied into ``metastore/jars/``, package data a
wheel ships: a node never compiles. In a checkout, where ``jvm/`` is beside the package, a jar
built from other sources or for another Spark is refused, with the command that rebuilds it,
rather than run with classes that no longer match the Python that calls them.

Standard library only: the bootstrap's prefetch imports it before anything is installed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from metastore.jvm.exceptions import JvmJarsError

JARS_DIR = Path(__file__).resolve().parents[1] / "jars"
"""``metastore/jars/``: the built jars and their stamp."""
CHECKOUT_MODULE = Path(__file__).resolve().parents[2] / "jvm"
"""The Maven module, present in a checkout only."""
PROJECT_JAR = "metastore-jvm.jar"
FILE_SYSTEM_JAR = "metastore-jvm-fs.jar"
"""The file system's classes, in a jar of their own: they load with the JVM
(``spark.driver.extraClassPath``), where the others, which use the Kafka client, could not."""
STAMP = ".built.json"
REBUILD = "python3 -m metastore.dev.prefetch (or: metastore dev fetch)"


def module_stamp(spark_version: str, module: Path = CHECKOUT_MODULE) -> dict[str, object]:
    """What a build of ``module`` for ``spark_version`` is made of: the digest of its pom and of
    each main source (tests do not change the jars)."""
    files = [module / "pom.xml", *sorted((module / "src" / "main").rglob("*.java"))]
    digests = {str(path.relative_to(module)): hashlib.sha256(path.read_bytes()).hexdigest()
               for path in files}
    return {"spark_version": spark_version, "sources_sha256": digests}


def built_stamp(jars_dir: Path = JARS_DIR) -> object:
    """The stamp the last build wrote beside the jars (None without one)."""
    try:
        return json.loads((jars_dir / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def project_jar() -> Path:
    """The jar of the classes :mod:`metastore.jvm.classes` names, but the file system's."""
    return _checked(PROJECT_JAR)


def file_system_jar() -> Path:
    """The jar of :data:`~metastore.jvm.classes.LOCAL_FILE_SYSTEM_CLASS` and its ``FileContext``
    twin."""
    return _checked(FILE_SYSTEM_JAR)


def _checked(name: str) -> Path:
    import pyspark

    return checked_jar(name, str(pyspark.__version__))


def checked_jar(name: str, spark_version: str, jars_dir: Path = JARS_DIR,
                module: Path = CHECKOUT_MODULE) -> Path:
    """The jar ``name`` of ``jars_dir``, built from ``module`` (when there is one) for
    ``spark_version``, or a :class:`JvmJarsError` saying how to build it."""
    jar = jars_dir / name
    if not jar.is_file():
        raise JvmJarsError("missing", str(jars_dir), f"no {name}; build them with {REBUILD}")
    if module.is_dir() and built_stamp(jars_dir) != module_stamp(spark_version, module):
        raise JvmJarsError("stale", str(jars_dir), f"built from other sources than {module} or for another "
                                    f"Spark than {spark_version}; rebuild them with {REBUILD}")
    return jar
