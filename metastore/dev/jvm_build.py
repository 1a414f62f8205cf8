"""Build the project's JVM module (``jvm/``) with Maven and put its jars where a node finds them
(``metastore/jars/``, :mod:`metastore.jvm.jars`), with the stamp of what they were built from.

The bootstrap runs it beside pip (``metastore.dev.prefetch``), with the module's JUnit tests for
the test command; ``metastore dev fetch`` runs it too. A build whose stamp is current is skipped,
unless its tests are asked for. Builds of several processes take turns (a lock file); a build that
fails leaves the previous jars in place.

Standard library only, as the prefetch that imports it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import TextIO

from metastore.dev import jars
from metastore.dev.exceptions import JavaBuildError
from metastore.jvm.jars import (
    CHECKOUT_MODULE,
    FILE_SYSTEM_JAR,
    JARS_DIR,
    PROJECT_JAR,
    STAMP,
    built_stamp,
    module_stamp,
)

BUILD_TIMEOUT_SECONDS = 1200
ERROR_LINES = 20


def build(spark_version: str, run_tests: bool = False,
          progress: TextIO | None = sys.stderr) -> Path:
    """The project's jar, built by ``mvn package`` for ``spark_version`` when the module's sources
    changed since the last build (always with ``run_tests``, which runs the JUnit tests too)."""
    if not CHECKOUT_MODULE.is_dir():  # an installed package: its jars came with it
        return JARS_DIR / PROJECT_JAR
    stamp = module_stamp(spark_version)
    JARS_DIR.mkdir(parents=True, exist_ok=True)
    with (JARS_DIR / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if built_stamp() == stamp and (JARS_DIR / PROJECT_JAR).is_file() and not run_tests:
            return JARS_DIR / PROJECT_JAR
        if progress is not None:
            print("Building the project's JVM classes with Maven" +
                  (" and running their tests" if run_tests else "") + "...",
                  file=progress, flush=True)
        _maven_package(spark_version, run_tests)
        target = CHECKOUT_MODULE / "target"
        for name in (PROJECT_JAR, FILE_SYSTEM_JAR):
            staged = JARS_DIR / f".{name}.partial"
            shutil.copyfile(target / name, staged)
            os.replace(staged, JARS_DIR / name)
        (JARS_DIR / STAMP).write_text(json.dumps(stamp), encoding="utf-8")
    return JARS_DIR / PROJECT_JAR


def _maven_package(spark_version: str, run_tests: bool) -> None:
    mvn = jars.require_tool("mvn", "Install Apache Maven 3.8+ (Debian: apt-get install maven).")
    jars.require_tool("javac", "Install a Java 17+ JDK (Debian: apt-get install openjdk-17-jdk).")
    settings = resources.files("metastore.dev").joinpath("poms", "maven-settings.xml")
    with resources.as_file(settings) as settings_path:
        command = [mvn, "-B", "-q", "-f", str(CHECKOUT_MODULE / "pom.xml"), "-gs",
                   str(settings_path), "package", f"-Dspark.version={spark_version}",
                   *([] if run_tests else ["-DskipTests"])]
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False,
                                  timeout=BUILD_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired as error:
            raise JavaBuildError(f"mvn did not finish within {BUILD_TIMEOUT_SECONDS} s") from error
    if done.returncode != 0:
        output = (done.stdout + done.stderr).splitlines()
        errors = [line for line in output if "ERROR" in line or "FAIL" in line]
        raise JavaBuildError("\n".join((errors or output)[:ERROR_LINES])
                             or f"mvn exited {done.returncode}")
