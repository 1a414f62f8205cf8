"""ksqlDB's PROTOBUF_NOSR format: Protobuf without a schema registry.

:mod:`.schema` derives the Protobuf message of a source's key or value from its columns, as
ksqlDB does; :mod:`.values` converts ksqlDB's JSON representation of values to and from those
messages' bytes in Python (the test runner's records). Spark reads and writes them through the
project's JVM codec (``jvm/src/main/java/io/metastore/protobuf/``, called by
:mod:`metastore.spark.protobuf`), which follows the same rules.
"""
