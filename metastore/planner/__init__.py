"""A query compiled into the Spark SQL of a Structured Streaming job, as a plan of steps.

``support`` decides at validation whether the Spark runtime can run a query; ``strategy`` takes
the planner's decisions once from the query's analysis and ``plan`` follows them into a
:class:`~metastore.planner.steps.QueryPlan`; the other modules write one kind of step each
(stateful stages, keyed table and stream state, joins in Spark's terms, the sink's encoding).
Planning is pure: it reads the catalog's image and writes SQL, it runs nothing."""
