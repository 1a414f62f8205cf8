"""The REST server's routes, one module per family of ksqlDB's endpoints: statements
(``/ksql``), queries (``/query``, ``/query-stream``, ``/close-query``), inserts
(``/inserts-stream``), status (``/info``, ``/healthcheck``, ``/clusterStatus``, ``/status``,
``/v1/metastore``), metrics (``/metrics``) and the server (``/chc/live``, ``/chc/ready``,
``/v1/metadata``, ``/is_valid_property``, ``/``). Each builds an ``APIRouter`` over the
:class:`~metastore.server.http.context.ServerContext`."""
