"""The composition root: a node process built in one place, started and stopped in one order.

:func:`build` turns :class:`~metastore.server.settings.ServerSettings` into the node's services, each
given its collaborators through its constructor: the Kafka clients, the command-log node (replica,
writer, checkpoints), with Spark the catalog projection and the persistent-query runner, the
membership heartbeats, and the REST app. :meth:`NodeServices.start` starts them in dependency
order and :meth:`NodeServices.stop` stops them in reverse; :func:`serve` starts them while it
loads the HTTP stack and builds the REST app, then runs the app on hypercorn (HTTP/1.1 and
HTTP/2) until SIGTERM or SIGINT (:class:`ShutdownSignals`: later ones are ignored while the node
stops).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from metastore.catalog.image import Image
from metastore.cluster.membership import Membership
from metastore.core.exceptions import MetastoreError
from metastore.engine.overrides import ConfigOverrides
from metastore.functions import extensions
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from metastore.log.reader import NodeState
from metastore.server.http.auth import BasicAuth
from metastore.server.http.forwarding import WriteForwarder
from metastore.server.node import Explainer, Node, NodeConfig
from metastore.server.peer_certificates import CertificateUsers
from metastore.server.peer_certificates import install as install_tls_extension
from metastore.server.settings import ServerSettings, SparkSettings
from metastore.server.tls import (
    RELOAD_CHECK_SECONDS,
    CertificateWatch,
    TlsSettings,
    client_verify,
    server_context,
)

if TYPE_CHECKING:
    from fastapi import FastAPI
    from hypercorn.config import Config
    from hypercorn.typing import ASGIFramework
    from pyspark.sql import SparkSession

    from metastore.runtime.assignment import Partitions, QueryAssignment
    from metastore.runtime.materialized import TableStores
    from metastore.runtime.processing_log import ProcessingLog
    from metastore.runtime.push import PushQueries
    from metastore.runtime.runner import QueryRunner
    from metastore.spark.liveness import SparkLiveness
    from metastore.spark.projection import ProjectionRunner

log = logging.getLogger("metastore")
SHUTDOWN_GRACE_SECONDS = 5.0
"""How long open connections (push queries among them) may take to finish once a node stops."""
SPARK_PULL_SLOTS = 4
"""Pull queries a node's Spark answers at once (the others wait, up to their time): with each
job's results bounded by ``spark.driver.maxResultSize``, they hold half the driver's heap at
most."""
READY_POLL_SECONDS = 0.5
"""How often a wait for the node's READY looks whether the node is stopping."""
PROCESSING_LOG_STOP_SECONDS = 15.0
"""How long a stopping node waits for its processing log's creation to end."""
PROJECTION_PATIENCE = 10.0
"""Seconds a pull query waits for the Spark catalog to hold the sources it reads."""

_Loaded = TypeVar("_Loaded")
PullQuery = Callable[[str, ConfigOverrides], Any]
"""Runs a pull query's text, answering ksqlDB's /query entities."""


class ServeError(MetastoreError):
    """The node could not start serving (Kafka unreachable, a port in use, a bad auth file)."""

    code = "serve_error"


