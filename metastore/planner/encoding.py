"""Sink records in the sink's formats: Spark SQL expressions for the Kafka key, value and headers.

The inverse of the decoding in :mod:`metastore.spark.views`, byte for byte what ksqlDB writes:

- KAFKA: INTEGER as 4 bytes and BIGINT as 8 bytes big-endian, STRING as UTF-8, BYTES as is;
- JSON: an object of the columns (nulls kept), or the bare value for a single key column or an
  unwrapped single value (``WRAP_SINGLE_VALUE=false``); TIMESTAMP as epoch milliseconds, DATE as
  epoch days, BYTES as base64, as ksqlDB's JSON serializer does;
- DELIMITED: the columns' text joined by the delimiter, a null as an empty field;
- PROTOBUF_NOSR: a plain serialized message of the schema ksqlDB derives from the columns
  (:mod:`metastore.formats.protobuf.schema`), written by the project's JVM codec from the columns' JSON;
- AVRO: Confluent's wire format (magic byte, schema id, Avro binary) of the schema ksqlDB derives
  from the columns (:mod:`metastore.formats.avro.schema`), registered under the topic's subject, written
  by the project's JVM codec from the columns' JSON;
- PROTOBUF: the PROTOBUF_NOSR message behind Confluent's header and the message index ``0``,
  the id of the schema's ``.proto`` text (:mod:`metastore.formats.protobuf.proto_text`), registered;
- JSON_SR: the JSON format's text behind Confluent's header, the id of the JSON Schema ksqlDB
  derives from the columns (:mod:`metastore.formats.json_sr.schema`), registered under the subject;
- a windowed key (TUMBLING / HOPPING) is the key's bytes followed by the window start as an
  8-byte big-endian epoch-millisecond, ksqlDB's time-windowed key layout.

A null value is a tombstone.
"""

from __future__ import annotations

import re

from metastore.catalog.model import Column, DataSource
from metastore.formats.avro import schema as avro
from metastore.formats.json_sr import schema as json_sr
from metastore.formats.protobuf import schema as protobuf
from metastore.formats.written_schemas import WrittenSchema, written_schema
from metastore.spark import avro as spark_avro
from metastore.spark.protobuf import encode_binary, encode_framed
from metastore.spark.types import quote, string_literal
from metastore.sql import types as ty

SOURCE_HEADER = "metastore.source"
"""Header naming the source record (``topic/partition/offset``) an output record came from."""
TIMESTAMP_HEADER = "metastore.timestamp"
"""Header carrying a sink record's timestamp until the producer's interceptor applies it."""


def key_expression(sink: DataSource, window_start: str | None = None,
                   session_end: str | None = None) -> str:
    """The Kafka key of a sink record, from the typed sink columns (and the window start; a
    session's end before its start, Kafka Streams' session key layout)."""
    columns = sink.key_columns
    if not columns or sink.key_format == "NONE":
        return "CAST(NULL AS BINARY)"
    fmt = sink.key_format
    if fmt == "KAFKA":
        encoded = _kafka(quote(columns[0].name), columns[0].type)
    elif fmt == "JSON":
        encoded = (_bare_json(columns[0]) if len(columns) == 1 else _json_object(columns))
    elif fmt == "DELIMITED":
        all_null = " AND ".join(f"{quote(c.name)} IS NULL" for c in columns)
        encoded = (f"CASE WHEN {all_null} THEN NULL "
                   f"ELSE {_delimited(columns, sink.property('KEY_DELIMITER'))} END")
    elif fmt == protobuf.FORMAT:
        encoded = _protobuf(protobuf.key_schema(sink), columns)
    elif fmt == protobuf.SR_FORMAT:
        encoded = _protobuf(protobuf.key_schema(sink), columns, _written(sink, True))
    elif fmt == avro.FORMAT:
        encoded = _avro(avro.key_schema(sink), _written(sink, True), columns)
    elif fmt == json_sr.FORMAT:
        written = _written(sink, True)
        json_text = _bare_json(columns[0]) if len(columns) == 1 else _json_object(
            columns, json_sr.properties_beyond(written.text, columns))
        encoded = spark_avro.json_sr_binary(written, json_text)
    else:
        raise ValueError(f"key format {fmt} cannot be written")
    if window_start is not None and session_end is not None:
        return (f"concat(CAST({encoded} AS BINARY), {_int64(session_end)}, "
                f"{_int64(window_start)})")
    if window_start is not None:
        return f"concat(CAST({encoded} AS BINARY), {_int64(window_start)})"
    return encoded


