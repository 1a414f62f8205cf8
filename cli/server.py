"""`metastore server`: run one node (command-log replica, writer, REST API) until SIGTERM."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any

import typer

from metastore.api.http_limits import HttpLimits
from metastore.checkpoint.checkpointer import CheckpointPolicy
from metastore.limits import RequestLimits
from metastore.local.paths import dev_dir
from metastore.log.writer import WriterOptions, die_between_produce_and_commit
from metastore.node import NodeConfig

Opt = typer.Option


def _parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise typer.BadParameter("expected HOST:PORT, e.g. 127.0.0.1:8088", param_hint="--listen")
    return host or "127.0.0.1", int(port)


def _parse_pairs(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--kafka")
        out[key.strip()] = value.strip()
    return out


def _request_limits(values: dict[str, Any]) -> RequestLimits:
    known = {f.name for f in fields(RequestLimits)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise typer.BadParameter(f"unknown limit(s) {', '.join(unknown)}; known: "
                                 f"{', '.join(sorted(known))}", param_hint="--limit")
    try:
        return RequestLimits(**{name: int(value) for name, value in values.items()})
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--limit") from error


def _http_limits(values: dict[str, Any]) -> HttpLimits:
    try:
        return HttpLimits.from_settings(values)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--http-limit") from error


def server(
    service_id: Annotated[str | None, Opt(envvar="METASTORE_SERVICE_ID",
                                          help="Service id: shared by every node of a cluster.")] = None,
    bootstrap_servers: Annotated[str | None, Opt(envvar="KAFKA_BOOTSTRAP_SERVERS",
                                                 help="Kafka bootstrap servers.")] = None,
    kafka: Annotated[list[str] | None, Opt(help="Extra Kafka client setting KEY=VALUE "
                                           "(TLS, SASL...); repeatable.")] = None,
    listen: Annotated[str | None, Opt(envvar="METASTORE_LISTEN", help="HOST:PORT to serve on.")] = None,
    node_id: Annotated[str | None, Opt(envvar="METASTORE_NODE_ID", help="This node's id.")] = None,
    data_dir: Annotated[Path | None, Opt(envvar="METASTORE_DATA_DIR",
                                         help="Directory for this node's local state.")] = None,
    spark_master: Annotated[str | None, Opt(envvar="METASTORE_SPARK_MASTER",
                                            help="Spark master URL (default local[1]).")] = None,
    spark_catalog: Annotated[str | None, Opt(
        help="'persistent' (default): Spark's Hive catalog in the data directory, kept across "
             "restarts; 'in-memory': Spark's in-memory catalog, rebuilt at every start.")] = None,
    query_checkpoint_dir: Annotated[Path | None, Opt(
        envvar="METASTORE_QUERY_CHECKPOINT_DIR",
        help="Root of the persistent queries' Spark checkpoints (default <data dir>/"
        "query-checkpoints); share it between nodes so another node can take a query over.")] = None,
    query_session_timeout_ms: Annotated[int | None, Opt(
        help="How long (ms) a node that stopped answering keeps its persistent queries before "
        "the query group gives them to another node (default 10000).")] = None,
    request_timeout: Annotated[float | None, Opt(help="Seconds a write may take, retries "
                                                 "included.")] = None,
    read_timeout: Annotated[float | None, Opt(help="Seconds a request waits for its "
                                              "commandSequenceNumber.")] = None,
    fetch_wait_ms: Annotated[int | None, Opt(help="Longest a command-log fetch waits at the "
                                             "broker (ms): lower is faster writes, more "
                                             "requests when idle.")] = None,
    writer_mode: Annotated[str | None, Opt(help="'reuse' (default): keep the transactional "
                                           "producer while it is not fenced; 'per-statement': "
                                           "a new producer for each request, as ksqlDB does.")] = None,
    checkpoint_every_records: Annotated[int | None, Opt(
        help="Checkpoint the catalog to the data directory every N command-log offsets "
             "(default 1000; 0: never, every start replays the whole log).")] = None,
    checkpoint_every_seconds: Annotated[float | None, Opt(
        help="...or every T seconds when anything changed (default 60).")] = None,
    snapshots: Annotated[bool | None, Opt(
        "--snapshots/--no-snapshots",
        help="Publish checkpoints to the service's snapshot topic, and start a node without a "
             "checkpoint from the newest snapshot (default: on).")] = None,
    limit: Annotated[list[str] | None, Opt(
        help="A request limit NAME=N (max_statements, max_response_bytes, max_topics_created, "
             "max_partitions_per_topic, max_partitions_created); repeatable.")] = None,
    http_limit: Annotated[list[str] | None, Opt(
        help="An HTTP limit NAME=VALUE (max_body_bytes, body_timeout_seconds, "
             "body_idle_timeout_seconds, max_json_depth, keep_alive_seconds, max_concurrency, "
             "max_failed_logins, failed_login_window_seconds, login_lockout_seconds, "
             "max_tracked_clients); repeatable.")] = None,
    auth_file: Annotated[Path | None, Opt(envvar="METASTORE_AUTH_FILE",
                                          help="File of user:password lines; enables HTTP basic "
                                          "auth.")] = None,
    config: Annotated[Path | None, Opt(envvar="METASTORE_CONFIG",
                                       help="TOML file with any of these settings.")] = None,
    fault_injection: Annotated[str | None, Opt(hidden=True)] = None,
) -> None:
    """Run a node: catch up with the command log, then serve the ksqlDB REST API."""
    from metastore.api.auth import BasicAuth

    settings: dict[str, Any] = {}
    if config is not None:
        try:
            settings = tomllib.loads(config.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as error:
            typer.echo(f"Error: cannot read config file {config}: {error}", err=True)
            raise typer.Exit(2) from error

    def pick(value: Any, key: str, default: Any = None) -> Any:
        return value if value is not None else settings.get(key, default)

    bootstrap = pick(bootstrap_servers, "bootstrap_servers")
    if not bootstrap:
        typer.echo("Error: no Kafka given. Pass --bootstrap-servers or set "
                   "KAFKA_BOOTSTRAP_SERVERS (start a local one with: metastore dev kafka start).",
                   err=True)
        raise typer.Exit(2)
    host, port = _parse_listen(pick(listen, "listen", "127.0.0.1:8088"))
    mode = pick(writer_mode, "writer_mode", "reuse")
    if mode not in ("reuse", "per-statement"):
        raise typer.BadParameter("must be 'reuse' or 'per-statement'", param_hint="--writer-mode")
    client = {**settings.get("kafka", {}), **_parse_pairs(kafka or [])}
    chosen_node_id = pick(node_id, "node_id", f"{socket.gethostname()}-{port}")
    directory = Path(pick(data_dir, "data_dir") or dev_dir() / "nodes" / chosen_node_id)
    every_records = int(pick(checkpoint_every_records, "checkpoint_every_records", 1000))
    if every_records < 0:
        raise typer.BadParameter("must be 0 or more", param_hint="--checkpoint-every-records")
    node_config = NodeConfig(
        service_id=pick(service_id, "service_id", "default_"), bootstrap_servers=bootstrap,
        node_id=chosen_node_id,
        data_dir=directory if every_records > 0 else None,
        checkpoint=CheckpointPolicy(every_records=max(every_records, 1), every_seconds=float(
            pick(checkpoint_every_seconds, "checkpoint_every_seconds", 60.0))),
        snapshots=bool(pick(snapshots, "snapshots", True)),
        kafka_client={str(k): str(v) for k, v in client.items()},
        writer=WriterOptions(reuse_producer=mode == "reuse",
                             request_timeout=float(pick(request_timeout, "request_timeout", 30.0))),
        read_timeout=float(pick(read_timeout, "read_timeout", 30.0)),
        fetch_wait_ms=int(pick(fetch_wait_ms, "fetch_wait_ms", 10)),
        limits=_request_limits({**settings.get("limits", {}), **_parse_pairs(limit or [])}))
    http_limits = _http_limits({**settings.get("http_limits", {}),
                                **_parse_pairs(http_limit or [])})
    auth = None
    auth_path = pick(auth_file, "auth_file")
    if auth_path:
        try:
            auth = BasicAuth.from_file(Path(auth_path))
        except (OSError, ValueError) as error:
            typer.echo(f"Error: cannot read the auth file: {error}", err=True)
            raise typer.Exit(2) from error
    catalog = pick(spark_catalog, "spark_catalog", "persistent")
    if catalog not in ("persistent", "in-memory"):
        raise typer.BadParameter("must be 'persistent' or 'in-memory'", param_hint="--spark-catalog")
    master = pick(spark_master, "spark_master", "local[1]")
    query_checkpoints = pick(query_checkpoint_dir, "query_checkpoint_dir")
    spark = None if master == "none" else SparkOptions(
        master=master, persistent_catalog=catalog == "persistent",
        query_checkpoints=Path(query_checkpoints) if query_checkpoints
        else directory / "query-checkpoints",
        query_session_timeout_ms=int(pick(query_session_timeout_ms, "query_session_timeout_ms",
                                          10_000)))
    run_node(node_config, host, port, auth, fault_injection, spark, directory, http_limits)


@dataclass(frozen=True)
class SparkOptions:
    """How a node runs Spark: the master, its catalog, and its persistent queries."""

    master: str
    persistent_catalog: bool
    query_checkpoints: Path
    """Root of the queries' Spark checkpoints; shared between nodes, so one can take over."""
    query_session_timeout_ms: int


