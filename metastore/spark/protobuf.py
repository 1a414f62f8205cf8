"""Spark SQL over PROTOBUF_NOSR and PROTOBUF records: calls of the project's JVM codecs.

Spark's ``from_protobuf`` / ``to_protobuf`` live in the spark-protobuf connector, which the
project does not ship; PROTOBUF_NOSR records are decoded and encoded instead by a static method of
the project's Java jar (:data:`~metastore.jvm.classes.PROTOBUF_CODEC_CLASS`), called with
``java_method``. That call passes and returns strings only: a record travels as base64, a decoded
value as ksqlDB's JSON representation of it, which :mod:`metastore.spark.views` reads and
:mod:`metastore.planner.encoding` writes as it does for the JSON format. ``java_method`` returns
a Java null as the text ``null``, which no base64 record and no decoded message can be.

A PROTOBUF record is the same message behind Confluent's header and message indexes
(:data:`~metastore.jvm.classes.PROTOBUF_SR_CODEC_CLASS`), its schema's ``.proto`` text
registered under the topic's subject when it is written.
"""

from __future__ import annotations

from metastore.formats.protobuf.schema import ProtobufSchema
from metastore.jvm.classes import PROTOBUF_CODEC_CLASS, PROTOBUF_SR_CODEC_CLASS
from metastore.spark.types import string_literal


def _call(method: str, schema: ProtobufSchema, *arguments: str,
          codec: str = PROTOBUF_CODEC_CLASS) -> str:
    return (f"nullif(java_method({string_literal(codec)}, {string_literal(method)}, "
            f"{string_literal(schema.spec)}, {', '.join(arguments)}), 'null')")


def decode_json(schema: ProtobufSchema, binary: str, framed: bool = False) -> str:
    """The record ``binary`` (a BINARY expression; ``framed``: a PROTOBUF record) as JSON
    text; NULL for NULL."""
    codec = PROTOBUF_SR_CODEC_CLASS if framed else PROTOBUF_CODEC_CLASS
    call = _call("decode", schema, f"base64({binary})", codec=codec)
    return f"CASE WHEN {binary} IS NULL THEN NULL ELSE {call} END"


def encode_binary(schema: ProtobufSchema, json_text: str) -> str:
    """The JSON text ``json_text`` (ksqlDB's JSON of the value) as a record; NULL for NULL."""
    return f"unbase64({_call('encode', schema, json_text)})"


def encode_framed(schema: ProtobufSchema, subject: str, proto_text: str, json_text: str,
                  references_json: str = "[]") -> str:
    """The JSON text as a PROTOBUF record of ``schema``, whose ``proto_text`` is registered
    under ``subject`` (with the registered schemas it imports: ``references_json``, the
    registry's JSON of their references); NULL for NULL."""
    call = _call("encode", schema, string_literal(subject), string_literal(proto_text),
                 string_literal(references_json), json_text, codec=PROTOBUF_SR_CODEC_CLASS)
    return f"unbase64({call})"
