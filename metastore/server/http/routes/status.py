"""ksqlDB's status endpoints: ``GET /info``, ``/healthcheck`` (Kafka, the command topic, the
command runner and this node's Spark), ``/clusterStatus`` (every node the log or the membership
knows), ``/status[/{type}/{entity}/{action}]`` (commands applied); ``GET /v1/metastore``,
this node's log position and fingerprints; and ``GET /v1/metastore/log?limit=N``, the last N
records of the command log with who wrote them and when (``metastore log dump``'s rows)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from metastore import __version__
from metastore.cluster.health import PROBE_TIMEOUT_SECONDS, HealthProbe, KafkaHealth
from metastore.core.exceptions import MetastoreError
from metastore.engine.access import READ, Need
from metastore.kafka.admin import Admin
from metastore.log.dump import history_rows, read_committed
from metastore.log.reader import NodeState
from metastore.runtime import query_placement
from metastore.server.http import error_codes as codes
from metastore.server.http.answers import KsqlResponse, error_response, failure
from metastore.server.http.concurrency import Lane
from metastore.server.http.context import ServerContext

MAX_HISTORY = 1000
"""The most command log records one history request answers (it reads twice as many offsets,
each record's statement and who wrote it, not its plan: well under a few MB)."""


def router(context: ServerContext) -> APIRouter:
    api = APIRouter()
    node = context.node
    threads = context.threads
    health = HealthProbe(Admin(node.settings, timeout=PROBE_TIMEOUT_SECONDS), node.config.topic)

    @api.get("/info")
    @threads.endpoint(Lane.HEALTH)
    def info() -> Response:
        return KsqlResponse({"KsqlServerInfo": {
            "version": __version__, "kafkaClusterId": node.kafka_cluster_id,
            "ksqlServiceId": node.config.service_id,
            "serverStatus": "RUNNING" if node.state is NodeState.READY else node.state.value}})

    @api.get("/healthcheck")
    @threads.endpoint(Lane.HEALTH)
    def healthcheck() -> Response:
        spark_down = node.projection.down if node.projection is not None else None
        details = health_details(health.check(), node.state, node.projection is not None,
                                 spark_down)
        healthy = all(detail["isHealthy"] for detail in details.values())
        return KsqlResponse({"isHealthy": healthy, "details": details},
                            status_code=200 if healthy else 503)

    @api.get("/clusterStatus")
    @threads.endpoint(Lane.HEALTH)
    def cluster_status() -> Response:
        return KsqlResponse({"clusterStatus": _hosts(context)})

    @api.get("/status")
    @threads.endpoint(Lane.HEALTH)
    def statuses() -> Response:
        return KsqlResponse({"commandStatuses": {
            command_id: "SUCCESS" for command_id in sorted(node.replica.command_offsets)}})

    @api.get("/status/{kind}/{entity}/{action}")
    @threads.endpoint(Lane.HEALTH)
    def status(kind: str, entity: str, action: str) -> Response:
        command_id = f"{kind}/{entity}/{action}"
        offset = node.replica.command_offsets.get(command_id)
        if offset is None:
            return error_response(codes.NOT_FOUND, f"Command not found: {command_id}")
        return KsqlResponse({"status": "SUCCESS", "message": f"Applied at offset {offset}",
                             "commandSequenceNumber": offset})

    @api.get("/v1/metastore")
    @threads.endpoint(Lane.HEALTH)
    def metastore_status() -> Response:
        body = node.status()
        body["endOffset"] = node.end_offset()
        return KsqlResponse(body)

    @api.get("/v1/metastore/log")
    @threads.endpoint(Lane.QUERIES)
    def command_log(request: Request, limit: str = "100") -> Response:
        if not (limit.isascii() and limit.isdigit() and 1 <= int(limit) <= MAX_HISTORY):
            return error_response(codes.BAD_REQUEST,
                                  f"limit: expected a number from 1 to {MAX_HISTORY}")
        end = node.replica.position  # what this node applied: bounded, whatever Kafka holds
        window = 2 * int(limit)  # a transaction's marker takes an offset after its records
        try:
            node.authorize([Need(READ, node.config.topic)], context.gate.user_of(request))
            records = read_committed(
                node.settings, node.config.topic, details=True, start=max(0, end - window),
                group_id=f"{node.config.service_id}-{node.config.node_id}-log", until=end,
                timeout=10)
        except MetastoreError as error:
            return failure(error, "")
        rows = history_rows(records, brief=True)
        return KsqlResponse({"endOffset": end, "records": rows[-int(limit):]})

    return api


def _host(node_id: str, alive: bool, updated_ms: int, state: str,
          applied: int | None, queries: Mapping[str, Any] | None = None,
          stores: Mapping[str, Any] | None = None, fingerprint: str = "") -> dict[str, Any]:
    running = query_placement.running(queries or {}) if alive else {}
    return {"hostAlive": alive, "lastStatusUpdateMs": updated_ms, "nodeId": node_id,
            "state": state, "appliedOffset": applied, "imageFingerprint": fingerprint or None,
            "activeStandbyPerQuery": query_placement.active_standby(running),
            "hostStoreLags": query_placement.store_lags(
                running, (stores or {}) if alive else {}, updated_ms if alive else 0)}


def _hosts(context: ServerContext) -> dict[str, Any]:
    """``/clusterStatus``'s hosts: the members' heartbeats, the nodes that wrote to the log
    and sent none (UNKNOWN), and this node."""
    node = context.node
    hosts: dict[str, Any] = {}
    seen = set()
    members = context.membership.nodes() if context.membership is not None else []
    for beat, alive in members:
        seen.add(beat.node_id)
        hosts[beat.url or beat.node_id] = _host(beat.node_id, alive, beat.timestamp_ms,
                                                beat.state, beat.applied_offset, beat.queries,
                                                beat.stores, beat.image_fingerprint)
    for node_id in sorted(node.replica.origin_nodes):
        if node_id not in seen:
            hosts[node_id] = _host(node_id, False, 0, "UNKNOWN", None)
    if node.config.node_id not in seen:
        own = node.queries.statuses() if node.queries is not None else {}
        hosts[context.url or node.config.node_id] = _host(
            node.config.node_id, True, int(time.time() * 1000), node.state.value,
            node.replica.position - 1, {qid: state.to_json() for qid, state in own.items()},
            context.table_stores.positions() if context.table_stores is not None else {},
            node.replica.image.fingerprint)
    return hosts


def health_details(kafka: KafkaHealth, state: NodeState, runs_spark: bool = False,
                   spark_down: str | None = None) -> dict[str, dict[str, Any]]:
    """ksqlDB's healthcheck details, and this node's Spark where it runs one; each unhealthy
    part says why, in a ``reason``."""
    def detail(healthy: bool, reason: str | None, **extra: str) -> dict[str, Any]:
        return {"isHealthy": healthy, **extra, **({} if healthy else {"reason": reason})}

    ready = state is NodeState.READY
    return {
        "metastore": detail(kafka.command_topic_exists, kafka.reason if kafka.kafka_reachable
                            else "the command topic cannot be checked: Kafka did not answer"),
        "kafka": detail(kafka.kafka_reachable, kafka.reason),
        "commandRunner": detail(ready, f"the node is {state.value}, not READY",
                                state=state.value),
        **({"spark": detail(spark_down is None, spark_down)} if runs_spark else {}),
    }
