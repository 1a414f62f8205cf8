"""The Schema Registry formats' schemas: AVRO, JSON_SR and PROTOBUF schemas built from a
source's columns and read back, their values, and the schema a source's records are written
with (``written_schemas``)."""
