"""The floor of the `pipeline` benchmark: its queries written by hand in PySpark.

Run as ``python -m integration.bench.pipeline_floor BOOTSTRAP CHECKPOINTS``: one Spark
session like a node's (:func:`metastore.spark.session.start_session`, ``local[1]``, the same
Kafka connector), so its queries, like a node's, share one JVM. Each line on stdin,
``filter SOURCE SINK`` or ``count SOURCE SINK``, starts that query over the source topic as a
Spark user would write it (from its first offset, read_committed: ``from_json`` of the value,
the filter or the count per key, ``to_json`` of the result, into the sink topic) and answers
``started``; ``stop`` stops the running query and answers ``stopped``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from metastore.spark.session import start_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

VALUE_SCHEMA = "AMOUNT DOUBLE, KEEP BOOLEAN, SENT BIGINT"


def start(spark: SparkSession, query: str, bootstrap: str, source: str, sink: str,
          checkpoint: Path) -> StreamingQuery:
    from pyspark.sql import functions as f

    records = (spark.readStream.format("kafka")
               .option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
               .option("startingOffsets", "earliest")
               .option("kafka.isolation.level", "read_committed").load())
    rows = records.select("key", f.from_json(f.col("value").cast("string"),
                                             VALUE_SCHEMA).alias("v"))
    if query == "filter":
        out = rows.where("v.KEEP").select(
            "key", f.to_json(f.struct("v.AMOUNT", "v.SENT")).alias("value"))
        mode = "append"
    else:
        out = rows.groupBy("key").count().select(
            "key", f.to_json(f.struct(f.col("count").alias("N"))).alias("value"))
        mode = "update"
    return (out.writeStream.format("kafka").outputMode(mode)
            .option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
            .option("checkpointLocation", str(checkpoint)).start())


def main(bootstrap: str, checkpoints: str) -> None:
    with tempfile.TemporaryDirectory(prefix="metastore-floor-") as warehouse:
        spark = start_session("local[1]", "pipeline-floor", Path(warehouse))
        running: StreamingQuery | None = None
        print("ready", flush=True)
        for line in sys.stdin:
            command = line.split()
            if command == ["stop"] and running is not None:
                running.stop()
                running = None
                print("stopped", flush=True)
            elif len(command) == 3:
                query, source, sink = command
                running = start(spark, query, bootstrap, source, sink,
                                Path(checkpoints) / sink)
                print("started", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
