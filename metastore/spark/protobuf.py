"""Spark SQL over PROTOBUF_NOSR records: calls of the project's JVM codec.

Spark's ``from_protobuf`` / ``to_protobuf`` live in the spark-protobuf connector, which the
project does not ship; PROTOBUF_NOSR records are decoded and encoded instead by a static method of
the project's Java jar (:data:`~metastore.local.jars.PROTOBUF_CODEC_CLASS`), called with
``java_method``. That call passes and returns strings only: a record travels as base64, a decoded
value as ksqlDB's JSON representation of it, which :mod:`metastore.spark.views` reads and
:mod:`metastore.queries.encoding` writes as it does for the JSON format. ``java_method`` returns
a Java null as the text ``null``, which no base64 record and no decoded message can be.
"""

from __future__ import annotations

from metastore.local.jars import PROTOBUF_CODEC_CLASS
from metastore.protobuf.schema import ProtobufSchema
from metastore.spark.types import string_literal


def _call(method: str, schema: ProtobufSchema, argument: str) -> str:
    return (f"nullif(java_method({string_literal(PROTOBUF_CODEC_CLASS)}, {string_literal(method)}, "
            f"{string_literal(schema.spec)}, {argument}), 'null')")


def decode_json(schema: ProtobufSchema, binary: str) -> str:
    """The record ``binary`` (a BINARY expression) as JSON text; NULL for NULL."""
    return f"CASE WHEN {binary} IS NULL THEN NULL ELSE {_call('decode', schema, f'base64({binary})')} END"


def encode_binary(schema: ProtobufSchema, json_text: str) -> str:
    """The JSON text ``json_text`` (ksqlDB's JSON of the value) as a record; NULL for NULL."""
    return f"unbase64({_call('encode', schema, json_text)})"
