"""`micro-batch`: what a streaming micro-batch costs on the node's local file system against
Hadoop's own, which forks ``chmod``, ``ls`` and ``readlink`` without its native library.

Each file system runs in a process of its own (a JVM reads ``fs.file.impl`` once): a local[1]
session like a node's runs a projection and a count into 5 groups of a 10 rows/s rate source,
500 ms triggers, with a checkpoint on local disk; the figures are the p50 of the micro-batches'
``triggerExecution`` after the first four, and the kernel's process creations per micro-batch
(``/proc/stat``: processes and threads alike).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HADOOPS_OWN = {"spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem",
               "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.LocalFs"}


def _forks() -> int:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("processes "):
            return int(line.split()[1])
    raise RuntimeError("no processes line in /proc/stat")


def measure(hadoops_own: bool, seconds: float) -> dict[str, Any]:
    """The two queries' micro-batches in this process's session."""
    from pyspark.sql import functions

    from metastore.spark.session import start_session

    spark = start_session("local[1]", "bench-micro-batch", Path(tempfile.mkdtemp()),
                          conf=HADOOPS_OWN if hadoops_own else None)
    results: dict[str, Any] = {}
    try:
        for kind in ("projection", "count"):
            frame = spark.readStream.format("rate").option("rowsPerSecond", 10).load()
            if kind == "count":
                frame = frame.groupBy((functions.col("value") % 5).alias("k")).count()
            query = (frame.writeStream.format("noop").outputMode("update")
                     .option("checkpointLocation", tempfile.mkdtemp())
                     .trigger(processingTime="500 milliseconds").start())
            time.sleep(4)
            forks, first = _forks(), query.lastProgress["batchId"]
            time.sleep(seconds)
            forks, last = _forks() - forks, query.lastProgress["batchId"]
            durations = [p["durationMs"]["triggerExecution"] for p in query.recentProgress
                         if p["batchId"] > 3]
            query.stop()
            results[kind] = {"micro_batches": len(durations),
                             "trigger_execution_p50_ms": statistics.median(durations),
                             "forks_per_micro_batch": round(forks / max(1, last - first), 1)}
    finally:
        spark.stop()
    return results


def run(quick: bool) -> dict[str, Any]:
    seconds = 6 if quick else 12
    results = {}
    for name, hadoops_own in (("hadoops_own", True), ("no_fork", False)):
        done = subprocess.run([sys.executable, "-m", "integration.bench.micro_batch",
                               json.dumps({"hadoops_own": hadoops_own, "seconds": seconds})],
                              capture_output=True, text=True, check=True)
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


if __name__ == "__main__":
    arguments = json.loads(sys.argv[1])
    print(json.dumps(measure(arguments["hadoops_own"], arguments["seconds"])))
