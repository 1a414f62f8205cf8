"""Test records as Kafka bytes and back, in the formats of the source or sink that owns a topic.

Inputs are encoded the way a ksqlDB producer would write them for the source declared on their
topic (KAFKA primitives big-endian, JSON, DELIMITED text, PROTOBUF_NOSR messages of the schema
derived from the columns); sink records are decoded into the test's representation (JSON values;
DELIMITED and KAFKA strings as text; PROTOBUF_NOSR as ksqlDB's test driver reads it, a NULL
primitive as its default), windowed keys split into the key and its window. A topic no source
declares is written as text or JSON.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from metastore.catalog.model import Column, DataSource
from metastore.formats import written_schemas
from metastore.formats.protobuf import schema as protobuf
from metastore.formats.protobuf import values as protobuf_values
from metastore.kafka.row_encoding import (
    KafkaBytes,
    RowEncodingError,
    encode_key,
    encode_value,
    generic,
)
from metastore.sql import types as ty
from metastore.testing.cases import CaseRecord, Window

RecordCodecError = RowEncodingError
"""A test record that cannot be written in its topic's format."""
REGISTRY_FORMATS = frozenset(written_schemas.REGISTRY_FORMATS)
"""Formats whose records the runner writes and reads through a Schema Registry codec."""
RegistryEncoder = Callable[[Any, bool], bytes | None]
"""A key (True) or value (False) as a record of a Schema Registry format."""
RegistryDecoder = Callable[[bytes, str], Any]
"""A record of a Schema Registry format (the second argument) as the test's JSON value."""


def encode(record: CaseRecord, source: DataSource | None,
           registry: RegistryEncoder | None = None) -> KafkaBytes:
    if source is None:
        return KafkaBytes(generic(record.key), generic(record.value))
    if registry is not None and source.key_format in REGISTRY_FORMATS:
        key = registry(record.key, True)
    else:
        key = encode_key(record.key, source)
    if record.window is not None and key is not None:
        if record.window.kind == "SESSION":  # Kafka Streams' session key: end, then start
            key += struct.pack(">q", record.window.end)
        key += struct.pack(">q", record.window.start)
    if registry is not None and source.value_format in REGISTRY_FORMATS:
        return KafkaBytes(key, registry(record.value, False))
    return KafkaBytes(key, encode_value(record.value, source))


# -- decoding sink records ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DecodedKey:
    key: Any
    window: Window | None


def decode_key(raw: bytes | None, sink: DataSource | None,
               registry: RegistryDecoder | None = None) -> DecodedKey:
    if raw is None:
        return DecodedKey(None, None)
    if sink is None:
        return DecodedKey(_text_or_json(raw), None)
    window: Window | None = None
    if sink.window is not None and sink.window.kind != "SESSION" and len(raw) >= 8:
        start = struct.unpack(">q", raw[-8:])[0]
        raw = raw[:-8]
        window = Window(start, start + (sink.window.size_ms or 0), "TIME")
    elif sink.window is not None and len(raw) >= 16:
        end, start = struct.unpack(">q", raw[-16:-8])[0], struct.unpack(">q", raw[-8:])[0]
        raw = raw[:-16]
        window = Window(start, end, "SESSION")
    columns = sink.key_columns
    if sink.key_format == "NONE" or not columns:
        return DecodedKey(None if sink.key_format == "NONE" else _text_or_json(raw), window)
    if sink.key_format == "KAFKA":
        return DecodedKey(_from_kafka(raw, columns[0]), window)
    if sink.key_format == "JSON":
        return DecodedKey(_json(raw), window)
    if sink.key_format == protobuf.FORMAT:
        return DecodedKey(_from_protobuf(protobuf.key_schema(sink), raw), window)
    if sink.key_format == protobuf.SR_FORMAT:
        return DecodedKey(_from_framed_protobuf(protobuf.key_schema(sink), raw), window)
    if registry is not None and sink.key_format in REGISTRY_FORMATS:
        return DecodedKey(registry(raw, sink.key_format), window)
    return DecodedKey(raw.decode(errors="replace"), window)


def decode_value(raw: bytes | None, sink: DataSource | None,
                 registry: RegistryDecoder | None = None) -> Any:
    if raw is None:
        return None
    if sink is None:
        return _text_or_json(raw)
    if sink.value_format == "KAFKA" and sink.value_columns:
        return _from_kafka(raw, sink.value_columns[0])
    if sink.value_format == "JSON":
        return _json(raw)
    if sink.value_format == protobuf.FORMAT:
        return _from_protobuf(protobuf.value_schema(sink), raw)
    if sink.value_format == protobuf.SR_FORMAT:
        return _from_framed_protobuf(protobuf.value_schema(sink), raw)
    if registry is not None and sink.value_format in REGISTRY_FORMATS:
        return registry(raw, sink.value_format)
    return raw.decode(errors="replace")


def _from_protobuf(schema: protobuf.ProtobufSchema, raw: bytes) -> Any:
    """A PROTOBUF_NOSR record as ksqlDB's test driver reads it; bytes that are not a message of
    the schema are shown as hex, so the verdict reports them."""
    try:
        return protobuf_values.decode(schema, raw)
    except protobuf_values.ProtobufValueError:
        return f"<not {schema.message}: {raw.hex()}>"


def _from_framed_protobuf(schema: protobuf.ProtobufSchema, raw: bytes) -> Any:
    """A PROTOBUF record: the message after Confluent's header and message indexes."""
    message = protobuf_values.unframed(raw)
    if message is None:
        return f"<not a PROTOBUF record: {raw.hex()}>"
    return _from_protobuf(schema, message)


def _from_kafka(raw: bytes, column: Column) -> Any:
    if column.type == ty.INTEGER and len(raw) == 4:
        return struct.unpack(">i", raw)[0]
    if column.type == ty.BIGINT and len(raw) == 8:
        return struct.unpack(">q", raw)[0]
    if column.type == ty.DOUBLE and len(raw) == 8:
        return struct.unpack(">d", raw)[0]
    if column.type == ty.BYTES:
        return base64.b64encode(raw).decode()
    return raw.decode(errors="replace")


def _json(raw: bytes) -> Any:
    """A JSON record as ksqlDB's test driver reads it: a number with a fraction or exponent as
    the exact decimal it spells (``3.40`` keeps its scale), so a DECIMAL compares by its text."""
    try:
        return json.loads(raw, parse_float=Decimal)
    except ValueError:
        return raw.decode(errors="replace")


def _text_or_json(raw: bytes) -> Any:
    text = raw.decode(errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text
