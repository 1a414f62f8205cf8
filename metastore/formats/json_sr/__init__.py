"""ksqlDB's JSON_SR format: JSON records behind Confluent's wire-format header (a zero magic byte
and the schema's 4-byte registry id), with a JSON Schema in the Schema Registry.

:mod:`.schema` derives the JSON Schema of a source's key or value from its columns, as ksqlDB
does; the JSON itself is the JSON format's. The columns a CREATE infers from a registered JSON
Schema are the catalog's (:mod:`metastore.formats.json_schema_columns`).
"""
