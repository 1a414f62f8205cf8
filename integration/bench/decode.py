"""`decode`: how fast the decoding every reader shares (:func:`metastore.spark.views.decode_select`)
turns JSON records into a source's columns, on one core.

1,000,000 JSON values (100,000 with ``--quick``) of a stream ``(ID BIGINT KEY, AMOUNT DOUBLE,
KEEP BOOLEAN, SENT BIGINT)``, cached in a local SparkSession, are decoded and filtered on ``KEEP``
three times; the best run counts. Twice: with fields named as the columns (``"AMOUNT"``, read
through one struct parse), and with lower-case fields (``"amount"``, the usual JSON, read through
the maps of ksqlDB's case-insensitive rule). Then the floor: the same values read by Spark's own
``from_json`` with the columns' types, as a hand-written job reads them, without ksqlDB's rules
(a field's JSON kind, a value its type refuses making the record unreadable, case-insensitive
names), which is what those rules cost.
"""

from __future__ import annotations

import time
from typing import Any

from metastore.jvm import jars as jvm_jars
from metastore.spark.session import JSON_READING
from metastore.spark.views import decode_select
from metastore.testing.check import run_script

STREAM = ("CREATE STREAM EVENTS (ID BIGINT KEY, AMOUNT DOUBLE, KEEP BOOLEAN, SENT BIGINT) "
          "WITH (KAFKA_TOPIC='events', VALUE_FORMAT='JSON', PARTITIONS=1);")
FIELDS = {"columns' names": ("ID", "AMOUNT", "KEEP", "SENT"),
          "lower-case names": ("id", "amount", "keep", "sent")}


def _records_sql(names: tuple[str, ...], count: int) -> str:
    id_, amount, keep, sent = names
    value = (f"to_json(named_struct('{id_}', id, '{amount}', id * 0.5, '{keep}', id % 2 = 0, "
             f"'{sent}', 0))")
    return f"SELECT CAST(NULL AS BINARY) AS key, CAST({value} AS BINARY) AS value FROM range({count})"


def run(quick: bool) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    count = 100_000 if quick else 1_000_000
    builder = (SparkSession.builder.master("local[1]").appName("bench-decode")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.ansi.enabled", "false")  # as a query's session
               .config("spark.jars", str(jvm_jars.project_jar())))
    for key, value in JSON_READING.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    _, image = run_script(STREAM)
    [source] = image.sources.values()
    figures: dict[str, Any] = {"records": count}
    floor = ("SELECT count(*) FROM (SELECT from_json(CAST(value AS STRING), 'AMOUNT DOUBLE, "
             "KEEP BOOLEAN, SENT BIGINT') AS v FROM raw) WHERE v.KEEP")
    for label, names, query in [
            *((label, names, f"SELECT count(*) FROM ({decode_select(source, 'raw')}) WHERE KEEP")
              for label, names in FIELDS.items()),
            ("Spark's from_json (the floor)", FIELDS["columns' names"], floor)]:
        spark.sql(_records_sql(names, count)).cache().createOrReplaceTempView("raw")
        spark.sql("SELECT count(*) FROM raw").collect()
        figures[label] = {"records_per_s": round(count / _best_seconds(spark, query, count))}
        spark.table("raw").unpersist()
        spark.catalog.dropTempView("raw")
    spark.stop()
    return figures


def _best_seconds(spark: Any, query: str, count: int) -> float:
    """The best of three runs of ``query``, which keeps half the ``count`` records."""
    seconds = []
    for _ in range(3):
        started = time.perf_counter()
        [(kept,)] = spark.sql(query).collect()
        seconds.append(time.perf_counter() - started)
        assert kept == count // 2, f"{kept} records kept of {count}"
    return min(seconds)
