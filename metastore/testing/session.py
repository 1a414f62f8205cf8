"""A whole ``metastore test`` run: Kafka, one SparkSession, every test in order, one report.

Kafka is the given bootstrap servers, else ``KAFKA_BOOTSTRAP_SERVERS``, else the local broker
``metastore dev kafka start`` runs (started when it is not running). When a test names a Schema
Registry format, the registry is the given URL, else ``METASTORE_SCHEMA_REGISTRY_URL``, else the
local one ``metastore dev up --schema-registry`` runs (started when it is not running). Spark is
a local session (``local[2]`` unless told otherwise) with the project's connector jars, started
once per run.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

from metastore.kafka.settings import KafkaSettings
from metastore.testing.cases import QueryTest
from metastore.testing.runner import PASSED, CaseResult, QueryTestRunner

_REGISTRY_FORMAT = re.compile(r"\b(AVRO|PROTOBUF|JSON_SR)\b", re.IGNORECASE)

SHUFFLE_PARTITIONS = "1"
"""The partitions of a test's queries' shuffles and state (a node's have 4). A test has a few
records, and each partition of each stateful step is a task that loads and commits its state at
every micro-batch, whatever it holds: one task does it once. The records of
each key, and their order, do not depend on it (state is keyed, a sink partitions by key); with
one task a stateful step's output also keeps its input's order across keys, which four tasks
interleave, and which the verdict does not compare."""


@dataclass
class RunReport:
    run_id: str = field(default_factory=lambda: f"{int(time.time()):x}{uuid.uuid4().hex[:4]}")
    """Names the run's topics: ``qtt-<run id>-<case>-<topic>``, deleted when the case ends."""
    results: list[CaseResult] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(r.status == PASSED for r in self.results)

    def to_json(self) -> dict[str, object]:
        return {"runId": self.run_id, "cases": [r.to_json() for r in self.results],
                "passed": self.passed, "total": len(self.results)}


def kafka_bootstrap(given: str | None) -> str:
    """The bootstrap servers to test against; starts the local broker when none is given."""
    if given:
        return given
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        return external
    from metastore.dev.stack import ensure_kafka

    return ensure_kafka()


def schema_registry_url(given: str | None, tests: Sequence[QueryTest]) -> str | None:
    """The Schema Registry to test against: the one given, else (when a test needs one)
    METASTORE_SCHEMA_REGISTRY_URL or the local registry, started if needed."""
    if given:
        return given
    if not any(needs_schema_registry(test) for test in tests):
        return None
    from metastore.dev.stack import ensure_schema_registry

    return ensure_schema_registry()


def needs_schema_registry(test: QueryTest) -> bool:
    """Whether a test's statements name a format whose records the registry describes."""
    return _REGISTRY_FORMAT.search(test.script) is not None or any(
        t.key_schema is not None or t.value_schema is not None for t in test.topics)


def run_tests(tests: Sequence[QueryTest], bootstrap_servers: str,
              on_result: Callable[[int, int, CaseResult], None] | None = None,
              spark_master: str = "local[2]", query_timeout: float = 120.0,
              work_dir: Path | None = None, registry_url: str | None = None,
              parallel: int = 1, kafka_client: Mapping[str, str] | None = None) -> RunReport:
    """Run ``tests`` on one SparkSession, ``parallel`` at a time (each on runners of its own:
    its own topics, producer and query sessions), reported in the order given;
    ``kafka_client``: the Kafka settings (librdkafka's names: SASL, TLS) besides the bootstrap
    servers, which the Spark queries and the JVM producer take in Java's."""
    from metastore.spark.avro import registry_conf
    from metastore.spark.session import start_session

    root = work_dir or Path(tempfile.mkdtemp(prefix="metastore-test-"))
    report = RunReport()
    try:
        conf = {"spark.sql.shuffle.partitions": SHUFFLE_PARTITIONS,
                **(registry_conf(registry_url) if registry_url else {})}
        spark = start_session(spark_master, "metastore-test", root / "spark", conf=conf)
        try:
            spark.sparkContext.setLogLevel("OFF")  # a query's failure is the test's result
            for logger in ("SQLQueryContextLogger", "pyspark"):
                logging.getLogger(logger).setLevel(logging.CRITICAL)

            def runner(lane: int) -> QueryTestRunner:
                return QueryTestRunner(spark, KafkaSettings(bootstrap_servers,
                                                            dict(kafka_client or {})),
                                       root / "queries", run_id=f"{report.run_id}{lane or ''}",
                                       query_timeout=query_timeout, registry_url=registry_url)

            report.results.extend(_run_lanes(tests, runner, max(1, parallel), on_result))
        finally:
            spark.stop()
    finally:
        if work_dir is None:
            shutil.rmtree(root, ignore_errors=True)
    return report


def _run_lanes(tests: Sequence[QueryTest], runner: Callable[[int], QueryTestRunner],
               lanes: int, on_result: Callable[[int, int, CaseResult], None] | None
               ) -> list[CaseResult]:
    """Each test's result, in order: ``lanes`` threads take the next test in turn."""
    results: list[CaseResult | None] = [None] * len(tests)
    order = iter(range(len(tests)))
    lock = threading.Lock()
    done = 0

    def lane(number: int) -> None:
        nonlocal done
        own = runner(number)
        try:
            while True:
                with lock:
                    index = next(order, None)
                if index is None:
                    return
                result = own.run(tests[index])
                with lock:
                    results[index] = result
                    done += 1
                    if on_result is not None:
                        on_result(done, len(tests), result)
        finally:
            own.close()

    with futures.ThreadPoolExecutor(lanes, thread_name_prefix="metastore-test") as pool:
        for finished in [pool.submit(lane, number) for number in range(lanes)]:
            finished.result()
    return [result for result in results if result is not None]
