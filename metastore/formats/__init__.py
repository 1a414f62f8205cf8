"""The serialization formats: which exist and what each supports (``rules``), the Schema
Registry formats' schemas built from a source's columns and read back (``avro``, ``json_sr``,
``protobuf``), the columns a registry schema gives (``avro_columns``, ``json_schema_columns``,
``protobuf_columns``, with the ``.proto`` reader ``proto_files``), the registry schemas a source
keeps (``kept_schemas``) and the schema its records are written with (``written_schemas``)."""
