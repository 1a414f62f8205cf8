"""`realtime`: Spark 4.2's real-time mode against micro-batches, for a stateless query.

The filter of ``streams-peer`` written by hand in PySpark (the Kafka source, ``KEEP`` read from
the JSON value, the Kafka sink), in a session like a node's, run with the default micro-batch
trigger and then with ``trigger(realTime=...)``, each on ``local[2]`` and ``local[1]`` over a
topic of two partitions. Latency: 1,000 records at 200/s (500 at 100/s with ``--quick``), each
from its produce call to a consumer seeing it in the sink. A real-time query holds a task per
source partition for its whole batch duration: with fewer cores than partitions some
partitions are never read, which the ``seen`` count shows.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from integration.bench.common import kafka, summary_ms
from integration.bench.pipeline import PARTITIONS, SinkWatcher, produce_timed
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from metastore.spark.session import discard_session, start_session

TRIGGERS: dict[str, dict[str, Any]] = {
    "micro_batch": {},
    "real_time": {"realTime": "5 seconds"},
}
MASTERS = ("local[2]", "local[1]")


def _latency(bootstrap: str, master: str, trigger: dict[str, Any], records: int,
             rate: float) -> dict[str, Any]:
    source, sink = (f"realtime-{name}-{uuid.uuid4().hex[:6]}" for name in ("in", "out"))
    admin = Admin(KafkaSettings(bootstrap))
    for topic in (source, sink):
        admin.create(topic, PARTITIONS)
    with tempfile.TemporaryDirectory(prefix="metastore-bench-realtime-") as root:
        spark = start_session(master, "realtime-bench", Path(root))
        try:
            writer = (spark.readStream.format("kafka")
                      .option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
                      .option("startingOffsets", "earliest").load()
                      .selectExpr("key", "value")
                      .where("get_json_object(CAST(value AS STRING), '$.KEEP') = 'true'")
                      .writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                      .option("topic", sink).option("checkpointLocation", f"{root}/checkpoint")
                      .outputMode("update"))
            query = (writer.trigger(**trigger) if trigger else writer).start()
            time.sleep(10)  # its first batch planned and its tasks started
            watcher = SinkWatcher(bootstrap, sink)
            try:
                keys = range(records)
                sent = produce_timed(bootstrap, source, keys, rate)
                deadline = time.monotonic() + 30
                while len(watcher.first_seen) < records and time.monotonic() < deadline:
                    time.sleep(0.1)
                seen = {key: watcher.first_seen[key] - sent[key] for key in keys
                        if key in watcher.first_seen}
            finally:
                watcher.close()
            query.stop()
        finally:
            spark.stop()
            discard_session()  # the next run's master in a JVM of its own
    return {"seen": len(seen), "sent": records,
            "latency": summary_ms(list(seen.values())) if seen else None}


def run(quick: bool) -> dict[str, Any]:
    records, rate = (500, 100.0) if quick else (1_000, 200.0)
    results: dict[str, Any] = {"records": records, "rate_per_s": rate,
                               "source_partitions": PARTITIONS}
    with kafka() as bootstrap:
        for master in MASTERS:
            for name, trigger in TRIGGERS.items():
                print(f"realtime: {name} on {master}", file=sys.stderr, flush=True)
                results[f"{name}_{master}"] = _latency(bootstrap, master, trigger, records, rate)
    return results
