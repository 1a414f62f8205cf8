"""The node's SparkSession: the Kafka connector and protobuf-java jars and the project's Java jar
(the sink timestamp interceptor, the PROTOBUF_NOSR codec), quiet logs, UI off.

With ``persistent_catalog`` the session's catalog is Spark's Hive catalog in an embedded Derby
database under the node's data directory, so the streams and tables projected into it survive a
restart; otherwise it is Spark's in-memory catalog.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from metastore.local import jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def metastore_db(warehouse: Path) -> Path:
    """The Derby database that holds a persistent catalog."""
    return warehouse / "metastore_db"


def start_session(master: str, app_name: str, warehouse: Path, ui: bool = False,
                  persistent_catalog: bool = False) -> SparkSession:
    from pyspark.sql import SparkSession

    connector = [*jars.resolve(jars.spark_kafka_connector(), progress=None),
                 jars.project_jar(progress=None)]
    warehouse.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.jars", ",".join(str(j) for j in connector))
               .config("spark.ui.enabled", "true" if ui else "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.warehouse.dir", str(warehouse / "warehouse"))
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.mapKeyDedupPolicy", "LAST_WIN")  # JSON fields, as ksqlDB
               .config("spark.driver.extraJavaOptions",
                       f"-Dderby.system.home={warehouse} -Dlog4j2.level=ERROR "
                       f"-Dderby.stream.error.file={warehouse / 'derby.log'}"))
    if persistent_catalog:
        builder = (builder.config("spark.sql.catalogImplementation", "hive")
                   .config("spark.hadoop.hive.warehouse.subdir.inherit.perms", "false")
                   .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                           f"jdbc:derby:;databaseName={metastore_db(warehouse)};create=true"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
