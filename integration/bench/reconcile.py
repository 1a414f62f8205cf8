"""`reconcile`: Spark catalog calls and time to project N sources, from empty and from equal."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from integration.bench.common import source
from metastore.catalog.commands import CreateSourceCommand
from metastore.catalog.image import EMPTY_IMAGE, Delta
from metastore.spark.projection import SparkProjection
from metastore.spark.session import start_session


def run(quick: bool) -> dict[str, Any]:
    count = 200 if quick else 1_000
    delta = Delta(EMPTY_IMAGE)
    for index in range(count):
        delta.execute(CreateSourceCommand(source(index)), index)
    image = delta.apply()
    options = {"kafka.bootstrap.servers": "127.0.0.1:9"}  # objects are created, never read
    with tempfile.TemporaryDirectory(prefix="metastore-bench-spark-") as directory:
        started = time.perf_counter()
        spark = start_session("local[1]", "metastore-bench", Path(directory))
        session_seconds = time.perf_counter() - started
        database = f"bench_{time.time_ns()}"
        projection = SparkProjection(spark, database, options)
        empty = projection.reconcile(image)
        same_process = projection.reconcile(image)
        restarted = SparkProjection(spark, database, options).reconcile(image)
        changed_delta = Delta(image)
        changed_delta.execute(CreateSourceCommand(source(count + 1)), count + 1)
        one_more = projection.reconcile(changed_delta.apply())
        spark.stop()

    def row(result: Any) -> dict[str, Any]:
        return {"catalog_calls": result.catalog_calls, "seconds": round(result.seconds, 3),
                "created": result.created, "dropped": result.dropped}

    return {"sources": count, "spark_objects": 2 * count,
            "session_start_s": round(session_seconds, 2), "from_empty": row(empty),
            "equal_same_process": row(same_process), "equal_after_restart": row(restarted),
            "one_more_source": row(one_more)}