@dataclass
class NodeServices:
    """A node's parts, as :func:`build` wired them."""

    settings: ServerSettings
    node: Node
    membership: Membership
    projection: ProjectionRunner | None = None
    queries: QueryRunner | None = None
    push_queries: PushQueries | None = None
    table_stores: TableStores | None = None
    forwarder: WriteForwarder | None = None
    pull_query: PullQuery | None = None
    auth: BasicAuth | None = None
    liveness: SparkLiveness | None = None
    processing_log: ProcessingLog | None = None
    _stopping: threading.Event = field(default_factory=threading.Event, init=False,
                                       repr=False, compare=False)
    _log_creation: threading.Thread | None = field(default=None, init=False, repr=False,
                                                   compare=False)

    @cached_property
    def certificates(self) -> CertificateUsers | None:
        """The client certificates' users, when the node knows its users by them."""
        rules = self.settings.certificate_users
        return None if rules is None else CertificateUsers(rules)

    @cached_property
    def app(self) -> FastAPI:
        """The REST app over these services, built (and FastAPI imported) when first asked for:
        :func:`serve` builds it while the node starts."""
        from metastore.server.http.app import create_app

        return create_app(self.node, auth=self.auth, url=self.settings.url,
                          certificates=self.certificates,
                          membership=self.membership, query_runner=self.pull_query,
                          limits=self.settings.http, push_queries=self.push_queries,
                          table_stores=self.table_stores, forwarder=self.forwarder,
                          headless=str(self.settings.queries_file)
                          if self.settings.queries_file is not None else None)

    def start(self) -> None:
        """Check Kafka and the command topic, replay, then project, run queries, heartbeat, and
        create the processing log's topic, then its stream once the node is READY, beside its
        serving; in headless mode, once the node is READY, create the processing log, then
        write the queries file, which may read it (the node does not start when it cannot)."""
        self.node.start()
        self.membership.start()
        if self.liveness is not None:
            self.liveness.start()
        if self.settings.queries_file is not None:
            self._start_headless(self.settings.queries_file)
            return
        self._create_processing_log_topic()
        if self.settings.processing_log.stream_auto_create:
            self._log_creation = threading.Thread(target=self._create_processing_log_stream,
                                                  name="processing-log", daemon=True)
            self._log_creation.start()

    def _start_headless(self, queries_file: Path) -> None:
        """Once the node is READY (else it does not start), the processing log, then the
        queries file, which may read it."""
        from metastore.server.headless import run_queries_file

        def processing_log() -> None:
            self._create_processing_log_topic()
            if self.settings.processing_log.stream_auto_create:
                self._create_processing_log_stream()

        run_queries_file(self.node, queries_file, ready=self._ready_or_stopping,
                         before=processing_log)

    def _create_processing_log_topic(self) -> None:
        """The processing log's topic, when the settings say to create it, as ksqlDB's server
        does at its start; a failure is logged, not fatal: the node serves."""
        settings = self.settings.processing_log
        topic = settings.topic(self.settings.node.service_id)
        if not settings.topic_auto_create:
            return
        try:
            if self.node.admin.create(topic, settings.topic_partitions,
                                      settings.topic_replication_factor):
                log.info("processing log topic %s created", topic)
        except Exception as error:  # as ksqlDB's server: the node serves without its log
            log.warning("the processing log's topic %s could not be created: %s", topic, error)

    def _create_processing_log_stream(self) -> None:
        """The processing log's stream, once the node is READY (as ksqlDB's server, once it has
        run the command topic: a node still catching up cannot write), unless the catalog has
        it; a failure is logged, not fatal: the node serves."""
        settings, service_id = self.settings.processing_log, self.settings.node.service_id
        try:
            if not self._ready_or_stopping(None):
                log.log(logging.INFO if self._stopping.is_set() else logging.WARNING,
                        "the processing log stream %s was not created: the node is %s%s",
                        settings.stream_name, self.node.state.value,
                        " and stopping" if self._stopping.is_set() else "")
            elif self.node.replica.image.source(settings.stream_name) is not None:
                log.info("processing log stream %s is in the catalog", settings.stream_name)
            else:
                [entity] = self.node.execute(settings.stream_statement(service_id))
                log.info("processing log stream %s over %s: %s", settings.stream_name,
                         settings.topic(service_id), entity.get("commandStatus", {}).get(
                             "message") or entity.get("message"))
        except Exception as error:  # as ksqlDB's server: the node serves without its log
            log.warning("the processing log stream %s could not be created: %s",
                        settings.stream_name, error)

    def stopping(self) -> None:
        """Tell the start's waits that the node is stopping (:meth:`stop` does too)."""
        self._stopping.set()

    def _ready_or_stopping(self, patience: float | None) -> bool:
        """Wait for the node's replica to be READY: True once it is, False when it is degraded,
        the node stops or ``patience`` seconds pass first."""
        deadline = None if patience is None else time.monotonic() + patience
        while not self._stopping.is_set():
            if self.node.replica.wait_ready(READY_POLL_SECONDS):
                return True
            if self.node.state is NodeState.DEGRADED or (
                    deadline is not None and time.monotonic() > deadline):
                return False
        return False

    def stop(self) -> None:
        """Stop heartbeats, push queries and table stores, then the node (its queries,
        Spark, writer, replica, checkpoints)."""
        self._stopping.set()
        if self._log_creation is not None:
            self._log_creation.join(PROCESSING_LOG_STOP_SECONDS)
        if self.liveness is not None:
            self.liveness.stop()
        self.membership.stop()
        if self.forwarder is not None:
            self.forwarder.close()
        if self.push_queries is not None:
            self.push_queries.stop()
        if self.table_stores is not None:
            self.table_stores.stop()
        if self.processing_log is not None:
            self.processing_log.stop()
        self.node.stop()


