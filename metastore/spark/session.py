"""The node's SparkSession: the Kafka connector and protobuf-java jars and the project's Java jar
(the sink timestamp interceptor, the PROTOBUF_NOSR codec, the stateful processors), quiet logs,
UI off in local mode. On a cluster master (``spark://``, ``yarn``, ``k8s://``) the same jars go to
the executors through ``spark.jars``, and the node is the application's driver.

With ``persistent_catalog`` the session's catalog is Spark's Hive catalog in an embedded Derby
database under the node's data directory, so the streams and tables projected into it survive a
restart; otherwise it is Spark's in-memory catalog.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from metastore.local import jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def metastore_db(warehouse: Path) -> Path:
    """The Derby database that holds a persistent catalog."""
    return warehouse / "metastore_db"


@dataclass(frozen=True)
class SparkApplication:
    """Where a session runs: its master, its application id and its UI (None when off)."""

    master: str
    application_id: str
    ui_url: str | None

    @staticmethod
    def of(spark: SparkSession) -> SparkApplication:
        context = spark.sparkContext
        return SparkApplication(str(context.master), context.applicationId, context.uiWebUrl)

    def to_json(self) -> dict[str, str | None]:
        return {"master": self.master, "applicationId": self.application_id,
                "uiUrl": self.ui_url}


def is_local(master: str) -> bool:
    """Whether ``master`` runs the executors inside the driver (``local``, ``local[n]``...)."""
    return master == "local" or master.startswith("local[")


JSON_READING = {"spark.sql.mapKeyDedupPolicy": "LAST_WIN",
                "spark.sql.variant.allowDuplicateKeys": "true"}
"""How JSON objects are read as ksqlDB's JSON deserializer (Jackson) reads them: a field name
repeated (in another case, for the maps by upper-cased name) is the last one, where Spark fails
the query on a repeated key."""


def start_session(master: str, app_name: str, warehouse: Path, ui: bool = False,
                  persistent_catalog: bool = False,
                  conf: Mapping[str, str] | None = None) -> SparkSession:
    """A session on ``master``, with ``conf`` over the defaults (``spark.driver.extraJavaOptions``
    after the node's own). On a cluster master the Spark UI is on unless ``conf`` turns it off:
    it is where a cluster's users watch the application; its kill buttons are off."""
    from pyspark.sql import SparkSession

    connector = [*jars.resolve(jars.spark_kafka_connector(), progress=None),
                 jars.project_jar(progress=None)]
    warehouse.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    driver_options = (f"-Dderby.system.home={warehouse} -Dlog4j2.level=ERROR "
                      f"-Dderby.stream.error.file={warehouse / 'derby.log'}")
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.jars", ",".join(str(j) for j in connector))
               .config("spark.ui.enabled", "true" if ui or not is_local(master) else "false")
               .config("spark.ui.killEnabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.warehouse.dir", str(warehouse / "warehouse"))
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.extraJavaOptions", driver_options))
    for key, value in JSON_READING.items():
        builder = builder.config(key, value)
    if is_local(master):  # the local file system's permissions by NIO: Hadoop without its
        # native library forks chmod and ls for them, a few ms each, dozens a micro-batch; the
        # classes load with the JVM (spark-submit reads the file system before spark.jars)
        builder = (builder.config("spark.driver.extraClassPath",
                                  str(jars.file_system_jar(progress=None)))
                   .config("spark.hadoop.fs.file.impl", jars.LOCAL_FILE_SYSTEM_CLASS)
                   .config("spark.hadoop.fs.AbstractFileSystem.file.impl", jars.LOCAL_FS_CLASS))
    if persistent_catalog:
        builder = (builder.config("spark.sql.catalogImplementation", "hive")
                   .config("spark.hadoop.hive.warehouse.subdir.inherit.perms", "false")
                   .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                           f"jdbc:derby:;databaseName={metastore_db(warehouse)};create=true"))
    for key, value in (conf or {}).items():
        own = driver_options if key == "spark.driver.extraJavaOptions" else None
        builder = builder.config(key, f"{own} {value}" if own else value)  # the user's after
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
