"""ksqlDB's AVRO format: Avro records in Confluent's wire format, with a Schema Registry.

:mod:`.schema` derives the Avro schema of a source's key or value from its columns, as ksqlDB
does. Spark reads and writes the records through the project's JVM codec
(``jvm/src/main/java/io/metastore/avro/``, called by :mod:`metastore.spark.avro`), which
fetches a record's writer schema by its id and registers the schemas it writes. The inverse,
the columns a CREATE infers from a registered schema, is the catalog's
(:mod:`metastore.formats.avro_columns`).
"""
