"""What a first run fetches from Maven Central while pip installs the project: the Kafka
broker's and the Spark connector's jars, the project's own JVM jars (built from ``jvm/``, with
their tests on request), and on request the local Schema Registry and the Kafka Connect worker.

Standard library only (with the rest of ``metastore.dev``'s launchers it needs), so that the
bootstrap can run it with the system Python beside ``pip install``:
``python3 -m metastore.dev.prefetch [--schema-registry] [--connect] [--jvm-tests]``. Each step
prints what it did and how long it took; a step already done costs a file read.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from metastore.dev import jars, jvm_build
from metastore.dev.exceptions import LocalInfraError

Step = tuple[str, Callable[[], object]]


def steps(spark_version: str | None, jvm_tests: bool = False) -> list[Step]:
    """The jars every run needs, in order: one Maven at a time (a local repository is not safe
    for two). The project's own are built for ``spark_version`` (default: the pyspark
    installed), with their JUnit tests when ``jvm_tests``."""
    return [
        ("the Kafka broker jars", lambda: jars.resolve(jars.kafka_broker(), progress=None)),
        ("the Spark connector jars", lambda: jars.resolve(
            jars.spark_kafka_connector(spark_version), progress=None)),
        ("the project's JVM classes" + (" and their tests" if jvm_tests else ""),
         lambda: jvm_build.build(spark_version or installed_spark_version(), jvm_tests,
                                 progress=None)),
    ]


def installed_spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def schema_registry_step() -> Step:
    """The optional local Schema Registry (about 210 MB from Maven Central, a few minutes)."""
    from metastore.dev import schema_registry as registry

    return ("the local Schema Registry", lambda: registry.build(progress=None))


def connect_step() -> Step:
    """The optional Kafka Connect worker's jars and its plugins (about 45 MB)."""
    from metastore.dev import connect_worker

    return ("the Kafka Connect worker and its plugins",
            lambda: connect_worker.resolve(progress=None))


def run(listed: list[Step], say: Callable[[str], None]) -> None:
    for name, step in listed:
        started = time.monotonic()
        step()
        say(f"{name}: ready in {time.monotonic() - started:.0f}s")


CHECKOUT_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def pinned_spark_version(pyproject: Path = CHECKOUT_PYPROJECT) -> str | None:
    """The pyspark version the checkout's pyproject.toml pins (``pyspark==X``); None without
    one (an installed package: the jars then follow the pyspark installed)."""
    if not pyproject.is_file():
        return None
    for line in pyproject.read_text(encoding="utf-8").splitlines():
        text = line.strip().strip('",')
        if text.startswith("pyspark=="):
            return text.removeprefix("pyspark==").strip()
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spark-version", default=pinned_spark_version(),
                        help="the pyspark release whose Kafka connector to fetch (default: the "
                             "one pyproject.toml pins)")
    parser.add_argument("--schema-registry", action="store_true",
                        help="also build the local Schema Registry")
    parser.add_argument("--connect", action="store_true",
                        help="also resolve the Kafka Connect worker's jars and plugins")
    parser.add_argument("--jvm-tests", action="store_true",
                        help="run the JVM module's JUnit tests as its jars are built")
    args = parser.parse_args(argv)
    try:
        optional = [*([schema_registry_step()] if args.schema_registry else []),
                    *([connect_step()] if args.connect else [])]
        run([*steps(args.spark_version, args.jvm_tests), *optional],
            lambda line: print(f"[fetch] {line}", flush=True))
    except LocalInfraError as error:
        print(f"[fetch] {error}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
