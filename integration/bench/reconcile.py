"""`reconcile`: Spark catalog calls and time to project N sources, from empty and from equal.

Each case runs in a child process of its own, because a JVM holds one kind of Spark catalog:
the in-memory one, and the persistent one (Hive over Derby in a data directory), which is
measured twice: from empty, then in a new process over the same directory (a restart).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from integration.bench.common import source
from metastore.catalog.commands import CreateSourceCommand
from metastore.catalog.image import EMPTY_IMAGE, Delta, Image
from metastore.spark.catalog_state import CatalogStateFile
from metastore.spark.projection import ReconcileResult, SparkProjection
from metastore.spark.session import metastore_db, start_session

DATABASE = "bench"


def image_of(count: int) -> Image:
    delta = Delta(EMPTY_IMAGE)
    for index in range(count):
        delta.execute(CreateSourceCommand(source(index)), index)
    return delta.apply()


def _row(result: ReconcileResult) -> dict[str, Any]:
    return {"catalog_calls": result.catalog_calls, "seconds": round(result.seconds, 3),
            "created": result.created, "dropped": result.dropped}


def measure(catalog: str, directory: Path, count: int) -> dict[str, Any]:
    """One process: start Spark, reconcile the image twice, then one source more."""
    image = image_of(count)
    options = {"kafka.bootstrap.servers": "127.0.0.1:9"}  # objects are created, never read
    persistent = catalog == "persistent"
    started = time.perf_counter()
    spark = start_session("local[1]", "metastore-bench", directory, persistent_catalog=persistent)
    session_seconds = time.perf_counter() - started
    state = CatalogStateFile(directory / "catalog-state.json", metastore_db(directory),
                             DATABASE) if persistent else None
    projection = SparkProjection(spark, DATABASE, options, state)
    first = projection.reconcile(image)
    same_process = projection.reconcile(image)
    new_projection = SparkProjection(spark, DATABASE, options).reconcile(image)
    changed = Delta(image)
    changed.execute(CreateSourceCommand(source(count + 1)), count + 1)
    latest = SparkProjection(spark, DATABASE, options, state)
    one_more = latest.reconcile(changed.apply())
    one_less = latest.reconcile(image)  # leaves the catalog equal to the image, for a restart
    spark.stop()
    return {"session_start_s": round(session_seconds, 2), "first": _row(first),
            "equal_same_process": _row(same_process),
            "equal_new_projection_reading_spark": _row(new_projection),
            "one_more_source": _row(one_more), "one_source_less": _row(one_less)}


def _child(catalog: str, directory: Path, count: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "integration.bench.reconcile", catalog,
                           str(directory), str(count)], capture_output=True, text=True,
                          check=True, timeout=3600)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def run(quick: bool) -> dict[str, Any]:
    count = 200 if quick else 1_000
    results: dict[str, Any] = {"sources": count, "spark_objects": 2 * count}
    with tempfile.TemporaryDirectory(prefix="metastore-bench-spark-") as root:
        results["in_memory"] = _child("in-memory", Path(root) / "memory", count)
        persistent = Path(root) / "persistent"
        results["persistent_from_empty"] = _child("persistent", persistent, count)
        results["persistent_restart"] = _child("persistent", persistent, count)
    return results


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))))