def value_expression(sink: DataSource) -> str:
    """The Kafka value of a sink record, from the typed sink columns."""
    columns = sink.value_columns
    fmt = sink.value_format
    if fmt == "KAFKA":
        return _kafka(quote(columns[0].name), columns[0].type)
    if fmt == "JSON":
        if len(columns) == 1 and sink.property("WRAP_SINGLE_VALUE") == "false":
            return _bare_json(columns[0])
        return _json_object(columns)
    if fmt == "DELIMITED":
        return _delimited(columns, sink.property("VALUE_DELIMITER"))
    if fmt == protobuf.FORMAT:
        return _protobuf(protobuf.value_schema(sink), columns)
    if fmt == protobuf.SR_FORMAT:
        return _protobuf(protobuf.value_schema(sink), columns, _written(sink, False))
    if fmt == avro.FORMAT:
        return _avro(avro.value_schema(sink), _written(sink, False), columns)
    if fmt == json_sr.FORMAT:
        written = _written(sink, False)
        json_text = (_bare_json(columns[0]) if json_sr.value_schema(sink).unwrapped
                     else _json_object(columns, json_sr.properties_beyond(written.text, columns)))
        return spark_avro.json_sr_binary(written, json_text)
    raise ValueError(f"value format {fmt} cannot be written")


def _written(sink: DataSource, is_key: bool) -> WrittenSchema:
    schema = written_schema(sink, is_key)
    assert schema is not None, "a side in a registry format, with columns"
    return schema


def _protobuf(schema: protobuf.ProtobufSchema, columns: tuple[Column, ...],
              written: WrittenSchema | None = None) -> str:
    """ksqlDB's JSON of the columns (the bare value of an unwrapped one) as a message of the
    derived schema, by the project's JVM codec: a NULL unwrapped column is a NULL record, a row of
    NULLs an empty message. With a ``subject``, a PROTOBUF record, its schema registered."""
    json_text = _bare_json(columns[0]) if schema.unwrapped else _json_object(columns)
    if written is not None:
        return encode_framed(schema, written.subject, written.text, json_text,
                             written.references_json())
    return encode_binary(schema, json_text)


def _avro(schema: avro.AvroSchema, written: WrittenSchema, columns: tuple[Column, ...]) -> str:
    """ksqlDB's JSON of the columns (the bare value of an unwrapped one) as an AVRO record of the
    derived schema: a NULL unwrapped column is a NULL record."""
    json_text = _bare_json(columns[0]) if schema.unwrapped else _json_object(columns)
    return spark_avro.encode_binary(written, json_text)


def headers(rowtime: str, source_column: str | None, source_headers: str | None = None) -> str:
    """A sink record's headers: the source record's own (Kafka Streams carries them through,
    so ksqlDB's sinks have them), its timestamp (the source record's ROWTIME, which the
    producer's :data:`~metastore.jvm.classes.INTERCEPTOR_CLASS` moves into the record's
    timestamp) and, for a stream, the source record's coordinates, so duplicates can be
    recognised."""
    entries = [f"named_struct('key', {string_literal(TIMESTAMP_HEADER)}, "
               f"'value', {_int64(rowtime)})"]
    if source_column is not None:
        entries.append(f"named_struct('key', {string_literal(SOURCE_HEADER)}, "
                       f"'value', CAST({source_column} AS BINARY))")
    own = f"array({', '.join(entries)})"
    return own if source_headers is None else f"concat(coalesce({source_headers}, array()), {own})"


def _int64(expression: str) -> str:
    """8 bytes big-endian: Spark's cast of an integer to BINARY (a query's session runs with
    ANSI off, which allows it; see :mod:`metastore.runtime.job`)."""
    return f"CAST(CAST({expression} AS BIGINT) AS BINARY)"


def _kafka(expression: str, sql_type: ty.SqlType) -> str:
    if sql_type == ty.STRING:
        return f"CAST({expression} AS BINARY)"
    if sql_type == ty.BYTES:
        return expression
    if sql_type == ty.INTEGER:
        return f"CAST(CAST({expression} AS INT) AS BINARY)"
    if sql_type == ty.BIGINT:
        return _int64(expression)
    if sql_type == ty.DOUBLE:
        bits = f"java_method('java.lang.Double', 'doubleToLongBits', CAST({expression} AS DOUBLE))"
        return _int64(f"IF({expression} IS NULL, NULL, {bits})")  # null cannot be unboxed
    raise ValueError(f"KAFKA format cannot carry {sql_type.sql()}")


