"""The node's SparkSession: the Kafka connector and protobuf-java jars and the project's Java jar
(the sink timestamp interceptor, the PROTOBUF_NOSR codec, the stateful processors), quiet logs,
UI off in local mode. On a cluster master (``spark://``, ``yarn``, ``k8s://``) the same jars go to
the executors through ``spark.jars``, and the node is the application's driver.

With ``persistent_catalog`` the session's catalog is Spark's Hive catalog in an embedded Derby
database under the node's data directory, so the streams and tables projected into it survive a
restart; otherwise it is Spark's in-memory catalog.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metastore.dev import jars
from metastore.jvm import classes
from metastore.jvm import jars as jvm_jars
from metastore.kafka.java_security import SECRET_OPTIONS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log = logging.getLogger(__name__)


def metastore_db(warehouse: Path) -> Path:
    """The Derby database that holds a persistent catalog."""
    return warehouse / "metastore_db"


@dataclass(frozen=True)
class SparkApplication:
    """Where a session runs: its master, its application id and its UI (None when off)."""

    master: str
    application_id: str
    ui_url: str | None
    driver_pid: int | None = None
    """The process id of the driver JVM (this node launched it)."""

    @staticmethod
    def of(spark: SparkSession) -> SparkApplication:
        context = spark.sparkContext
        process = driver_process()
        return SparkApplication(str(context.master), context.applicationId, context.uiWebUrl,
                                process.pid if process is not None else None)

    def to_json(self) -> dict[str, str | int | None]:
        return {"master": self.master, "applicationId": self.application_id,
                "uiUrl": self.ui_url, "driverPid": self.driver_pid}


def is_local(master: str) -> bool:
    """Whether ``master`` runs the executors inside the driver (``local``, ``local[n]``...)."""
    return master == "local" or master.startswith("local[")


JSON_READING = {"spark.sql.mapKeyDedupPolicy": "LAST_WIN",
                "spark.sql.variant.allowDuplicateKeys": "true",
                f"spark.sql.catalog.{classes.SQL_FUNCTIONS_CATALOG}": classes.SQL_FUNCTIONS_CLASS}
"""How JSON objects are read as ksqlDB's JSON deserializer (Jackson) reads them: a record's
fields by the project's functions (:data:`~metastore.jvm.classes.JSON_FIELDS_FUNCTION`, and the
KAFKA format's numbers); in a STRUCT nested in a column, a field name repeated (in another case,
for the maps by upper-cased name) is the last one, where Spark fails the query on a repeated
key."""


def query_session(spark: SparkSession) -> SparkSession:
    """A query's own Spark session: ANSI mode off, so a bad value yields NULL as in ksqlDB (and
    an integer casts to its big-endian BINARY, as the sink encoding writes KAFKA integers)."""
    session = spark.newSession()
    session.conf.set("spark.sql.ansi.enabled", "false")
    for key, value in JSON_READING.items():  # {"a": 1, "A": 2}: the last one, as ksqlDB
        session.conf.set(key, value)
    session.conf.set("spark.sql.streaming.stopActiveRunOnRestart", "true")
    # one stream time over all the sources, as Kafka Streams' joins share theirs
    session.conf.set("spark.sql.streaming.multipleWatermarkPolicy", "max")
    return session


IDLE_POLLING = {"spark.sql.streaming.pollingDelay": "100ms"}
"""How long a streaming query that found no new records waits before it asks Kafka again.
Spark's 10 ms made each idle query cost 7.4% of a core (ten idle queries: 76%; at 100 ms: 28%,
``integration.bench idle-queries``); a query that had been idle sees its next record up to
100 ms later. ``--spark-conf spark.sql.streaming.pollingDelay=10ms`` buys that back."""


LOCAL_SOCKET_TIMEOUT_SECONDS = 120
"""How long the driver JVM and PySpark wait for each other when a job's rows are handed over on
a local socket (connect and authenticate, both ends): a node's pull queries, and every collect.
Spark's 15 s failed a collect on a machine whose two cores were busy with other JVMs; the rows
themselves are read with no timeout."""


MAX_RESULT_SIZE = "128m"
"""What one Spark job may hand the driver (a pull query's rows, a push query's micro-batch): an
eighth of the driver's heap, so that a job asking for more fails alone, with Spark's reason,
where Spark's default (1g, the whole heap) would let it take the JVM down; a node answers at
most four pull queries with Spark at once (``metastore.server.build.SPARK_PULL_SLOTS``)."""


CODE_CACHE_OPTION = "-XX:ReservedCodeCacheSize=512m"
"""The driver's code cache for the JIT: a node's driver compiles the classes Spark generates
for every query it runs, and in a long-lived driver JDK 17's default (240 MB) can fill; a
method handle intrinsic then has no room, and the thread that needs one fails with an
``InternalError`` (seen in Spark's RPC dispatcher, which stopped the SparkContext). Reserved,
not committed: memory is taken only as code is compiled."""


def start_session(master: str, app_name: str, warehouse: Path, ui: bool = False,
                  persistent_catalog: bool = False,
                  conf: Mapping[str, str] | None = None) -> SparkSession:
    """A session on ``master``, with ``conf`` over the defaults (``spark.driver.extraJavaOptions``
    after the node's own). On a cluster master the Spark UI is on unless ``conf`` turns it off:
    it is where a cluster's users watch the application; its kill buttons are off."""
    from pyspark.sql import SparkSession

    connector = [*jars.resolve(jars.spark_kafka_connector(), progress=None),
                 jvm_jars.project_jar()]
    warehouse.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_AUTH_SOCKET_TIMEOUT", str(LOCAL_SOCKET_TIMEOUT_SECONDS))
    driver_options = (f"-Dderby.system.home={warehouse} -Dlog4j2.level=ERROR "
                      f"-Dderby.stream.error.file={warehouse / 'derby.log'} {CODE_CACHE_OPTION}")
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.jars", ",".join(str(j) for j in connector))
               .config("spark.ui.enabled", "true" if ui or not is_local(master) else "false")
               .config("spark.ui.killEnabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.warehouse.dir", str(warehouse / "warehouse"))
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.driver.memory", "1g")
               .config("spark.driver.maxResultSize", MAX_RESULT_SIZE)
               .config("spark.python.authenticate.socketTimeout",
                       f"{LOCAL_SOCKET_TIMEOUT_SECONDS}s")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.redaction.options.regex", SECRET_OPTIONS)
               .config("spark.driver.extraJavaOptions", driver_options))
    for key, value in {**JSON_READING, **IDLE_POLLING}.items():
        builder = builder.config(key, value)
    if is_local(master):  # the local file system's permissions by NIO: Hadoop without its
        # native library forks chmod and ls for them, a few ms each, dozens a micro-batch; the
        # classes load with the JVM (spark-submit reads the file system before spark.jars)
        builder = (builder.config("spark.driver.extraClassPath",
                                  str(jvm_jars.file_system_jar()))
                   .config("spark.hadoop.fs.file.impl", classes.LOCAL_FILE_SYSTEM_CLASS)
                   .config("spark.hadoop.fs.AbstractFileSystem.file.impl", classes.LOCAL_FS_CLASS))
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


def driver_process() -> Any:
    """The ``Popen`` of the Spark driver JVM this process launched (None when there is none):
    PySpark keeps it on its gateway."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    return getattr(gateway, "proc", None) if gateway is not None else None


def kill_driver() -> None:
    """SIGKILL the driver JVM (one that stopped answering): every call into it then fails at
    once, where it would have waited for ever."""
    process = driver_process()
    if process is not None and process.poll() is None:
        process.kill()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            _log.error("the Spark driver JVM (pid %d) did not exit after SIGKILL", process.pid)


def discard_session() -> None:
    """Forget a session whose JVM is gone, so that :func:`start_session` launches a new JVM:
    PySpark keeps the one gateway, context and session of a process in class attributes, and
    would hand the dead ones out again."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    gateway = SparkContext._gateway
    kill_driver()
    SparkContext._active_spark_context = None
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    if gateway is not None:
        try:
            gateway.shutdown()  # its callback server and the connections to the dead JVM
        except Exception as error:  # the JVM is gone: nothing of it answers any more
            _log.debug("closing the old Spark gateway: %s", error)
