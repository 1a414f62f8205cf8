"""One typed registry of ksqlDB's functions: each declared once (names, kind, signatures,
return-type rule, null behaviour, Spark translation) in a module per family; see
:mod:`metastore.functions.registry` for the shape and :mod:`metastore.functions.library` for the
operations the typer, the runtime check and the planner use."""
