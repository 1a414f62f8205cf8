"""A node's Spark settings: the master, and the ``spark.*`` settings of its application; the
local standalone cluster's recorded state and how it sizes each node's application."""

from __future__ import annotations

from pathlib import Path

import pytest

from metastore.dev.spark_cluster import LocalSparkCluster, SparkClusterState, SparkDaemon
from metastore.dev.stack import spark_node_args
from metastore.server.settings import SettingsError, server_settings
from metastore.spark.session import is_local

BASE = {"bootstrap_servers": "k:9092"}


def test_spark_conf_reaches_the_spark_settings() -> None:
    spark = server_settings({**BASE, "spark_master": "spark://m:7077", "spark_conf": {
        "spark.executor.memory": "2g", "spark.cores.max": 4}}).spark
    assert spark is not None and spark.master == "spark://m:7077"
    assert spark.conf == {"spark.executor.memory": "2g", "spark.cores.max": "4"}
    default = server_settings(BASE).spark
    assert default is not None and default.master == "local[1]" and default.conf == {}


@pytest.mark.parametrize("key", ["executor.memory", "spark.master", "spark.jars",
                                 "spark.sql.catalogImplementation", "spark.sql.session.timeZone",
                                 "spark.sql.catalog.metastore_functions"])
def test_a_setting_the_node_owns_or_not_sparks_is_refused(key: str) -> None:
    with pytest.raises(SettingsError, match="spark_conf"):
        server_settings({**BASE, "spark_conf": {key: "x"}})


def test_local_masters_run_executors_in_the_driver() -> None:
    assert is_local("local") and is_local("local[2]") and is_local("local[*]")
    assert not (is_local("spark://127.0.0.1:7077") or is_local("yarn")
                or is_local("k8s://https://api:6443"))


def test_cluster_state_round_trips_and_sizes_a_node_for_every_worker(tmp_path: Path) -> None:
    state = SparkClusterState(SparkDaemon("master", 7077, 8080, 11),
                              (SparkDaemon("worker-1", 7101, 8101, 12),
                               SparkDaemon("worker-2", 7102, 8102, 13)), 3, 1536)
    assert SparkClusterState.from_json(state.to_json()) == state
    assert state.master_url == "spark://127.0.0.1:7077"
    conf = state.node_spark_conf()
    assert (conf["spark.cores.max"], conf["spark.executor.cores"]) == ("2", "1")
    args = spark_node_args(state)
    assert args[:2] == ("--spark-master", "spark://127.0.0.1:7077")
    assert "spark.driver.host=127.0.0.1" in args
    settings = server_settings({**BASE, "spark_master": args[1], "spark_conf": dict(
        pair.split("=", 1) for pair in args[3::2])})
    assert settings.spark is not None and settings.spark.conf == conf, "nodes accept them"
    with pytest.raises(ValueError):
        LocalSparkCluster(tmp_path, workers=0)
    assert LocalSparkCluster(tmp_path).state() is None and LocalSparkCluster(tmp_path).stop() == 0


def test_spark_conf_from_toml_nested_tables_is_flattened() -> None:
    import tomllib

    table = tomllib.loads('[spark_conf]\nspark.executor.memory = "1g"\n'
                          '"spark.cores.max" = 2\n')["spark_conf"]
    spark = server_settings({**BASE, "spark_conf": table}).spark
    assert spark is not None
    assert spark.conf == {"spark.executor.memory": "1g", "spark.cores.max": "2"}


@pytest.mark.parametrize(("root", "uri"), [
    ("hdfs://namenode:8020/checkpoints", True), ("s3a://bucket/x", True), ("file:/tmp/x", True),
    ("hdfs:/checkpoints", True), ("/var/lib/metastore/q", False), ("relative/dir", False)])
def test_a_checkpoint_root_is_a_uri_when_it_has_a_scheme(root: str, uri: bool) -> None:
    from metastore.runtime.checkpoints import LocalRoot, checkpoint_root, is_uri

    assert is_uri(root) == uri
    if not uri:
        local = checkpoint_root(root)
        assert isinstance(local, LocalRoot)
        assert local.query("q").location == (Path(root).resolve() / "q").as_uri(), (
            "Spark gets a file: URI, never a path its default file system would resolve")
    else:
        with pytest.raises(ValueError, match="needs Spark"):
            checkpoint_root(root)


def test_a_nodes_kafka_settings_reach_spark_under_the_java_clients_names() -> None:
    from metastore.kafka.settings import KafkaSettings
    from metastore.spark.views import query_read_options, raw_options, spark_kafka_options

    plain = spark_kafka_options(KafkaSettings("k:9092"))
    assert plain == {"kafka.bootstrap.servers": "k:9092"}
    # the node's [kafka] settings are librdkafka's: its fetch.wait.max.ms is Java's fetch.max.wait.ms
    tuned = spark_kafka_options(KafkaSettings("k:9092", {"fetch.wait.max.ms": "250",
                                                         "security.protocol": "SSL"}))
    assert tuned == {"kafka.bootstrap.servers": "k:9092", "kafka.fetch.max.wait.ms": "250",
                     "kafka.security.protocol": "SSL"}
    assert raw_options("t", tuned)["kafka.fetch.max.wait.ms"] == "250"
    assert query_read_options("t", tuned)["kafka.fetch.max.wait.ms"] == "250"
    assert query_read_options("t", plain)["kafka.fetch.max.wait.ms"] == "10", "a micro-batch's"
    assert "kafka.fetch.max.wait.ms" not in raw_options("t", plain), "the catalog's specs"


class _Recorded:
    """A stand-in for Spark's reader and frame: the options of each read, by view."""

    def __init__(self, reads: dict[str, dict[str, str]]) -> None:
        self.reads = reads
        self.options_given: dict[str, str] = {}

    def format(self, _name: str) -> _Recorded:
        return self

    def options(self, **options: str) -> _Recorded:
        self.options_given = options
        return self

    def load(self) -> _Recorded:
        return self

    def createOrReplaceTempView(self, view: str) -> None:  # noqa: N802 - Spark's name
        self.reads[view] = self.options_given


def test_a_querys_reads_take_the_raw_tables_options_its_fetch_wait_then_their_own() -> None:
    from types import SimpleNamespace

    from metastore.planner.steps import Step
    from metastore.runtime.job import _register
    from metastore.spark.views import query_read_options

    reads: dict[str, dict[str, str]] = {}
    session = SimpleNamespace(readStream=_Recorded(reads), read=_Recorded(reads))
    kafka = {"kafka.bootstrap.servers": "k:9092"}
    _register(session, (Step("LIVE", topic="a"), Step("HISTORY", topic="b", streaming=False),  # type: ignore[arg-type]
                        Step("FIRST", topic="c", from_start=True)),
              kafka, ends={"b": {"0": 5}}, reads={"startingOffsets": "latest"})
    assert reads["LIVE"] == {**query_read_options("a", kafka), "startingOffsets": "latest"}
    assert reads["HISTORY"] == {**query_read_options("b", kafka),
                                "endingOffsets": '{"b": {"0": 5}}'}
    assert reads["FIRST"] == query_read_options("c", kafka)
