"""The Spark catalog objects that stand for one stream or table.

Each source becomes two objects in the service's database:

- ``_kafka_<name>``: a table ``USING kafka`` over the source's topic, read read_committed from
  the earliest offset (the raw records, with headers);
- ``<name>``: a view that decodes key and value with the declared formats into the declared
  columns, key columns first. A table's view keeps the latest row per key and drops tombstones.

KAFKA, JSON and DELIMITED are decoded by Spark SQL alone; PROTOBUF_NOSR and AVRO records by the
project's JVM codecs (:mod:`metastore.spark.protobuf`, :mod:`metastore.spark.avro`) into ksqlDB's
JSON of the key or value, which is then read as the JSON format is, as is a JSON_SR record's
JSON after its wire-format header.

Each object carries a ``metastore.spec`` property: a hash of everything that defines it, so
reconciliation compares hashes, never definitions.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from metastore.catalog.model import Column, DataSource
from metastore.formats.avro import schema as avro
from metastore.formats.json_sr import schema as json_sr
from metastore.formats.protobuf import schema as protobuf
from metastore.formats.rules import SPARK_READABLE
from metastore.jvm.classes import JSON_FIELDS_FUNCTION, JSON_KINDS_CLASS, KAFKA_NUMBER_FUNCTIONS
from metastore.kafka.settings import KafkaSettings
from metastore.spark import avro as spark_avro
from metastore.spark.protobuf import decode_json
from metastore.spark.types import quote, spark_type, string_literal
from metastore.sql import types as ty
from metastore.sql.statements import ColumnRole, SourceKind

KAFKA_TYPES = (ty.INTEGER, ty.BIGINT, ty.DOUBLE, ty.STRING, ty.BYTES)
"""The types ksqlDB's KAFKA format can carry (Kafka's own serializers)."""
READABLE = SPARK_READABLE | {*protobuf.FORMATS, avro.FORMAT, json_sr.FORMAT}
"""Formats the Spark projection and the runtime decode."""
DECODED_KEY = "__ms_decoded_key"
DECODED_VALUE = "__ms_decoded_value"
"""A PROTOBUF_NOSR or AVRO record's key and value decoded once into JSON text, which the columns
read."""
WINDOWED_KEY = "__ms_windowed_key"
"""A windowed source's key without its window suffix, which the key columns read."""
WINDOW = "__MS_WINDOW"
"""A windowed source's window, a struct of TIMESTAMPs ``start`` and ``end``."""
RAW_PREFIX = "_kafka_"
SPEC_PROPERTY = "metastore.spec"