def die_during_checkpoint(partial: Path) -> None:
    """Fault injection: SIGKILL this process with a checkpoint half written."""
    logging.getLogger("metastore").error("fault injection: dying while writing %s", partial)
    os.kill(os.getpid(), signal.SIGKILL)


def stall_before_commit(marker: Path, seconds: float = 4.0) -> Callable[[Any], None]:
    """Fault injection: once, with the transaction open, touch ``marker`` and stall."""
    import time

    fired: list[bool] = []

    def stall(producer: Any) -> None:
        if fired:
            return
        fired.append(True)
        producer.flush()
        marker.touch()
        time.sleep(seconds)

    return stall


def attach_spark(node: Any, options: SparkOptions, directory: Path) -> Callable[[str], Any]:
    """Give the node a Spark catalog projection and a persistent-query runner; return the
    pull-query runner over it."""
    from metastore.queries.assignment import QueryAssignment
    from metastore.queries.runner import QueryRunner
    from metastore.spark.catalog_state import CatalogStateFile
    from metastore.spark.exceptions import SparkUnavailableError
    from metastore.spark.projection import ProjectionRunner, SparkProjection
    from metastore.spark.query import run_pull_query
    from metastore.spark.session import metastore_db, start_session
    from metastore.spark.views import database_name

    config = node.config
    database = database_name(config.service_id)
    kafka_options = {"kafka.bootstrap.servers": config.bootstrap_servers,
                     **{f"kafka.{k}": v for k, v in config.kafka_client.items()}}

    def start() -> SparkProjection:
        warehouse = directory / "spark"
        spark = start_session(options.master, f"metastore-{config.service_id}-{config.node_id}",
                              warehouse, persistent_catalog=options.persistent_catalog)
        state = CatalogStateFile(warehouse / "catalog-state.json", metastore_db(warehouse),
                                 database) if options.persistent_catalog else None
        return SparkProjection(spark, database, kafka_options, state)

    runner = ProjectionRunner(start)
    node.attach_projection(runner)

    def spark() -> Any:
        return runner.projection.spark if runner.projection is not None else None

    def assignment(assigned: Any, revoked: Any) -> QueryAssignment:
        return QueryAssignment(node.settings, node.admin, config.service_id, config.node_id,
                               assigned, revoked,
                               session_timeout_ms=options.query_session_timeout_ms)

    node.attach_queries(QueryRunner(config.node_id, spark, kafka_options,
                                    options.query_checkpoints, node.settings, assignment,
                                    service_id=config.service_id))

    def query(text: str) -> Any:
        projection = runner.projection
        if projection is None:
            raise SparkUnavailableError(f"Spark is not available on this node: "
                                        f"{runner.status.reason}")
        return run_pull_query(projection.spark, text, node.replica.image, database)

    return query