def build(settings: ServerSettings) -> NodeServices:
    """The node of ``settings``, wired but not started."""
    added = extensions.load(settings.function_modules)  # before the command log is replayed
    if added:
        log.info("function modules %s: %s", ", ".join(settings.function_modules),
                 ", ".join(added))
    config = settings.node
    kafka = KafkaSettings(config.bootstrap_servers, dict(config.kafka_client))
    admin = Admin(kafka)
    projection = queries = pull = push = stores = explainer = liveness = processing_log = None
    if settings.spark is not None:
        projection, queries, pull, push, stores, explainer = _spark_services(
            config, settings.spark, settings, kafka, admin, lambda: node.replica.image)
        liveness = _liveness(projection, queries, push, stores)
        processing_log = _processing_log(settings, kafka, admin, projection, queries,
                                         lambda: node.replica.image)
    membership: Membership | None = None

    def cluster_queries() -> Mapping[str, Mapping[str, Any]]:
        return _cluster_queries(node, settings.url, queries, push, membership)

    node = Node(config, progress=log.info, admin=admin, projection=projection, queries=queries,
                query_status=cluster_queries, explainer=explainer)
    membership = Membership(kafka, admin, config.service_id, config.node_id, settings.url,
                            lambda: (node.state.value, node.replica.position - 1),
                            queries=lambda: _local_queries(queries),
                            stores=stores.positions if stores is not None else None,
                            push_queries=push.listing if push is not None else None,
                            fingerprint=lambda: node.replica.image.fingerprint)
    forwarder = None if settings.certificate_users is not None else WriteForwarder(
        config.node_id, settings.url, lambda: node.replica.last_writer, membership.nodes,
        settings.forwarding, verify=client_verify(settings.tls))
    # users known by certificate: another node would see this node's certificate, not theirs
    return NodeServices(settings, node, membership, projection, queries, push, stores,
                        forwarder, pull, _auth(settings.auth_file), liveness, processing_log)


def _processing_log(settings: ServerSettings, kafka: KafkaSettings, admin: Admin,
                    projection: ProjectionRunner, queries: QueryRunner,
                    image: Callable[[], Image]) -> ProcessingLog:
    """The processing log of the records the node's queries cannot read."""
    from metastore.runtime.processing_log import ProcessingLog
    from metastore.spark.views import spark_kafka_options

    processing_log = ProcessingLog(
        lambda: projection.spark, spark_kafka_options(kafka),
        settings.processing_log.topic(settings.node.service_id),
        lambda name: image().source(name),
        lambda topic: admin.describe(topic) is not None,
        rows_include=settings.processing_log.rows_include)
    queries.skipped.report_to(processing_log.skipped)
    queries.record_errors.report_to(processing_log.failed_rows)
    queries.report_failures_to(processing_log.failed)
    return processing_log


def _liveness(projection: ProjectionRunner, queries: QueryRunner, push: PushQueries,
              stores: TableStores) -> SparkLiveness:
    """The watch on the node's Spark: when it is lost, the node stops handing its session out,
    leaves the query group (its queries move to other nodes), ends its push queries and table
    stores, and the projection starts a new session, which rejoins the group."""
    from metastore.spark.liveness import SparkLiveness

    def lost(reason: str) -> None:
        projection.lost(reason)
        try:
            queries.spark_lost()
            push.stop()
            stores.spark_lost()
        finally:
            projection.may_restart()

    return SparkLiveness(lambda: projection.spark, lost)


def _auth(path: Path | None) -> BasicAuth | None:
    if path is None:
        return None
    try:
        return BasicAuth.from_file(path)
    except (OSError, ValueError) as error:
        raise ServeError(f"cannot read the auth file: {error}") from error


