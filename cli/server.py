"""`metastore server`: run one node until SIGTERM; options, environment and TOML become the
node's settings (metastore.server.settings), and metastore.server.build builds and serves the node."""

from __future__ import annotations

import logging
import os
import sys
import tomllib
from pathlib import Path
from typing import Annotated, Any

import typer

Opt = typer.Option


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
    spark_conf: Annotated[list[str] | None, Opt(
        help="A Spark setting KEY=VALUE of the node's application (spark.executor.memory, "
             "spark.cores.max, spark.driver.host...); repeatable.")] = None,
    spark_catalog: Annotated[str | None, Opt(
        help="'persistent' (default): Spark's Hive catalog in the data directory, kept across "
             "restarts; 'in-memory': Spark's in-memory catalog, rebuilt at every start.")] = None,
    query_checkpoint_dir: Annotated[str | None, Opt(
        envvar="METASTORE_QUERY_CHECKPOINT_DIR",
        help="Root of the persistent queries' Spark checkpoints: a directory or a Hadoop file "
        "system URI (hdfs://, s3a://...; default <data dir>/query-checkpoints); share it "
        "between nodes, so another node can take a query over, and with the Spark workers.")] = None,
    schema_registry_url: Annotated[str | None, Opt(
        envvar="METASTORE_SCHEMA_REGISTRY_URL",
        help="A Confluent-compatible Schema Registry's base URL (http://host:8081; Apicurio: "
        "http://host:8080/apis/ccompat/v7), for ASSERT SCHEMA.")] = None,
    connect_url: Annotated[str | None, Opt(
        envvar="METASTORE_CONNECT_URL",
        help="Kafka Connect's REST URL, where the connector statements run (ksqlDB's "
        "ksql.connect.url; default http://localhost:8083).")] = None,
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
    write_batch_max_requests: Annotated[int | None, Opt(
        help="Group commit: the most queued write requests validated and written in one "
             "transaction, each answered on its own (default 64; 1: one transaction each; "
             "'per-statement' mode: 1).")] = None,
    advertised_url: Annotated[str | None, Opt(
        envvar="METASTORE_ADVERTISED_URL",
        help="The URL other nodes and clients reach this node at (default: http://<listen "
             "address>); set it when listening on 0.0.0.0 or behind a proxy.")] = None,
    write_forwarding: Annotated[bool | None, Opt(
        "--write-forwarding/--no-write-forwarding",
        help="Send a write request to the node that wrote last (the service's writer) instead "
             "of fencing it and writing here (default: on).")] = None,
    forward_timeout_seconds: Annotated[float | None, Opt(
        help="How long a forwarded write may take before it is written on this node instead "
             "(default 5).")] = None,
    write_batch_linger_ms: Annotated[float | None, Opt(
        help="How long (ms) a writer that finds fewer queued requests waits for more before "
             "it writes (default 0).")] = None,
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
             "max_requests_per_client, statement_threads, insert_threads, query_threads, "
             "health_threads, stream_write_timeout_seconds, inserts_idle_timeout_seconds, "
             "max_failed_logins, max_failed_users_per_address, failed_login_window_seconds, "
             "login_lockout_seconds, max_tracked_clients); repeatable.")] = None,
    auth_file: Annotated[Path | None, Opt(envvar="METASTORE_AUTH_FILE",
                                          help="File of user:password lines; enables HTTP basic "
                                          "auth.")] = None,
    roles_file: Annotated[Path | None, Opt(envvar="METASTORE_ROLES_FILE",
                                           help="TOML file of each user's topic permissions "
                                           "(read, write, create, delete); needs --auth-file. "
                                           "See docs/security.md.")] = None,
    function_module: Annotated[list[str] | None, Opt(
        help="A Python module of user-defined functions (exporting FUNCTIONS, see "
             "metastore.functions.extensions) to load; repeatable. Every node of a service "
             "must load the same modules.")] = None,
    ksql_property: Annotated[list[str] | None, Opt(
        help="A ksqlDB server property NAME=VALUE: the processing log's "
             "ksql.logging.processing.topic.name, .topic.auto.create, .topic.partitions, "
             ".topic.replication.factor, .stream.auto.create, .stream.name, .rows.include; "
             "repeatable.")] = None,
    queries_file: Annotated[Path | None, Opt(
        help="Headless mode (ksqlDB's ksql.queries.file): write this file's statements to the "
             "command log once for the service, and serve no statements or queries over REST. "
             "Start every node of the service with the same file.")] = None,
    config: Annotated[Path | None, Opt(envvar="METASTORE_CONFIG",
                                       help="TOML file with any of these settings.")] = None,
    fault_injection: Annotated[str | None, Opt(hidden=True)] = None,
) -> None:
    """Run a node: catch up with the command log, then serve the ksqlDB REST API."""
    from metastore.core.exceptions import MetastoreError
    from metastore.core.faults import Faults
    from metastore.server.build import serve
    from metastore.server.settings import SettingsError, server_settings

    file_settings = _read_config(config)
    given = {
        "bootstrap_servers": bootstrap_servers, "service_id": service_id, "node_id": node_id,
        "listen": listen, "data_dir": data_dir, "spark_master": spark_master,
        "spark_catalog": spark_catalog, "query_checkpoint_dir": query_checkpoint_dir,
        "query_session_timeout_ms": query_session_timeout_ms, "request_timeout": request_timeout,
        "read_timeout": read_timeout, "fetch_wait_ms": fetch_wait_ms, "writer_mode": writer_mode,
        "write_batch_max_requests": write_batch_max_requests,
        "write_batch_linger_ms": write_batch_linger_ms,
        "write_forwarding": write_forwarding, "forward_timeout_seconds": forward_timeout_seconds,
        "advertised_url": advertised_url,
        "checkpoint_every_records": checkpoint_every_records,
        "checkpoint_every_seconds": checkpoint_every_seconds, "snapshots": snapshots,
        "auth_file": auth_file, "roles_file": roles_file,
        "function_modules": function_module or None,
        "schema_registry_url": schema_registry_url, "queries_file": queries_file,
        "connect_url": connect_url,
    }
    tables = {"kafka": _pairs(kafka, "--kafka"), "spark_conf": _pairs(spark_conf, "--spark-conf"),
              "limits": _pairs(limit, "--limit"),
              "http_limits": _pairs(http_limit, "--http-limit"),
              "ksql_properties": _pairs(ksql_property, "--ksql-property")}
    merged = {**file_settings, **{k: v for k, v in given.items() if v is not None}}
    for name, pairs in tables.items():
        table = file_settings.get(name, {})
        if not isinstance(table, dict):
            typer.echo(f"Error: {name} in {config} must be a table of NAME = value", err=True)
            raise typer.Exit(2)
        merged[name] = {**table, **pairs}
    try:
        settings = server_settings(merged, Faults.named(fault_injection))
    except (SettingsError, ValueError) as error:
        typer.echo(f"Error: {error}", err=True)
        raise typer.Exit(2) from error
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    logging.getLogger("metastore.librdkafka").setLevel(logging.ERROR)
    _quiet_py4j()
    try:
        serve(settings)
    except MetastoreError as error:
        typer.echo(f"Error: {error}", err=True)
        raise typer.Exit(1) from error


class _Py4jBelowWarning(logging.Filter):
    """Drops py4j's records below WARNING, also those it logs through the root logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or (
            not record.name.startswith("py4j") and f"{os.sep}py4j{os.sep}" not in record.pathname)


def _quiet_py4j() -> None:
    """py4j logs each failed call into a dead JVM at INFO with its exception chain, which grows
    with every retry: formatting them starved the node's threads (its liveness watch among
    them) for up to 20 s."""
    logging.getLogger("py4j").setLevel(logging.WARNING)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_Py4jBelowWarning())


def _read_config(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        typer.echo(f"Error: cannot read config file {path}: {error}", err=True)
        raise typer.Exit(2) from error


def _pairs(pairs: list[str] | None, option: str) -> dict[str, str]:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=option)
        out[key.strip()] = value.strip()
    return out
