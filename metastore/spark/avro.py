"""Spark SQL over AVRO records: calls of the project's JVM codec.

Records are decoded and encoded by static methods of the project's Java jar
(:data:`~metastore.local.jars.AVRO_CODEC_CLASS`), called with ``java_method``, as PROTOBUF_NOSR
records are (:mod:`metastore.spark.protobuf`): a record travels as base64, a decoded value as
ksqlDB's JSON representation of it. The codec reads the Schema Registry from the session's
configuration (:data:`REGISTRY_URL_CONF`), so no URL, and no credential, is part of a query's text.
"""

from __future__ import annotations

from metastore.avro.schema import AvroSchema
from metastore.local.jars import AVRO_CODEC_CLASS
from metastore.spark.types import string_literal

REGISTRY_URL_CONF = "spark.metastore.schemaRegistry.url"
"""The Spark configuration naming the Schema Registry the codec calls (driver and executors)."""


def _call(method: str, *arguments: str) -> str:
    return (f"nullif(java_method({string_literal(AVRO_CODEC_CLASS)}, {string_literal(method)}, "
            f"{', '.join(arguments)}), 'null')")


def decode_json(binary: str) -> str:
    """The record ``binary`` (a BINARY expression) as JSON text; NULL for NULL."""
    return f"CASE WHEN {binary} IS NULL THEN NULL ELSE {_call('decode', f'base64({binary})')} END"


def encode_binary(schema: AvroSchema, subject: str, json_text: str) -> str:
    """The JSON text ``json_text`` (ksqlDB's JSON of the value) as a record of ``schema``,
    registered under ``subject``; NULL for NULL."""
    return (f"unbase64({_call('encode', string_literal(schema.text), string_literal(subject), json_text)})")