def _spark_services(config: NodeConfig, spark_settings: SparkSettings, settings: ServerSettings,
                    kafka: KafkaSettings, admin: Admin, image: Callable[[], Image],
                    ) -> tuple[ProjectionRunner, QueryRunner, PullQuery, PushQueries, TableStores,
                               Explainer]:
    """The Spark catalog projection, the persistent-query runner, pull queries (answered from
    the tables kept materialized where they can be), push queries and EXPLAIN's plans, sharing
    one SparkSession that the projection starts."""
    from metastore.runtime.assignment import QueryAssignment
    from metastore.runtime.checkpoints import checkpoint_root
    from metastore.runtime.explain import SparkExplainer
    from metastore.runtime.materialized import TableStores
    from metastore.runtime.push import PushQueries
    from metastore.runtime.runner import QueryRunner
    from metastore.spark.views import spark_kafka_options

    kafka_options = spark_kafka_options(kafka)
    projection = _projection(config, spark_settings, settings, kafka_options)

    def session() -> SparkSession | None:
        return projection.spark

    def assignment(assigned: Callable[[Partitions], None],
                   revoked: Callable[[Partitions], None]) -> QueryAssignment:
        return QueryAssignment(kafka, admin, config.service_id, config.node_id, assigned, revoked,
                               session_timeout_ms=spark_settings.query_session_timeout_ms)

    queries = QueryRunner(config.node_id, session, kafka_options,
                          checkpoint_root(settings.query_checkpoints, session),
                          kafka, assignment, retry=settings.query_retry,
                          classifier=settings.error_classifier,
                          sink_producer=settings.sink_producer,
                          service_id=config.service_id)
    end_offsets, close_offsets = _end_offsets_reader(config, kafka, admin)
    stores = TableStores(session, kafka_options, settings.directory / "table-stores",
                         end_offsets, close=close_offsets)
    push = PushQueries(session, kafka_options, settings.directory / "push-queries",
                       skipped=queries.skipped, record_errors=queries.record_errors)
    return (projection, queries, _pull_queries(config, projection, stores, image), push, stores,
            SparkExplainer(session, kafka_options))


def _projection(config: NodeConfig, spark_settings: SparkSettings, settings: ServerSettings,
                kafka_options: dict[str, str]) -> ProjectionRunner:
    """The Spark catalog's projection, which starts the node's SparkSession."""
    from metastore.spark.avro import registry_conf
    from metastore.spark.catalog_state import CatalogStateFile
    from metastore.spark.projection import ProjectionRunner, SparkProjection
    from metastore.spark.session import discard_session, metastore_db, start_session
    from metastore.spark.views import database_name

    database = database_name(config.service_id)
    warehouse = settings.directory / "spark"
    registry = (registry_conf(config.schema_registry_url)
                if config.schema_registry_url else {})  # for the record codecs, in every JVM

    def start() -> SparkProjection:
        session = start_session(spark_settings.master,
                                f"metastore-{config.service_id}-{config.node_id}", warehouse,
                                persistent_catalog=spark_settings.persistent_catalog,
                                conf={**registry, **spark_settings.conf})
        state = CatalogStateFile(warehouse / "catalog-state.json", metastore_db(warehouse),
                                 database) if spark_settings.persistent_catalog else None
        return SparkProjection(session, database, kafka_options, state)

    return ProjectionRunner(start, config.faults.before_projection, discard_session)


def _end_offsets_reader(config: NodeConfig, kafka: KafkaSettings, admin: Admin
                        ) -> tuple[Callable[[str], dict[int, int] | None], Callable[[], None]]:
    """A topic's end offsets by partition (None when it cannot tell) for the table stores, and
    how to close what reads them."""
    from metastore.kafka.consumer import EndOffsets

    offsets = EndOffsets(kafka, group_id=f"metastore-{config.service_id}-stores")
    offsets_lock = threading.Lock()

    def end_offsets(topic: str) -> dict[int, int] | None:
        try:
            with offsets_lock:
                shape = admin.describe(topic)
                if shape is None:
                    return None
                ends = offsets.end_offsets((topic, p) for p in range(shape.partitions))
        except MetastoreError as error:
            log.warning("end offsets of %s: %s", topic, error)
            return None
        return {partition: end for (_, partition), end in ends.items()}

    return end_offsets, offsets.close