def _json_ready(column: Column) -> str:
    """The column as the value to_json must write (ksqlDB's JSON representation)."""
    return _json_value(quote(column.name), column.type, 0)


_JSON_SPECIAL = (ty.TIMESTAMP, ty.DATE, ty.BYTES)


def _json_value(expression: str, sql_type: ty.SqlType, depth: int) -> str:
    """``expression`` as ksqlDB's JSON holds it, at any depth: TIMESTAMP as epoch
    milliseconds, DATE as epoch days, BYTES as base64 (to_json would write text)."""
    if sql_type == ty.TIMESTAMP:
        return f"unix_millis({expression})"
    if sql_type == ty.DATE:
        return f"unix_date({expression})"
    if sql_type == ty.BYTES:
        return f"base64({expression})"
    if isinstance(sql_type, ty.Primitive) or not any(
            nested in _JSON_SPECIAL for nested in sql_type.walk()):
        return expression
    item = f"__ms_j{depth}"
    if isinstance(sql_type, ty.ArrayType):
        return f"transform({expression}, {item} -> {_json_value(item, sql_type.element, depth + 1)})"
    if isinstance(sql_type, ty.MapType):
        value = _json_value(item, sql_type.value, depth + 1)
        return f"transform_values({expression}, (__ms_k{depth}, {item}) -> {value})"
    if isinstance(sql_type, ty.StructType):
        fields = ", ".join(
            f"{string_literal(name)}, {_json_value(f'{expression}.{quote(name)}', field, depth + 1)}"
            for name, field in sql_type.fields)
        return f"IF({expression} IS NULL, NULL, named_struct({fields}))"
    return expression


def _json_object(columns: tuple[Column, ...], nulls: list[str] | None = None) -> str:
    """The columns as a JSON object, and NULL fields named ``nulls`` after them."""
    fields = ", ".join([*(f"{string_literal(c.name)}, {_json_ready(c)}" for c in columns),
                        *(f"{string_literal(name)}, CAST(NULL AS STRING)" for name in nulls or ())])
    return f"to_json(named_struct({fields}), map('ignoreNullFields', 'false'))"


def _bare_json(column: Column) -> str:
    wrapped = f"to_json(named_struct('v', {_json_ready(column)}), map('ignoreNullFields', 'false'))"
    pattern = string_literal(r'^\{"v":(.*)\}$')
    return (f"CASE WHEN {quote(column.name)} IS NULL THEN NULL "
            f"ELSE regexp_extract({wrapped}, {pattern}, 1) END")


def _delimited(columns: tuple[Column, ...], delimiter: str | None) -> str:
    separator = {"TAB": "\t", "SPACE": " "}.get((delimiter or ",").upper(), delimiter or ",")
    fields = []
    for index, column in enumerate(columns):
        text = _json_ready(column) if column.type in (ty.TIMESTAMP, ty.DATE, ty.BYTES) else (
            quote(column.name))
        if isinstance(column.type, ty.DecimalType):  # plain digits, never 0E-16
            text = f"replace(format_number({quote(column.name)}, {column.type.scale}), ',', '')"
        fields.append(_csv_field(f"CAST({text} AS STRING)", separator, first=index == 0))
    return f"concat_ws({string_literal(separator)}, {', '.join(fields)})"


def _csv_field(text: str, separator: str, first: bool) -> str:
    """A DELIMITED field as ksqlDB's CSV printer (commons-csv, minimal quoting) writes it: NULL
    as nothing, and quoted (quotes doubled) when holding the separator, a quote or a line
    break, when ending in whitespace, when starting with a character up to '#' (the record's
    first field: with anything but a letter or digit), and when empty as the first field."""
    special = string_literal("[" + re.escape(separator + '"') + "\r\n]")
    quoted = f"""concat('"', replace({text}, '"', '""'), '"')"""
    empty = string_literal('""' if first else "")
    starts = f"ascii({text}) <= 35" if not first else f"NOT {text} RLIKE '^[0-9A-Za-z]'"
    return (f"CASE WHEN {text} IS NULL THEN '' "
            f"WHEN {text} = '' THEN {empty} "
            f"WHEN {text} RLIKE {special} OR {starts} "
            f"OR ascii(right({text}, 1)) <= 32 THEN {quoted} ELSE {text} END")

