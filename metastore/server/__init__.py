"""A running node: the node itself (``node``: the command log's reader and writer, its image,
Spark and the queries it owns), its settings, the composition root that builds and serves it
(``build``), and its ksqlDB-compatible HTTP edge (``http``)."""