def _pull_queries(config: NodeConfig, projection: ProjectionRunner, stores: TableStores,
                  image: Callable[[], Image]) -> PullQuery:
    """Pull queries: from a table store where one answers, else on Spark's catalog, at most
    :data:`SPARK_PULL_SLOTS` at once, each bounded by the node's response budget."""
    from metastore.spark.exceptions import SparkUnavailableError
    from metastore.spark.query import (
        PullBudget,
        bounded_rows,
        check_pull_query,
        new_query_id,
        run_analysed,
    )
    from metastore.spark.views import database_name

    database = database_name(config.service_id)
    budget = PullBudget(max_bytes=config.limits.max_response_bytes)
    spark_pulls = threading.BoundedSemaphore(SPARK_PULL_SLOTS)

    def pull(text: str, config: ConfigOverrides) -> Any:
        running = projection.projection
        if running is None:
            raise SparkUnavailableError(f"Spark is not available on this node: "
                                        f"{projection.status.reason}")
        checked_on = image()
        analysis = check_pull_query(text, checked_on, config)
        query_id = new_query_id()
        answer = stores.answer(analysis, query_id)
        if answer is not None:
            bounded_rows(answer.rows, budget.max_bytes)  # refuses one too large
            return answer
        if not projection.wait_for_sources(checked_on, analysis.sources, PROJECTION_PATIENCE):
            raise SparkUnavailableError(
                f"The Spark catalog of this node does not hold {', '.join(analysis.sources)} "
                f"yet ({projection.status.reason or 'it is being updated'}); retry shortly.")
        if not spark_pulls.acquire(timeout=budget.timeout_seconds):
            raise SparkUnavailableError(f"This node's Spark is answering {SPARK_PULL_SLOTS} "
                                        "pull queries already; retry shortly.")
        try:
            return run_analysed(running.spark, analysis, database, query_id, budget)
        finally:
            spark_pulls.release()

    return pull


def _local_queries(queries: QueryRunner | None) -> dict[str, Any]:
    from metastore.runtime.status import report

    return report(queries.statuses()) if queries is not None else {}


def _cluster_queries(node: Node, url: str, queries: QueryRunner | None,
                     push: PushQueries | None, membership: Membership | None,
                     ) -> Mapping[str, Mapping[str, Any]]:
    """Every query's state, owner and lag: this node's own view first, then live heartbeats;
    and every push query running in the service, by the same ids (``queryType`` PUSH)."""
    from metastore.runtime.status import Claim, merge, push_queries

    here = node.config.node_id
    peers = [beat for beat, alive in membership.nodes()
             if alive and beat.node_id != here] if membership is not None else []
    claims = [Claim(here, url, _local_queries(queries))]
    claims += [Claim(beat.node_id, beat.url, beat.queries) for beat in peers]
    pushed = [Claim(here, url, push.listing() if push is not None else {})]
    pushed += [Claim(beat.node_id, beat.url, beat.push_queries) for beat in peers]
    return {**push_queries(pushed), **merge(node.replica.image, claims)}


