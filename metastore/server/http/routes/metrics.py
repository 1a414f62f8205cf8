"""``GET /metrics``: the node's Prometheus text, its gauges read at each scrape from the parts
that count (the writer, the replica, the lanes, the forwarder, the queries, the table stores,
the Spark projection) and the request counters and latency of :class:`NodeMetrics`."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response

from metastore.log.reader import NodeState
from metastore.runtime.runner import ERROR, RUNNING, QueryState
from metastore.runtime.statistics import QueryFigures
from metastore.server.http.concurrency import Lane
from metastore.server.http.context import ServerContext
from metastore.server.http.metrics import Series

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
                                      [s.value for s in NodeState],
                                      [_image_series(context), *_query_series(context)])
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
        gauges["metastore_record_processing_errors_total"] = (
            "Rows this node's persistent queries could not process (ksqlDB's record "
            "processing errors).", float(context.node.queries.record_errors.total()))
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


QUERY_SERIES: dict[str, tuple[str, Callable[[QueryState], float | None]]] = {
    "metastore_query_up": (
        "1 when the query runs on this node, 0 when it failed here (ERROR); none when paused.",
        lambda q: {RUNNING: 1.0, ERROR: 0.0}.get(q.state)),
    "metastore_query_failures": (
        "The query's failures in a row on this node: 0 once it completes a micro-batch.",
        lambda q: float(q.failures)),
    "metastore_query_lag": ("Source records the query has not read yet.",
                            lambda q: None if q.lag is None else float(q.lag)),
    "metastore_query_records_in_total": ("Source records the query read on this node.",
                                         lambda q: _figures(q).consumed_total()),
    "metastore_query_records_in_per_second": (
        "Source records per second over the last 30 s (0 once it read none for 30 s).",
        lambda q: _figures(q).consumed_per_second()),
    "metastore_query_records_out_total": (
        "Records the query wrote to its sink on this node.",
        lambda q: _figures(q).produced_total()),
    "metastore_query_records_out_per_second": (
        "Records written per second over the last 30 s (0 once it wrote none for 30 s).",
        lambda q: _figures(q).produced_per_second()),
    "metastore_query_records_skipped_total": (
        "Source records the query skipped because it cannot deserialize them.",
        lambda q: float(sum(q.skipped.values()))),
    "metastore_query_processing_errors_total": (
        "Rows the query could not process (a CAST, a division, a function that fails on "
        "them): ksqlDB's record processing errors, each in the processing log.",
        lambda q: float(q.record_errors)),
    "metastore_query_batch_duration_seconds": (
        "Duration of the query's last micro-batch.",
        lambda q: _figures(q).batch_seconds()),
    "metastore_query_state_rows": (
        "Rows the query's state keeps (aggregations, joins), as its last micro-batch left it.",
        lambda q: _figures(q).kept_rows()),
}
"""Per query this node owns, labelled ``query_id``: name, (help, value or None for none)."""


def _image_series(context: ServerContext) -> Series:
    """The catalog's fingerprint at the applied offset: nodes at one offset must agree."""
    node = context.node
    return Series("metastore_image_info",
                  "1, labelled with the catalog's fingerprint and the offset applied; nodes of "
                  "a service at the same offset have the same fingerprint.",
                  [({"fingerprint": node.replica.image.fingerprint[:16],
                     "offset": str(node.replica.position - 1)}, 1.0)])


def _query_series(context: ServerContext) -> list[Series]:
    runner = context.node.queries
    owned = sorted(runner.statuses().items()) if runner is not None else []
    series = []
    for name, (help_text, value_of) in QUERY_SERIES.items():
        samples = [({"query_id": query_id}, value) for query_id, state in owned
                   if (value := value_of(state)) is not None]
        series.append(Series(name, help_text, samples))
    return series


def _figures(state: QueryState) -> QueryFigures:
    return QueryFigures.from_json(state.statistics)


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