@dataclass
class _JsonObjects:
    """The JSON objects a source's columns are fields of, as :func:`decode_select` gathers
    them: each object's text (SQL) and the columns read from it, in order
    (``fields``); and the positions of the columns whose JSON kinds are read too (``kinded``)."""

    fields: dict[str, list[Column]] = field(default_factory=dict)
    kinded: dict[str, set[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class CatalogObject:
    """One object the projection wants in Spark: its name, kind, spec hash and definition.

    A table (``USING kafka``) is defined by its ``options``; a view by its ``text`` (a SELECT),
    its ``columns`` and their Spark types (``schema``, DDL). Both carry ``properties``, the
    ``metastore.*`` table properties, the spec hash among them."""

    database: str
    name: str
    is_view: bool
    spec: str
    properties: Mapping[str, str]
    options: Mapping[str, str] = field(default_factory=dict)
    text: str = ""
    columns: tuple[str, ...] = ()
    schema: str = ""


def database_name(service_id: str) -> str:
    return "ms_" + re.sub(r"[^0-9a-zA-Z_]", "_", service_id).lower()


def object_name(source_name: str) -> str:
    """Spark lower-cases catalog names; quoted mixed-case names keep their own spelling."""
    return source_name.lower()


def raw_name(source_name: str) -> str:
    return RAW_PREFIX + source_name.lower()


def _spec(parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def objects_for(source: DataSource, database: str, kafka_options: Mapping[str, str]
                ) -> tuple[CatalogObject, CatalogObject]:
    raw = raw_name(source.name)
    options = raw_options(source.topic, kafka_options)
    raw_spec = _spec(["raw", options])
    select = decode_select(source, f"{quote(database)}.{quote(raw)}")
    view_spec = _spec(["view", select, source.kind.value, raw_spec])
    properties = {SPEC_PROPERTY: view_spec, "metastore.kind": source.kind.value,
                  "metastore.topic": source.topic, "metastore.keyFormat": source.key_format,
                  "metastore.valueFormat": source.value_format}
    columns = view_columns(source)
    return (CatalogObject(database, raw, False, raw_spec, {SPEC_PROPERTY: raw_spec},
                          options=options),
            CatalogObject(database, object_name(source.name), True, view_spec, properties,
                          text=select, columns=tuple(name for name, _ in columns),
                          schema=", ".join(f"{quote(name)} {type_}" for name, type_ in columns)))


def spark_kafka_options(settings: KafkaSettings) -> dict[str, str]:
    """A node's Kafka settings as options of Spark's Kafka source and sink: each Java client
    setting after ``kafka.``."""
    return {f"kafka.{name}": value for name, value in settings.java_config().items()}


def raw_options(topic: str, kafka_options: Mapping[str, str]) -> dict[str, str]:
    """The options of every Spark read of ``topic`` (the raw table over it, a query's streaming
    and batch reads): read_committed, with its headers, from the earliest offset unless the
    query says otherwise, the node's client settings last."""
    return {"subscribe": topic, "startingOffsets": "earliest",
            "kafka.isolation.level": "read_committed", "includeHeaders": "true",
            "failOnDataLoss": "false", **kafka_options}


FETCH_MAX_WAIT_MS = "10"
"""How long the broker may hold a fetch of a query's read that finds no records (Kafka's
default: 500 ms). A micro-batch reads offset ranges known to hold records, but the consumer's
fetch past a range's end is still in flight when the next micro-batch reads that partition,
which then waits it out: a filter's micro-batch of a few records took 403 ms at 500 ms and
208 ms at 10 (``python -m integration.bench fetch-wait`` and ``queries-per-node``), and a
node's filter plan over two partitions on one core 1.56 s against 0.49 s. The suite's query
tests take as long either way (611 s of test time at 10 ms, 619 s at 500 ms)."""


def query_read_options(topic: str, kafka_options: Mapping[str, str]) -> dict[str, str]:
    """The options of a query's read of ``topic`` (persistent, push, ``metastore test``'s): the
    :func:`raw_options`, and the broker's fetch wait :data:`FETCH_MAX_WAIT_MS` unless the
    node's settings give one. The catalog's raw tables keep :func:`raw_options` alone, so their
    specs, and a node's catalog, are those of earlier releases."""
    options = raw_options(topic, kafka_options)
    options.setdefault("kafka.fetch.max.wait.ms", FETCH_MAX_WAIT_MS)
    return options


def view_columns(source: DataSource) -> list[tuple[str, str]]:
    """The columns of a source's view and their Spark types, as :func:`decode_select` selects
    them: the declared columns, with a windowed source's ``WINDOWSTART``, ``WINDOWEND`` after
    its key columns (unless the source cannot be decoded)."""
    columns = [(c.name, spark_type(c.type)) for c in source.columns]
    if source.window is not None and _unsupported(source) is None:
        keys = sum(c.is_key for c in source.columns)
        columns[keys:keys] = [("WINDOWSTART", "BIGINT"), ("WINDOWEND", "BIGINT")]
    return columns


# -- decoding ----------------------------------------------------------------------------------------
def decode_select(source: DataSource, raw_table: str, extra: tuple[str, ...] = (),
                  readable_as: str | None = None) -> str:
    """A SELECT over the raw Kafka table producing the declared columns, in order (a windowed
    source's view: its window bounds ``WINDOWSTART``, ``WINDOWEND`` after its key columns).

    ``extra`` select items over the raw columns (``offset AS ROWOFFSET``...) are appended when the
    source is read as a stream (a record per Kafka record, no latest-per-key). A windowed source's
    keys are read without their window, which ``extra`` may select as ``__MS_WINDOW``
    (:func:`_with_window`). A table's records without a key are dropped, as Kafka Streams' table
    source drops them.

    Records that cannot be read are dropped, unless ``readable_as`` (with ``extra``) names a
    BOOLEAN column that says whether each one is readable: then the caller counts the
    unreadable ones and drops them.
    """
    problem = _unsupported(source)
    if problem is not None:
        message = string_literal(f"{source.name} cannot be queried through Spark yet: {problem}")
        columns = ", ".join(f"CAST(raise_error({message}) AS {spark_type(c.type)}) AS {quote(c.name)}"
                            for c in source.columns)
        return f"SELECT {columns} FROM {raw_table}"
    objects = _JsonObjects()
    checks: list[str] = []
    expressions = [f"{_column_expression(source, c, objects, checks)} AS {quote(c.name)}"
                   for c in source.columns]
    names = [quote(c.name) for c in source.columns]
    if source.window is not None and not extra:  # a view shows each row's window, as ksqlDB
        keys = sum(c.is_key for c in source.columns)
        bounds = [f"unix_millis({WINDOW}.{bound}) AS {name}"
                  for bound, name in (("start", "WINDOWSTART"), ("end", "WINDOWEND"))]
        expressions[keys:keys] = bounds
        names[keys:keys] = ["WINDOWSTART", "WINDOWEND"]
    checks += [*_codec_checks(source), *_object_checks(objects)]
    raw_table = _with_json_objects(objects, _with_codecs(source, _with_window(source, raw_table)))
    readable = f"NOT ({' OR '.join(checks)})" if checks else "TRUE"
    if extra:
        items = [*expressions, *extra, *([f"{readable} AS {readable_as}"] if readable_as else [])]
        where = [*([] if readable_as else [readable]),
                 *(["key IS NOT NULL"] if source.kind is SourceKind.TABLE else [])]
        return (f"SELECT {', '.join(items)} FROM {raw_table}"
                + (f" WHERE {' AND '.join(where)}" if where else ""))
    decoded = f"SELECT {', '.join(expressions)} FROM {raw_table} WHERE {readable}"
    if source.kind is SourceKind.STREAM:
        return decoded
    listed = ", ".join(names)
    return (f"SELECT {listed} FROM (SELECT {', '.join(expressions)}, value IS NULL AS __tombstone, "
            "row_number() OVER (PARTITION BY key ORDER BY partition DESC, offset DESC) AS __latest "
            f"FROM {raw_table} WHERE key IS NOT NULL AND {readable}) "
            "WHERE __latest = 1 AND NOT __tombstone")


def _codec_checks(source: DataSource) -> list[str]:
    """A record whose AVRO, PROTOBUF or JSON_SR key or value its codec cannot decode (bytes
    that are not the format, a schema id the registry does not hold, no magic byte) is not
    readable."""
    checks = []
    key = WINDOWED_KEY if source.window is not None else "key"
    if source.key_columns and source.key_format in (*protobuf.FORMATS, avro.FORMAT,
                                                    json_sr.FORMAT):
        checks.append(f"({key} IS NOT NULL AND {DECODED_KEY} IS NULL)")
    if source.value_format in (*protobuf.FORMATS, avro.FORMAT, json_sr.FORMAT):
        checks.append(f"(value IS NOT NULL AND {DECODED_VALUE} IS NULL)")
    return checks


def _object_checks(objects: _JsonObjects) -> list[str]:
    """A JSON key or value whose columns are an object's fields is not readable when it is not
    a JSON object (not JSON at all, or a number, a string, an array), as ksqlDB's JSON
    deserializer refuses it; JSON ``null`` is a null value, not an error."""
    return [f"({_object_fields(index)}[{2 * len(columns)}] IS NOT NULL)"
            for index, columns in enumerate(objects.fields.values())]


def _checked(text: str, decoded: str, checks: list[str], sql_type: ty.SqlType,
             empty_is_null: bool = False) -> str:
    """``decoded`` (from ``text``), with its check added to ``checks``: a value present whose
    conversion gives NULL makes its record unreadable (ksqlDB's deserializers fail on it and the
    record is skipped), where Spark's casts would turn it into a NULL column; so does an array
    or a map with an element its type refuses (Spark reads that element as NULL)."""
    absent = f"{text} IS NULL OR trim({text}) = 'null'"
    if empty_is_null:
        absent += f" OR {text} = ''"
    refused = f"({decoded}) IS NULL"
    if isinstance(sql_type, ty.ArrayType | ty.MapType):
        array = isinstance(sql_type, ty.ArrayType)
        as_text = f"from_json({text}, '{'ARRAY<STRING>' if array else 'MAP<STRING,STRING>'}')"

        def nulls(value: str) -> str:
            return f"size(filter({value if array else f'map_values({value})'}, e -> e IS NULL))"

        refused += f" OR {nulls(decoded)} > {nulls(as_text)}"
    checks.append(f"(NOT ({absent}) AND ({refused}))")
    return decoded


def _with_window(source: DataSource, raw_table: str) -> str:
    """``raw_table`` with a windowed source's key split as Kafka Streams' windowed serdes write
    it: the inner key (``__ms_windowed_key``), then the window start (TUMBLING, HOPPING: the last
    8 bytes; the window's end is the start plus WINDOW_SIZE) or, for SESSION, the end then the
    start (8 bytes each); ``__MS_WINDOW`` is NULL for a record without a (long enough) key."""
    window = source.window
    if window is None:
        return raw_table
    session = window.kind == "SESSION"
    suffix = 16 if session else 8
    start = _int64_at("key", "length(key) - 7")
    end = _int64_at("key", "length(key) - 15") if session else f"{start} + {window.size_ms or 0}"
    valid = f"key IS NOT NULL AND length(key) >= {suffix}"
    inner = f"IF({valid}, substring(key, 1, length(key) - {suffix}), NULL)"
    bounds = (f"IF({valid}, named_struct('start', timestamp_millis({start}), "
              f"'end', timestamp_millis({end})), NULL)")
    return (f"(SELECT *, {inner} AS {WINDOWED_KEY}, {bounds} AS {WINDOW} FROM {raw_table}) "
            "AS __ms_windowed")


def _int64_at(raw: str, position: str) -> str:
    """The big-endian 8-byte integer at 1-based ``position`` of a binary that holds it."""
    return f"{KAFKA_NUMBER_FUNCTIONS['BIGINT']}(substring({raw}, {position}, 8))"


def _with_codecs(source: DataSource, raw_table: str) -> str:
    """``raw_table`` with a PROTOBUF_NOSR or AVRO key and value decoded once per record (a codec
    is a non-deterministic ``java_method`` call, which Spark evaluates once when it sits below the
    projection that reads it many times)."""
    decoded = []
    key = WINDOWED_KEY if source.window is not None else "key"
    if source.key_format in protobuf.FORMATS and source.key_columns:
        framed = source.key_format == protobuf.SR_FORMAT
        decoded.append(f"{decode_json(protobuf.key_schema(source), key, framed)} AS {DECODED_KEY}")
    elif source.key_format == avro.FORMAT and source.key_columns:
        decoded.append(f"{spark_avro.decode_json(key)} AS {DECODED_KEY}")
    elif source.key_format == json_sr.FORMAT and source.key_columns:
        decoded.append(f"{spark_avro.json_sr_text(key)} AS {DECODED_KEY}")
    if source.value_format in protobuf.FORMATS:
        framed = source.value_format == protobuf.SR_FORMAT
        decoded.append(f"{decode_json(protobuf.value_schema(source), 'value', framed)} "
                       f"AS {DECODED_VALUE}")
    elif source.value_format == avro.FORMAT:
        decoded.append(f"{spark_avro.decode_json('value')} AS {DECODED_VALUE}")
    elif source.value_format == json_sr.FORMAT:
        decoded.append(f"{spark_avro.json_sr_text('value')} AS {DECODED_VALUE}")
    if not decoded:
        return raw_table
    return f"(SELECT *, {', '.join(decoded)} FROM {raw_table}) AS __ms_decoded"


def _with_json_objects(objects: _JsonObjects, raw_table: str) -> str:
    """``raw_table`` with each JSON object whose fields are columns (``objects``: the text's
    SQL and the columns read from it, in order) read once per record by the project's
    ``json_fields`` (:data:`~metastore.jvm.classes.JSON_FIELDS_FUNCTION`: one streaming pass
    that finds each column's field as ksqlDB's JSON deserializer does), then the text of each
    column's field (:func:`_field_column`) and, for the columns whose JSON kind matters,
    whether that field is a JSON string (:func:`_string_column`). The call is non-deterministic
    for Spark's optimizer (``spark_partition_id()``, which never holds a negative value): Spark
    keeps it in a projection of its own, below the ones that read it, where it would inline
    (and repeat) it into each column and check."""
    if not objects.fields:
        return raw_table
    calls, fields = [], []
    for index, (text, columns) in enumerate(objects.fields.items()):
        names = string_literal(json.dumps([c.name for c in columns], separators=(",", ":")))
        call = f"IF(spark_partition_id() < 0, NULL, {JSON_FIELDS_FUNCTION}({text}, {names}))"
        calls.append(f"{call} AS {_object_fields(index)}")
        for position in range(len(columns)):
            fields.append(f"{_object_fields(index)}[{2 * position}] AS "
                          f"{_field_column(index, position)}")
            if position in objects.kinded.get(text, set()):
                fields.append(f"{_object_fields(index)}[{2 * position + 1}] IS NOT NULL AS "
                              f"{_string_column(index, position)}")
    return (f"(SELECT *, {', '.join(fields)} FROM (SELECT *, {', '.join(calls)} "
            f"FROM {raw_table}) AS __ms_json) AS __ms_json_fields")


def _object_fields(index: int) -> str:
    """The ``index``-th object's fields as ``json_fields`` reads them: per column its text and
    whether it is a JSON string, then NULL, or ``refused`` for a record that is no object."""
    return f"__ms_json_{index}"


def _string_column(index: int, position: int) -> str:
    return f"__ms_json_{index}_s{position}"


def _field_column(index: int, position: int) -> str:
    return f"__ms_json_{index}_f{position}"


def _field_of(fields: str, upper: str, name: str) -> str:
    """ksqlDB's JSON field of the column ``name``: the field of that exact name, else the one
    whose upper-cased name is ``name`` (KsqlJsonDeserializer): of names repeated in other
    cases, the one first seen last, as ``fields`` (a map built LAST_WIN, which keeps a repeated
    key where it first came) and ``upper`` (that map by upper-cased name, LAST_WIN) give it."""
    literal = string_literal(name)
    return f"IF(map_contains_key({fields}, {literal}), {fields}[{literal}], {upper}[{literal}])"


def decode_problem(source: DataSource) -> str | None:
    """Why Spark cannot decode ``source``'s records yet, or None."""
    return _unsupported(source)


def _unsupported(source: DataSource) -> str | None:
    for fmt in (source.key_format, source.value_format):
        if fmt not in READABLE:
            return f"the {fmt} format is not supported by the Spark projection"
    problem = protobuf.source_problem(source)
    if problem is not None:
        return problem
    key_columns = source.key_columns
    if source.key_format == "KAFKA" and key_columns and key_columns[0].type not in KAFKA_TYPES:
        return f"KAFKA keys of type {key_columns[0].type.sql()} are not decoded yet"
    if source.value_format == "KAFKA" and source.value_columns and (
            source.value_columns[0].type not in KAFKA_TYPES):
        return f"KAFKA values of type {source.value_columns[0].type.sql()} are not decoded yet"
    return None


def _column_expression(source: DataSource, column: Column, objects: _JsonObjects,
                       checks: list[str]) -> str:
    """The SQL of ``column`` over the raw record; a JSON object's fields come from a column that
    parses it once, which is added to ``objects`` (see :func:`_with_json_objects`)."""
    if column.role is ColumnRole.HEADERS:  # a record without headers has none: []
        return "coalesce(headers, array())"
    if column.role is ColumnRole.HEADER:
        return (f"element_at(filter(headers, h -> h.key = {string_literal(column.header_key or '')}), "
                "-1).value")
    if column.is_key:
        columns = source.key_columns
        if source.key_format in protobuf.FORMATS:
            return _json_field(DECODED_KEY, column, objects, checks,
                               bare=protobuf.key_schema(source).unwrapped)
        if source.key_format in (avro.FORMAT, json_sr.FORMAT):
            return _json_field(DECODED_KEY, column, objects, checks, bare=len(columns) == 1,
                               kinds=source.key_format == json_sr.FORMAT)
        key = WINDOWED_KEY if source.window is not None else "key"
        return _field(source.key_format, key, columns, column,
                      source.property("KEY_DELIMITER"), objects, checks, wrapped=True)
    columns = source.value_columns
    wrapped = source.property("WRAP_SINGLE_VALUE") != "false"
    if source.value_format in protobuf.FORMATS:
        return _json_field(DECODED_VALUE, column, objects, checks,
                           bare=protobuf.value_schema(source).unwrapped)
    if source.value_format in (avro.FORMAT, json_sr.FORMAT):
        return _json_field(DECODED_VALUE, column, objects, checks,
                           bare=len(columns) == 1 and not wrapped,
                           kinds=source.value_format == json_sr.FORMAT)
    return _field(source.value_format, "value", columns, column,
                  source.property("VALUE_DELIMITER"), objects, checks, wrapped)


def _field(fmt: str, raw: str, columns: tuple[Column, ...], column: Column, delimiter: str | None,
           objects: _JsonObjects, checks: list[str], wrapped: bool) -> str:
    text = f"CAST({raw} AS STRING)"
    if fmt == "KAFKA":
        size = _KAFKA_SIZES.get(column.type)
        if size is not None:  # Kafka's Integer, Long and Double deserializers refuse another size
            checks.append(f"({raw} IS NOT NULL AND octet_length({raw}) != {size})")
        return _kafka_bytes(raw, column.type)
    if fmt == "DELIMITED":
        index = [c.name for c in columns].index(column.name)
        separator = {"TAB": "\t", "SPACE": " "}.get((delimiter or ",").upper(), delimiter or ",")
        fields = ", ".join(f"c{i} STRING" for i in range(len(columns)))
        options = (f"map('sep', {string_literal(separator)}, 'ignoreLeadingWhiteSpace', 'false', "
                   "'ignoreTrailingWhiteSpace', 'false')")
        element = f"from_csv({text}, {string_literal(fields)}, {options}).c{index}"
        count_check = _field_count_check(raw, text, len(columns), separator)
        if count_check not in checks:
            checks.append(count_check)
        decoded = _from_delimited(element, column.type)
        range_check = _range_check(f"nullif({element}, '')", decoded, column.type)
        if range_check is not None:
            checks.append(range_check)
        return _checked(element, decoded, checks, column.type, empty_is_null=True)
    if fmt == "JSON":
        is_key = raw in ("key", WINDOWED_KEY)
        return _json_field(text, column, objects, checks,
                           bare=len(columns) == 1 and (is_key or not wrapped), kinds=True)
    raise ValueError(f"format {fmt} is not decodable")


_QUOTED = string_literal('"[^"]*+(?:""[^"]*+)*+"')
"""A double-quoted DELIMITED field (its delimiters are text), possessive: Java's regex engine
recurses per character on an alternation, and a long field would overflow its stack."""


def _field_count_check(raw: str, text: str, count: int, separator: str) -> str:
    """A DELIMITED key or value whose record has fewer or more fields than its ``count``
    columns is not readable, as ksqlDB's deserializer refuses it ("Unexpected field count"):
    the fields are the delimiters outside quotes plus one (an empty field is a field)."""
    unquoted = f"regexp_replace({text}, {_QUOTED}, '')"
    delimiter = string_literal("\\Q" + separator + "\\E")
    return f"({raw} IS NOT NULL AND size(split({unquoted}, {delimiter}, -1)) != {count})"


def _json_field(text: str, column: Column, objects: _JsonObjects, checks: list[str],
                bare: bool, kinds: bool = False) -> str:
    """``column`` from ksqlDB's JSON text of a key or value: the value itself when ``bare``
    (a single unwrapped column), else the object's field for the column, read from the
    object's fields found once per record (its text and column added to ``objects``,
    :func:`_with_json_objects`); its check (:func:`_checked`) added to ``checks``, and with
    ``kinds`` (JSON a producer wrote, not a codec) the check of the values nested in it
    (:func:`nested_kinds_check`)."""
    if bare:
        value = text
        decoded = _from_json_value(text, column.type)
    else:
        columns = objects.fields.setdefault(text, [])
        columns.append(column)
        index = list(objects.fields).index(text)
        value = _field_column(index, len(columns) - 1)
        kind_check = _kind_check(text, index, len(columns) - 1, column, objects)
        if kind_check is not None:
            checks.append(kind_check)
        decoded = _from_text(value, column.type)
    if kinds:
        for check in (nested_kinds_check(value, column.type),
                      _range_check(value, decoded, column.type, json_text=bare)):
            if check is not None:
                checks.append(check)
    return _checked(value, decoded, checks, column.type)


_MILLIS_PER_DAY = 86_400_000


def _range_check(text: str, decoded: str, sql_type: ty.SqlType, json_text: bool = False
                 ) -> str | None:
    """The check refusing a DECIMAL or TIME value ksqlDB's JSON and DELIMITED deserializers
    refuse although Spark's cast reads it: a DECIMAL that does not fit its precision and scale
    without rounding (``DecimalUtil.ensureFit``: Spark would round ``1.005`` to ``1.01``), a TIME
    outside a day's milliseconds (``SerdeUtils.returnTimeOrThrow``). ``text`` is the value's
    text: a number's, or a string's content, unless ``json_text`` (a bare JSON value, which may
    be a quoted string). None for the other types."""
    if sql_type == ty.TIME:
        return f"coalesce(NOT ({decoded} BETWEEN 0 AND {_MILLIS_PER_DAY}), false)"
    if not isinstance(sql_type, ty.DecimalType):
        return None
    kinds = string_literal(JSON_KINDS_CLASS)
    if json_text:
        descriptor = string_literal(json.dumps(_kinds_descriptor(sql_type), separators=(",", ":")))
        fits = f"java_method({kinds}, 'accepts', {text}, {descriptor})"
    else:
        fits = (f"java_method({kinds}, 'fitsDecimal', {text}, {sql_type.precision}, "
                f"{sql_type.scale})")
    return f"coalesce({fits} = 'false', false)"


def nested_kinds_check(text: str, sql_type: ty.SqlType) -> str | None:
    """For a column whose type nests others (an ARRAY, a MAP, a STRUCT), the check that refuses
    its JSON ``text`` when ksqlDB's JSON deserializer refuses a value at any level of it
    (:data:`~metastore.jvm.classes.JSON_KINDS_CLASS`), where Spark's from_json reads a nested
    value by its text (``["41.5"]`` as ``[41]``) or turns one of the wrong kind into NULL; None
    for a type that nests nothing."""
    if not isinstance(sql_type, ty.ArrayType | ty.MapType | ty.StructType):
        return None
    descriptor = string_literal(json.dumps(_kinds_descriptor(sql_type), separators=(",", ":")))
    return (f"({text} IS NOT NULL AND java_method({string_literal(JSON_KINDS_CLASS)}, "
            f"'accepts', {text}, {descriptor}) = 'false')")


def _kinds_descriptor(sql_type: ty.SqlType) -> dict[str, object]:
    """``sql_type`` as the descriptor :data:`~metastore.jvm.classes.JSON_KINDS_CLASS` reads."""
    if isinstance(sql_type, ty.ArrayType):
        return {"t": "ARRAY", "e": _kinds_descriptor(sql_type.element)}
    if isinstance(sql_type, ty.MapType):
        return {"t": "MAP", "v": _kinds_descriptor(sql_type.value)}
    if isinstance(sql_type, ty.StructType):
        return {"t": "STRUCT", "f": [[name, _kinds_descriptor(field)]
                                     for name, field in sql_type.fields]}
    if isinstance(sql_type, ty.DecimalType):
        return {"t": "DECIMAL", "p": sql_type.precision, "s": sql_type.scale}
    return {"t": sql_type.base}


def _kind_check(text: str, index: int, position: int, column: Column, objects: _JsonObjects
                ) -> str | None:
    """The check of the JSON kind of ``column``'s field (:func:`_kind_refusal`), the
    ``position``-th of the ``index``-th object ``text``, from whether that field is a JSON
    string (:func:`_string_column`, which the column is then added to ``objects.kinded`` for)."""
    refusal = _kind_refusal(_field_column(index, position), _string_column(index, position),
                            column.type)
    if refusal is None:
        return None
    objects.kinded.setdefault(text, set()).add(position)
    return f"({refusal})"


_INTEGER_TEXT = "'^[+-]?[0-9]+$'"
"""A string Java's ``Long.parseLong`` reads: digits with an optional sign."""
_INTEGRAL = (ty.INTEGER, ty.BIGINT, ty.TIME, ty.DATE, ty.TIMESTAMP)


def _kind_refusal(text: str, is_string: str, sql_type: ty.SqlType) -> str | None:
    """When ksqlDB's JSON deserializer refuses a field by its JSON kind, which its text alone
    does not show (JsonSerdeUtils): a BOOLEAN only from ``true`` or ``false``, an array, a
    map or a struct never from a string holding its JSON, an integral type (and DATE, TIME,
    TIMESTAMP) from a number (its fraction cut off) or a string of digits only, BYTES only
    from a string (base64). None when the text decides."""
    if sql_type == ty.BOOLEAN or isinstance(sql_type, ty.ArrayType | ty.MapType | ty.StructType):
        return is_string
    if sql_type in _INTEGRAL:
        return f"{is_string} AND NOT ({text} RLIKE {_INTEGER_TEXT})"
    if sql_type == ty.BYTES:
        return f"{text} IS NOT NULL AND NOT {is_string}"
    return None


_KAFKA_SIZES: dict[ty.SqlType, int] = {ty.INTEGER: 4, ty.BIGINT: 8, ty.DOUBLE: 8}
"""The bytes of a KAFKA-format number, as Kafka's serializers write it."""


def _kafka_bytes(raw: str, sql_type: ty.SqlType) -> str:
    if sql_type == ty.STRING:
        return f"CAST({raw} AS STRING)"
    if sql_type == ty.BYTES:
        return raw
    size = _KAFKA_SIZES[sql_type]  # other sizes are refused (:func:`_field`): no number then
    return (f"IF(octet_length({raw}) = {size}, {KAFKA_NUMBER_FUNCTIONS[sql_type.base]}({raw}), "
            "NULL)")


def _from_json_value(text: str, sql_type: ty.SqlType) -> str:
    """A bare JSON value (not an object field), of any type."""
    if _needs_lenient_json(sql_type):
        return _from_text(text, sql_type)
    wrapped = f"concat('{{\"v\":', {text}, '}}')"
    read = _convert(f"from_json({wrapped}, {string_literal('v ' + _json_read_type(sql_type))}).v",
                    sql_type)
    if isinstance(sql_type, ty.Primitive) and sql_type not in (ty.STRING, ty.BYTES, ty.BOOLEAN):
        # a JSON string is read by its content ("10" is the INT 10), as ksqlDB's JSON
        # deserializer reads the text of a number, a boolean or a time
        string = f"get_json_object({wrapped}, '$.v')"
        content = _from_text(string, sql_type)
        if sql_type in _INTEGRAL:  # a string of digits only; a number with its fraction cut off
            content = f"IF({string} RLIKE {_INTEGER_TEXT}, {content}, NULL)"
            read = _from_text(text, sql_type)
        return f"IF(startswith(ltrim({text}), '\"'), {content}, {read})"
    return read


def _from_delimited(expression: str, sql_type: ty.SqlType) -> str:
    """A DELIMITED field as ksqlDB's deserializer parses it: a BOOLEAN is true for ``true`` in
    any case and false for anything else (Java's ``Boolean.parseBoolean``), an integer (and a
    DATE, TIME, TIMESTAMP) is its digits only, with an optional sign (``41.5`` is no INT:
    ``Long.parseLong``); the other types as a JSON field's text."""
    if sql_type == ty.BOOLEAN:
        return f"lower({expression}) = 'true'"
    if sql_type in _INTEGRAL:
        return f"IF({expression} RLIKE {_INTEGER_TEXT}, {_from_text(expression, sql_type)}, NULL)"
    return _from_text(expression, sql_type)


def _from_text(expression: str, sql_type: ty.SqlType) -> str:
    """A value held as text (a DELIMITED field, or a JSON field's text) converted to its type."""
    if _needs_lenient_json(sql_type):
        return _lenient_json(expression, sql_type, depth=0)
    if isinstance(sql_type, ty.ArrayType | ty.MapType):
        return f"from_json({expression}, {string_literal(spark_type(sql_type))})"
    if sql_type == ty.BYTES:
        return f"unbase64({expression})"
    if sql_type in (ty.DATE, ty.TIMESTAMP):  # ksqlDB's JSON and DELIMITED hold them as numbers
        return _convert(_integral(expression, "BIGINT"), sql_type)
    if sql_type == ty.STRING:
        return expression
    if sql_type == ty.BOOLEAN:  # only true and false (Spark's cast takes 't', 'yes', '1'...)
        return f"CASE lower({expression}) WHEN 'true' THEN true WHEN 'false' THEN false END"
    if sql_type in (ty.INTEGER, ty.BIGINT, ty.TIME):
        return _integral(expression, spark_type(sql_type))
    return f"try_cast({expression} AS {spark_type(sql_type)})"


def _integral(expression: str, spark_integral: str) -> str:
    """A number's text as an integer type, its fraction cut off (``41.5`` is 41, as ksqlDB's
    JSON deserializer reads a number); NULL for text that is no number or does not fit, under
    Spark's ANSI mode or not."""
    return (f"coalesce(try_cast({expression} AS {spark_integral}), "
            f"try_cast(try_cast({expression} AS DOUBLE) AS {spark_integral}))")


_TEXT_LEAVES = (ty.INTEGER, ty.BIGINT, ty.TIME, ty.TIMESTAMP, ty.DATE, ty.DOUBLE)
"""Values from_json reads otherwise than ksqlDB: ``2.0`` or ``"5"`` is no INT or TIME for it, a
number is a TIMESTAMP in seconds (ksqlDB: milliseconds) or no DATE at all (ksqlDB: days), and a
string holding a number (``"1.5"``) is no DOUBLE or DECIMAL for it."""


def _text_leaf(sql_type: ty.SqlType) -> bool:
    return sql_type in _TEXT_LEAVES or isinstance(sql_type, ty.DecimalType)


def _needs_lenient_json(sql_type: ty.SqlType) -> bool:
    """Whether Spark's from_json cannot read ``sql_type`` as ksqlDB's JSON format does: struct
    fields match case-insensitively, and numbers are read as ksqlDB reads them
    (:data:`_TEXT_LEAVES`)."""
    return not isinstance(sql_type, ty.Primitive | ty.DecimalType) and any(
        isinstance(nested, ty.StructType) or _text_leaf(nested) for nested in sql_type.walk())


def _lenient(sql_type: ty.SqlType) -> bool:
    return _text_leaf(sql_type) or _needs_lenient_json(sql_type)


def _lenient_json(text: str, sql_type: ty.SqlType, depth: int) -> str:
    """JSON text as ``sql_type`` the way ksqlDB's JSON deserializer reads it, where Spark's
    from_json differs (see :func:`_needs_lenient_json`): containers are read as text, level by
    level, and each value converted from its text."""
    item = f"__ms_v{depth}"
    if isinstance(sql_type, ty.StructType):  # the object parsed once, bound to a lambda's
        # argument: its text written out at each use would grow with the depth exponentially
        fields = f"__ms_m{depth}"
        upper = (f"transform_keys({fields}, (__ms_k{depth}, {item}) -> "
                 f"upper(__ms_k{depth}))")
        members = ", ".join(
            f"{string_literal(name)}, "
            f"{_lenient_json(_field_of(fields, upper, name), field, depth + 1)}"
            for name, field in sql_type.fields)
        return (f"transform(array(from_json({text}, 'MAP<STRING,STRING>')), {fields} -> "
                f"CASE WHEN {fields} IS NULL THEN NULL ELSE named_struct({members}) END)[0]")
    if isinstance(sql_type, ty.ArrayType) and _lenient(sql_type.element):
        element = _lenient_json(item, sql_type.element, depth + 1)
        return f"transform(from_json({text}, 'ARRAY<STRING>'), {item} -> {element})"
    if isinstance(sql_type, ty.MapType) and _lenient(sql_type.value):
        value = _lenient_json(item, sql_type.value, depth + 1)
        return (f"transform_values(from_json({text}, 'MAP<STRING,STRING>'), "
                f"(__ms_k{depth}, {item}) -> {value})")
    return _from_text(text, sql_type)


def _json_read_type(sql_type: ty.SqlType) -> str:
    if sql_type == ty.TIMESTAMP:
        return "BIGINT"
    if sql_type == ty.DATE:
        return "INT"
    return spark_type(sql_type)


def _convert(expression: str, sql_type: ty.SqlType) -> str:
    if sql_type == ty.TIMESTAMP:
        return f"timestamp_millis({expression})"
    if sql_type == ty.DATE:
        return f"date_from_unix_date({expression})"
    return expression