class ShutdownSignals:
    """SIGTERM and SIGINT of a serving node. The first one while the server's event loop runs
    asks it to stop; any later one, and any once the loop has ended (the node then stops its
    services, the loop is closed), is logged and ignored: stopping is under way already. Once
    the node stopped, the process only exits: both signals are ignored (Python would restore
    their default handlers while it finalizes, and one then would kill it)."""

    def __init__(self, on_request: Callable[[], None] | None = None) -> None:
        """``on_request``: what stops at once with the first signal (the watch on Spark: the
        signal may reach Spark's JVM too)."""
        self._wake: Callable[[], object] | None = None
        self._on_request = on_request
        self.requested = False

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self)
        signal.signal(signal.SIGINT, self)

    def serving(self, loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
        """The server runs on ``loop`` until ``stop`` is set."""
        self._wake = lambda: loop.call_soon_threadsafe(stop.set)

    def served(self) -> None:
        """The server's loop ends: no signal wakes it any more."""
        self._wake = None

    @staticmethod
    def stopped() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    def __call__(self, signum: int, _frame: object) -> None:
        wake = self._wake
        if self.requested or wake is None:
            log.info("signal %d: the node is already stopping", signum)
            return
        self.requested = True
        log.info("signal %d: shutting down", signum)
        if self._on_request is not None:
            self._on_request()
        wake()


def _hypercorn_config(context: ssl.SSLContext | None) -> Config:
    """hypercorn's settings: serving with ``context`` when there is one (hypercorn would make
    its own from PEM files; this one also reads PKCS12 and reloads its certificate)."""
    from hypercorn.config import Config

    class TlsConfig(Config):
        @property
        def ssl_enabled(self) -> bool:
            return True

        def create_ssl_context(self) -> ssl.SSLContext | None:
            return context

    return Config() if context is None else TlsConfig()


def _watch_certificate(context: ssl.SSLContext | None, tls: TlsSettings | None,
                       forwarder: WriteForwarder | None) -> asyncio.Task[None] | None:
    """With ``ssl.keystore.reload``, a task of the listener's loop that serves a changed key
    store's certificate to new connections, and has the node's forwarding show it."""
    if context is None or tls is None or not tls.reload:
        return None
    watch = CertificateWatch(context, tls, None if forwarder is None else
                             lambda: forwarder.renew(client_verify(tls)))

    async def watching() -> None:
        while True:
            await asyncio.sleep(RELOAD_CHECK_SECONDS)
            try:
                watch.check()
            except Exception:  # the listener keeps its certificate and looks again
                log.exception("checking the key store for a renewed certificate")

    return asyncio.get_running_loop().create_task(watching())


def serve(settings: ServerSettings) -> None:
    """Build, start and serve a node until SIGTERM or SIGINT; then stop it cleanly (further
    signals are ignored: see :class:`ShutdownSignals`).

    The REST app is served by hypercorn: HTTP/1.1, and HTTP/2 without TLS for clients that speak
    it from their first byte (ksqlDB's clients do, for ``/query-stream`` and ``/inserts-stream``);
    with TLS (:mod:`metastore.server.tls`), both by ALPN.
    """
    services = build(settings)
    context = server_context(settings.tls) if settings.tls is not None else None

    def http_stack() -> tuple[ASGIFramework, Config, Callable[..., Awaitable[None]]]:
        from hypercorn.asyncio import serve as hypercorn_serve

        from metastore.server.http.concurrency import ConcurrencyLimit

        config = _hypercorn_config(context)
        if services.certificates is not None:
            install_tls_extension()
        config.bind = [f"{_bind_host(settings.host)}:{settings.port}"]
        config.keep_alive_timeout = settings.http.keep_alive_seconds
        config.graceful_timeout = SHUTDOWN_GRACE_SECONDS
        config.accesslog = None
        config.loglevel = "WARNING"
        config.include_server_header = False
        app = ConcurrencyLimit(services.app, settings.http.max_concurrency,
                               services.app.state.requests_in_flight,
                               settings.http.max_requests_per_client,
                               by_user=services.auth is not None)
        return cast("ASGIFramework", app), config, hypercorn_serve

    served, config, hypercorn_serve = _while_the_node_starts(services, http_stack)

    signals = ShutdownSignals(services.liveness.halt if services.liveness else None)

    async def run() -> None:
        stop = asyncio.Event()
        signals.serving(asyncio.get_running_loop(), stop)
        signals.install()
        log.info("node %s of service %s serving on %s", settings.node.node_id,
                 settings.node.service_id, settings.url)
        watch = _watch_certificate(context, settings.tls, services.forwarder)
        try:
            await hypercorn_serve(served, config, shutdown_trigger=stop.wait)
        finally:
            if watch is not None:
                watch.cancel()
            signals.served()

    try:
        asyncio.run(run())
    except OSError as error:
        raise ServeError(f"could not serve on {settings.host}:{settings.port} (is the port in "
                         f"use?): {error}") from error
    finally:
        signals.served()
        try:
            services.stop()
        finally:
            signals.stopped()
        log.info("node %s stopped", settings.node.node_id)


def _while_the_node_starts(services: NodeServices, load: Callable[[], _Loaded]) -> _Loaded:
    """Start ``services`` in a thread while this one runs ``load`` (importing the HTTP stack and
    building the REST app): the node's Kafka round trips and its checkpoint's restore overlap
    the imports (FastAPI's alone take about a sixth of a second), so a restarted node is READY
    sooner. If either fails, or a signal interrupts them, the node is stopped, whatever of it
    started, and the failure raised (the load's first; the start's is logged then)."""
    failures: list[BaseException] = []

    def start() -> None:
        try:
            services.start()
        except BaseException as failure:  # raised in the serving thread
            failures.append(failure)

    starting = threading.Thread(target=start, name="node-start")
    starting.start()
    try:
        loaded = load()
        starting.join()
    except BaseException:
        _stop_unstarted(services, starting)
        if failures:
            log.error("the node did not start either: %s", failures[0])
        raise
    if failures:
        _stop_unstarted(services, starting)
        raise failures[0]
    return loaded


def _stop_unstarted(services: NodeServices, starting: threading.Thread) -> None:
    """Stop a node whose start failed or was interrupted, once the start has returned (told
    to stop waiting for the node's READY)."""
    services.stopping()
    starting.join()
    try:
        services.stop()
    except Exception:  # the original failure is what the caller raises
        log.exception("stopping the node that did not start failed")


def _bind_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
