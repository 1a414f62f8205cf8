"""``GET /metrics``: the node's Prometheus text, its gauges read at each scrape from the parts
that count (the writer, the replica, the lanes, the forwarder, the queries, the table stores,
the Spark projection) and the request counters and latency of :class:`NodeMetrics`."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response

from metastore.log.reader import NodeState
from metastore.server.http.concurrency import Lane
from metastore.server.http.context import ServerContext

Gauges = dict[str, tuple[str, float]]
"""Name: (help, value)."""


def router(context: ServerContext) -> APIRouter:
    api = APIRouter()

    @api.get("/metrics", response_class=PlainTextResponse)
    @context.threads.endpoint(Lane.HEALTH)
    def prometheus() -> Response:
        gauges = {**_log_gauges(context), **_lane_gauges(context), **_query_gauges(context),
                  **_spark_gauges(context)}
        text = context.metrics.render(gauges, context.node.state.value,
                                      [s.value for s in NodeState])
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    return api


def _log_gauges(context: ServerContext) -> Gauges:
    node = context.node
    writer = node.writer
    end = node.end_offset()
    applied = node.replica.position
    return {
        "metastore_applied_offset": ("Offset of the last record applied (or marker passed).",
                                     float(applied - 1)),
        "metastore_log_end_offset": ("Last stable offset of the command log.",
                                     float(end if end is not None else -1)),
        "metastore_lag": ("Offsets not applied yet.", float(max((end or 0) - applied, 0))),
        "metastore_fenced_retries_total": ("Write attempts retried after fencing or abort.",
                                           float(writer.stats.fenced_retries if writer else 0)),
        "metastore_transactions_total": ("Transactions committed by this node.",
                                         float(writer.stats.transactions if writer else 0)),
        "metastore_producers_created_total": ("Transactional producers created (each one "
                                              "init_transactions).",
                                              float(writer.stats.producers_created
                                                    if writer else 0)),
        "metastore_records_applied_total": ("Command records applied to the image.",
                                            float(node.replica.records_applied)),
        "metastore_write_batches_total": ("Batches of queued write requests this node's "
                                          "writer took (group commit).",
                                          float(writer.queue_stats.batches if writer else 0)),
        "metastore_write_batch_requests_total": ("Write requests taken into those batches.",
                                                 float(writer.queue_stats.batched_requests
                                                       if writer else 0)),
    }


def _lane_gauges(context: ServerContext) -> Gauges:
    gauges: Gauges = {
        f"metastore_http_{lane.value}_in_flight": (
            f"HTTP requests of the {lane.value} lane in flight (an own bound and threads).",
            float(context.in_flight[lane]))
        for lane in Lane}
    forwarder = context.forwarder
    if forwarder is not None:
        gauges["metastore_writes_forwarded_total"] = (
            "Write requests this node forwarded to the service's writer and answered with "
            "its verdict.", float(forwarder.stats.forwarded))
        gauges["metastore_forwards_written_here_total"] = (
            "Forwards that failed and were written on this node instead.",
            float(forwarder.stats.written_here))
    return gauges


def _query_gauges(context: ServerContext) -> Gauges:
    gauges: Gauges = {}
    if context.node.queries is not None:
        gauges["metastore_records_skipped_total"] = (
            "Records this node's persistent and push queries skipped because they cannot "
            "deserialize them.", float(context.node.queries.skipped.total()))
    push_queries = context.push_queries
    if push_queries is not None:
        gauges["metastore_push_queries"] = ("Push queries running on this node.",
                                            float(push_queries.running))
        gauges["metastore_spark_streaming_queries"] = (
            "Spark StreamingQueries active on this node (persistent and push queries).",
            float(push_queries.active_spark_queries()))
    stores = context.table_stores
    if stores is not None:
        gauges["metastore_table_stores"] = ("Tables kept materialized for pull queries.",
                                            float(stores.tables))
        gauges["metastore_pull_queries_from_stores_total"] = (
            "Pull queries answered from a materialized table, not by Spark.",
            float(stores.answered))
    return gauges


def _spark_gauges(context: ServerContext) -> Gauges:
    node = context.node
    spark = node.projection.status if node.projection is not None else None
    if spark is None:
        return {}
    return {
        "metastore_spark_in_sync": ("1 when the Spark catalog equals the image.",
                                    float(spark.in_sync and spark.image is node.replica.image)),
        "metastore_spark_catalog_calls_total": ("Spark catalog calls made by the projection.",
                                                float(spark.total_catalog_calls)),
        "metastore_spark_reconcile_passes_total": ("Reconciliations that touched Spark.",
                                                   float(spark.passes)),
        "metastore_spark_last_reconcile_seconds": ("Duration of the last reconciliation.",
                                                   spark.last.seconds),
    }
