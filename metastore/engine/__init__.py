"""What a statement means and whether it may be written, as ksqlDB's engine decides it: the
query analysis (scope, typer, keys, joins, aggregation), the validator against a snapshot of the
catalog, DDL and WITH-clause rules, configuration overrides, pull-query rules, the columns a
statement infers from the Schema Registry, INSERT VALUES records, and the REST entities of
statements that read."""
