"""Persistent and push queries running on the node's Spark: ``assignment`` decides which node
runs which query (a Kafka consumer group), ``runner`` keeps a node's running Spark queries equal
to the queries of the image it owns, ``job`` starts one plan, ``checkpoints`` keeps their
state, ``status`` reports state, owner and lag, ``push`` and ``materialized`` serve push and
pull queries, ``skipped`` and ``processing_log`` account for records a query cannot read."""