def local_queries(node: Any) -> dict[str, Any]:
    from metastore.queries.status import report

    return report(node.queries.statuses()) if node.queries is not None else {}


def cluster_queries(node: Any, membership: Any) -> Any:
    """Every query's state, owner and lag: this node's own view first, then live heartbeats."""
    from metastore.queries.status import merge

    claims = [(node.config.node_id, local_queries(node))]
    claims += [(beat.node_id, beat.queries) for beat, alive in membership.nodes()
               if alive and beat.node_id != node.config.node_id]
    return merge(node.replica.image, claims)


def run_node(config: NodeConfig, host: str, port: int, auth: Any, fault_injection: str | None,
             spark: SparkOptions | None, data_dir: Path,
             http_limits: HttpLimits | None = None) -> None:
    import uvicorn

    from metastore.api.server import create_app
    from metastore.exceptions import MetastoreError
    from metastore.membership import Membership
    from metastore.node import Node

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    logging.getLogger("metastore.librdkafka").setLevel(logging.ERROR)
    url = f"http://{host}:{port}"
    node = Node(config, progress=lambda message: logging.getLogger("metastore").info(message))
    if fault_injection == "slow-replay":
        node.replica.slow_down(batch=50, pause=0.05)
    query_runner = None
    if spark is not None:
        query_runner = attach_spark(node, spark, data_dir)
    try:
        node.start()
    except MetastoreError as error:
        typer.echo(f"Error: {error}", err=True)
        raise typer.Exit(1) from error
    if fault_injection == "die-before-commit" and node.writer is not None:
        node.writer.before_commit = die_between_produce_and_commit
    elif fault_injection and fault_injection.startswith("stall-before-commit:") and node.writer:
        node.writer.before_commit = stall_before_commit(Path(fault_injection.split(":", 1)[1]))
    elif fault_injection == "die-during-checkpoint" and node.checkpointer is not None:
        node.checkpointer.store.during_write = die_during_checkpoint
    membership = Membership(node.settings, node.admin, config.service_id, config.node_id, url,
                            lambda: (node.state.value, node.replica.position - 1),
                            queries=lambda: local_queries(node))
    membership.start()
    node.query_status = lambda: cluster_queries(node, membership)
    limits = http_limits or HttpLimits()
    app = create_app(node, auth=auth, url=url, membership=membership, query_runner=query_runner,
                     limits=limits)
    logging.getLogger("metastore").info("node %s of service %s serving on %s", config.node_id,
                                        config.service_id, url)
    class NodeServer(uvicorn.Server):
        """uvicorn without its own signal handling: the node shuts down first, then exits 0."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    server = NodeServer(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                       access_log=False, timeout_keep_alive=limits.keep_alive_seconds,
                                       limit_concurrency=limits.max_concurrency))

    def request_shutdown(signum: int, _frame: object) -> None:
        logging.getLogger("metastore").info("signal %d: shutting down", signum)
        server.should_exit = True

    signal.signal(signal.SIGTERM, request_shutdown)
    signal.signal(signal.SIGINT, request_shutdown)
    try:
        server.run()
    finally:
        membership.stop()
        node.stop()
        logging.getLogger("metastore").info("node %s stopped", config.node_id)
    if not server.started:
        typer.echo(f"Error: could not serve on {host}:{port} (is the port in use?)", err=True)
        raise typer.Exit(1)

