"""Spark SQL over AVRO and JSON_SR records: calls of the project's JVM codec and registry calls.

Records are decoded and encoded by static methods of the project's Java jar
(:data:`~metastore.jvm.classes.AVRO_CODEC_CLASS`), called with ``java_method``, as PROTOBUF_NOSR
records are (:mod:`metastore.spark.protobuf`): a record travels as base64, a decoded value as
ksqlDB's JSON representation of it. The codec reads the Schema Registry from the session's
configuration (:data:`REGISTRY_URL_CONF`), so no URL, and no credential, is part of a query's text.

A JSON_SR record is the JSON format's text behind Confluent's 5-byte header: read after it, and
written after the header of the sink's schema, registered by the JVM's registry calls.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from metastore.formats.json_sr.schema import HEADER_BYTES
from metastore.formats.written_schemas import WrittenSchema
from metastore.jvm.classes import AVRO_CODEC_CLASS, REGISTRY_CALLS_CLASS
from metastore.schema_registry.client import redacted
from metastore.spark.types import string_literal

REGISTRY_URL_CONF = "spark.metastore.schemaRegistry.url"
"""The Spark configuration naming the Schema Registry the codec calls (driver and executors)."""
REGISTRY_USER_INFO_CONF = "spark.metastore.schemaRegistry.password"
"""Its credentials (``user:password``), apart from the URL, under a key Spark's redaction hides
(``spark.redaction.regex``) in its UI and event logs."""


def registry_conf(url: str) -> dict[str, str]:
    """The Spark configuration of a session whose queries read and write through ``url``."""
    parts = urlsplit(url)
    conf = {REGISTRY_URL_CONF: redacted(url)}
    if parts.username is not None:
        conf[REGISTRY_USER_INFO_CONF] = parts.netloc.rsplit("@", 1)[0]  # as written: encoded
    return conf


def _call(method: str, *arguments: str, of: str = AVRO_CODEC_CLASS) -> str:
    return (f"nullif(java_method({string_literal(of)}, {string_literal(method)}, "
            f"{', '.join(arguments)}), 'null')")


def decode_json(binary: str) -> str:
    """The record ``binary`` (a BINARY expression) as JSON text; NULL for NULL."""
    return f"CASE WHEN {binary} IS NULL THEN NULL ELSE {_call('decode', f'base64({binary})')} END"


def encode_binary(schema: WrittenSchema, json_text: str) -> str:
    """The JSON text ``json_text`` (ksqlDB's JSON of the value) as a record of ``schema``,
    registered under its subject; NULL for NULL."""
    call = _call("encode", string_literal(schema.text), string_literal(schema.subject), json_text)
    return f"unbase64({call})"


def json_sr_text(binary: str) -> str:
    """The JSON text of the JSON_SR record ``binary``; NULL for NULL or a record without the
    header's magic byte."""
    return (f"IF(length({binary}) >= {HEADER_BYTES} AND substring({binary}, 1, 1) = X'00', "
            f"CAST(substring({binary}, {HEADER_BYTES + 1}) AS STRING), NULL)")


def json_sr_binary(schema: WrittenSchema, json_text: str) -> str:
    """The JSON text ``json_text`` as a JSON_SR record of ``schema``, registered under its
    subject; NULL for NULL."""
    header = _call("header", string_literal(schema.schema_type), string_literal(schema.subject),
                   string_literal(schema.text), of=REGISTRY_CALLS_CLASS)
    return f"concat(unbase64({header}), CAST({json_text} AS BINARY))"
