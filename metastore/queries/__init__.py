"""Persistent queries (CSAS, CTAS, INSERT INTO ... SELECT) run as Spark Structured Streaming jobs.

``support`` decides at validation whether the Spark runtime can run a query, ``plan`` compiles a
query into Spark SQL, ``encoding`` writes sink records in the sink's formats, ``assignment``
decides which node runs which query (a Kafka consumer group), ``runner`` keeps a node's running
Spark queries equal to the queries of the image it owns, and ``status`` reports state, owner
and lag.
"""
