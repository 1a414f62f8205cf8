"""ksqlDB's rules on a CREATE STREAM / TABLE's columns and WITH clause, in the stages ksqlDB
checks them (the first stage that fails decides the error):

1. building the statement (``AstBuilder``): each column's HEADER/HEADERS type, duplicate column
   names (``TableElements``), the WITH clause (``CreateSourceProperties``: its typed values,
   unknown names, FORMAT conflicts, window type and size), then KEY on a table / PRIMARY KEY on
   a stream, located at the column;
2. the formats (``DefaultFormatInjector``, ``DefaultSchemaInjector``): the protobuf-only
   properties, then each side's format and the properties it is given (``FormatFactory.of``:
   ``JSON does not support the following configs: [delimiter]``), then its schema id; then
   the topic (``TopicCreateInjector``: no CLEANUP_POLICY, the topic or PARTITIONS, no
   RETENTION_MS for a table);
3. the schema (``SchemaRegisterInjector``): at least one column, one HEADERS column or distinct
   HEADER keys (``LogicalSchema.Builder``), value wrapping (``SerdeFeaturesFactory``), and for the
   Avro format the names the schema registered would hold;
4. ``CreateSourceFactory`` (reserved names, timestamp, existing source, key, serdes) and the
   command itself (``Windowed sources require a key column.``), checked in validation.py.

Errors of stage 1 but the located key ones start with ``Failed to prepare statement: ``, as
ksqlDB's parser reports them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from metastore.catalog.exceptions import FormatError, PropertyError, SchemaError
from metastore.catalog.model import Column
from metastore.formats import rules as formats
from metastore.sql import statements as st
from metastore.sql import types as ty
from metastore.sql.durations import DurationError, parse_duration_ms

PREPARE = "Failed to prepare statement: "
WINDOW_TYPES = ("SESSION", "HOPPING", "TUMBLING")
CONFIG_TYPES: tuple[tuple[str, str], ...] = (
    ("WINDOW_TYPE", "STRING"), ("WINDOW_SIZE", "STRING"), ("SOURCE_CONNECTOR", "STRING"),
    ("SOURCED_BY_CONNECTOR", "STRING"), ("KAFKA_TOPIC", "STRING"), ("PARTITIONS", "INT"),
    ("REPLICAS", "SHORT"), ("RETENTION_MS", "LONG"), ("VALUE_FORMAT", "STRING"),
    ("TIMESTAMP", "STRING"), ("TIMESTAMP_FORMAT", "STRING"), ("WRAP_SINGLE_VALUE", "BOOLEAN"),
    ("KEY_PROTOBUF_NULLABLE_REPRESENTATION", "STRING"),
    ("VALUE_PROTOBUF_NULLABLE_REPRESENTATION", "STRING"),
    ("VALUE_AVRO_SCHEMA_FULL_NAME", "STRING"), ("KEY_SCHEMA_FULL_NAME", "STRING"),
    ("VALUE_SCHEMA_FULL_NAME", "STRING"), ("KEY_DELIMITER", "STRING"),
    ("VALUE_DELIMITER", "STRING"), ("KEY_FORMAT", "STRING"), ("FORMAT", "STRING"),
    ("KEY_SCHEMA_ID", "INT"), ("VALUE_SCHEMA_ID", "INT"), ("CLEANUP_POLICY", "STRING"),
)
"""ksqlDB's CreateConfigs, in the order its ConfigDef parses them."""
CREATE_PROPERTIES = frozenset(name for name, _ in CONFIG_TYPES)
CREATE_ONLY = frozenset({"WINDOW_TYPE", "WINDOW_SIZE", "SOURCE_CONNECTOR", "SOURCED_BY_CONNECTOR"})
"""CreateConfigs beyond CommonCreateConfigs: a C*AS (CreateAsConfigs) does not know them."""
AS_SELECT_PROPERTIES = CREATE_PROPERTIES - CREATE_ONLY
NULLABLE_REPRESENTATIONS = ("OPTIONAL", "WRAPPER")
_SUPPORTED_PROPERTIES: dict[str, tuple[str, ...]] = {
    "AVRO": ("fullSchemaName", "schemaId"),
    "JSON_SR": ("fullSchemaName", "schemaId"),
    "PROTOBUF": ("fullSchemaName", "schemaId", "unwrapPrimitives", "nullableRepresentation",
                 "subjectName"),
    "PROTOBUF_NOSR": ("unwrapPrimitives", "nullableRepresentation"),
    "DELIMITED": ("delimiter",),
}
_AVRO_NAMESPACE = "io.confluent.ksql.avro_schemas"
_AVRO_VALUE_NAME = f"{_AVRO_NAMESPACE}.KsqlDataSourceSchema"


# -- stage 1: the statement -------------------------------------------------------------------
def check_header_types(columns: Sequence[Column]) -> None:
    """AstBuilder's visitTableElement: a HEADER('k') column is BYTES, a HEADERS column
    ARRAY<STRUCT<`KEY` STRING, `VALUE` BYTES>> (custom types resolved)."""
    for column in columns:
        if column.role is st.ColumnRole.HEADER and column.type != ty.BYTES:
            raise SchemaError(f"{PREPARE}Invalid type for HEADER('{column.header_key}') column: "
                              f"expected BYTES, got {ty.backticked(column.type)}", column.name)
        if column.role is st.ColumnRole.HEADERS and column.type != ty.HEADERS_TYPE:
            raise SchemaError(f"{PREPARE}Invalid type for HEADERS column: expected "
                              f"{ty.backticked(ty.HEADERS_TYPE)}, got "
                              f"{ty.backticked(column.type)}", column.name)


def check_duplicate_names(columns: Sequence[st.ColumnDef]) -> None:
    """TableElements: each column name once (every duplicated name, in the order written)."""
    seen: set[str] = set()
    duplicates: list[str] = []
    for column in columns:
        if column.name in seen and column.name not in duplicates:
            duplicates.append(column.name)
        seen.add(column.name)
    if duplicates:
        raise SchemaError(f"{PREPARE}Duplicate column names: "
                          + ", ".join(f"`{name}`" for name in duplicates), duplicates[0])


def with_clause_value(properties: Mapping[str, st.PropertyValue], name: str) -> str | None:
    """A string property as ksqlDB's ConfigDef reads it: trimmed."""
    text = property_text(properties.get(name))
    return None if text is None else text.strip()


def given_formats(properties: Mapping[str, st.PropertyValue]) -> tuple[str | None, str | None]:
    """The key and value formats a WITH clause names: FORMAT for both, else KEY_FORMAT and
    VALUE_FORMAT (None for a side it names none of)."""
    both = with_clause_value(properties, "FORMAT")
    return (both or with_clause_value(properties, "KEY_FORMAT"),
            both or with_clause_value(properties, "VALUE_FORMAT"))


def property_text(value: st.PropertyValue | None) -> str | None:
    """A property's value as ksqlDB prints the literal: booleans lower-case, as given."""
    if value is None:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


def check_with_clause(properties: Mapping[str, st.PropertyValue], as_select: bool = False
                      ) -> None:
    """CreateSourceProperties: each known property parsed as its type (in ksqlDB's order), the
    required KAFKA_TOPIC, unknown names, FORMAT with KEY_FORMAT or VALUE_FORMAT, both Avro
    schema names, and the window type's size. ``as_select``: a C*AS's WITH clause
    (CreateSourceAsProperties): the same rules over the properties every CREATE shares, with no
    topic required and no window."""
    known = AS_SELECT_PROPERTIES if as_select else CREATE_PROPERTIES
    for name, kind in CONFIG_TYPES:
        if name not in known:
            continue
        if name not in properties:
            if name == "KAFKA_TOPIC" and not as_select:
                raise PropertyError(f'{PREPARE}Missing required property "KAFKA_TOPIC" which '
                                    "has no default value.")
            continue
        _check_typed(name, kind, properties[name])
        _check_value(name, with_clause_value(properties, name) or "")
    unknown = [name for name in properties if name.upper() not in known]
    if unknown:
        raise PropertyError(f"{PREPARE}Invalid config variable(s) in the WITH clause: "
                            f"{','.join(unknown)}")
    if "FORMAT" in properties:
        for specific in ("KEY_FORMAT", "VALUE_FORMAT"):
            if specific in properties:
                raise PropertyError(
                    f"{PREPARE}Cannot supply both '{specific}' and 'FORMAT' properties, as "
                    "'FORMAT' sets both key and value formats. Either use just 'FORMAT', or use "
                    "'KEY_FORMAT' and 'VALUE_FORMAT'.")
    if "VALUE_AVRO_SCHEMA_FULL_NAME" in properties and "VALUE_SCHEMA_FULL_NAME" in properties:
        raise PropertyError(f"{PREPARE}Cannot supply both 'VALUE_AVRO_SCHEMA_FULL_NAME' and "
                            "'VALUE_SCHEMA_FULL_NAME' properties. Please only set "
                            "'VALUE_SCHEMA_FULL_NAME'.")
    timestamp_format = with_clause_value(properties, "TIMESTAMP_FORMAT")
    problem = None if timestamp_format is None else datetime_pattern_problem(timestamp_format)
    if problem:
        raise PropertyError(f"{PREPARE}Invalid datetime format for config:TIMESTAMP_FORMAT, "
                            f"reason:{problem}")
    window_type = with_clause_value(properties, "WINDOW_TYPE")
    sized = window_type is not None and window_type.upper() != "SESSION"
    if sized and "WINDOW_SIZE" not in properties:
        raise PropertyError(f"{PREPARE}{str(window_type).upper()} windows require 'WINDOW_SIZE' "
                            "to be provided in the WITH clause. For example: "
                            "'WINDOW_SIZE'='10 SECONDS'")
    if not sized and "WINDOW_SIZE" in properties:
        raise PropertyError(f"{PREPARE}'WINDOW_SIZE' should not be set for SESSION windows.")


def _check_value(name: str, text: str) -> None:
    """The rules on a known property's value beyond its type."""
    if name == "WINDOW_TYPE" and text.upper() not in WINDOW_TYPES:
        raise PropertyError(f"{PREPARE}Invalid value {text} for property WINDOW_TYPE: String "
                            f"must be one of: {', '.join(WINDOW_TYPES)}, null")
    if name == "WINDOW_SIZE":
        try:
            parse_duration_ms(text)
        except DurationError as error:
            raise PropertyError(f"{PREPARE}Configuration WINDOW_SIZE is invalid: "
                                f"{error}") from error
    if name == "KAFKA_TOPIC" and not text:
        raise PropertyError(f"{PREPARE}Invalid value  for property KAFKA_TOPIC: String "
                            "must be non-empty")
    if name in ("KEY_DELIMITER", "VALUE_DELIMITER"):
        problem = delimiter_problem(text)
        if problem:
            raise PropertyError(f"{PREPARE}Configuration {name} is invalid: {problem}")
    if name.endswith("PROTOBUF_NULLABLE_REPRESENTATION") and (
            text.upper() not in NULLABLE_REPRESENTATIONS):
        raise PropertyError(f"{PREPARE}Invalid value {text} for property {name}: String must "
                            f"be one of: {', '.join(NULLABLE_REPRESENTATIONS)}, null")


def _check_typed(name: str, kind: str, value: st.PropertyValue) -> None:
    """Kafka's ConfigDef.parseType: a number property takes a whole number (or its text; a
    literal beyond 32 bits is a Java Long, which an INT property refuses), a boolean one true
    or false. SHORT values are narrowed, never refused (ksqlDB's PropertiesConfig)."""
    if kind == "STRING":
        if not isinstance(value, str):
            raise PropertyError(f"{PREPARE}Invalid value {property_text(value)} for property {name}: "
                                f"Expected value to be a string, but it was a "
                                f"{_java_class(value)}")
        return
    if kind == "BOOLEAN":
        if isinstance(value, bool) or (isinstance(value, str)
                                       and value.strip().lower() in ("true", "false")):
            return
        raise PropertyError(f"{PREPARE}Invalid value {property_text(value)} for property {name}: "
                            "Expected value to be either true or false")
    if kind not in ("INT", "SHORT", "LONG"):
        return
    if isinstance(value, str):
        try:
            int(value.strip())
        except ValueError:
            raise PropertyError(f"{PREPARE}Invalid value {value} for property {name}: Not a "
                                f"number of type {kind}") from None
        return
    if kind == "SHORT" and not isinstance(value, bool):
        return
    big = isinstance(value, int) and not isinstance(value, bool) and not (
        -(2 ** 31) <= value < 2 ** 31)
    if isinstance(value, bool | float) or (kind == "INT" and big):
        bits = {"INT": 32, "LONG": 64}[kind]
        raise PropertyError(f"{PREPARE}Invalid value {property_text(value)} for property {name}: "
                            f"Expected value to be a {bits}-bit integer, but it was a "
                            f"{_java_class(value)}")


def _java_class(value: st.PropertyValue) -> str:
    if isinstance(value, bool):
        return "java.lang.Boolean"
    if isinstance(value, float):
        return "java.math.BigDecimal"
    if isinstance(value, int):
        return "java.lang.Long" if not -(2 ** 31) <= value < 2 ** 31 else "java.lang.Integer"
    return "java.lang.String"


def delimiter_problem(text: str) -> str | None:
    """ksqlDB's Delimiter.parse: one character, or TAB or SPACE (as written, upper case)."""
    if not text.strip():
        return ("Delimiter cannot be empty, if you meant to have a tab or space for delimiter, "
                "please use the special values 'TAB' or 'SPACE'\nExample valid value: ';'")
    if len(text) == 1 or text in ("TAB", "SPACE"):
        return None
    return (f"Invalid delimiter value: '{text}'. Delimiter must be a single character or "
            "TAB,SPACE\nExample valid value: ';'")


_PATTERN_LETTERS = "GuyDMLdQqYwWEecFahKkHmsSAnNVvzOXxZpgB"
_MAX_PATTERN_LETTERS = {"G": 5, "E": 5, "a": 1, "M": 5, "L": 5, "Q": 5, "q": 5, "d": 2, "h": 2,
                        "H": 2, "k": 2, "K": 2, "m": 2, "s": 2, "D": 3, "F": 1, "z": 4, "W": 1,
                        "w": 2, "c": 5, "e": 5, "O": 4, "X": 5, "x": 5, "Z": 5}


def datetime_pattern_problem(pattern: str) -> str | None:
    """Why Java's DateTimeFormatter.ofPattern refuses ``pattern`` (its reserved characters,
    unknown letters, an unclosed quote, too many of a letter), or None."""
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "'":
            end = pattern.find("'", index + 1)
            if end < 0:
                return f"Pattern ends with an incomplete string literal: {pattern}"
            index = end + 1
            continue
        if char in "{}#":
            return f"Pattern includes reserved character: '{char}'"
        if char.isascii() and char.isalpha():
            count = 1
            while index + count < len(pattern) and pattern[index + count] == char:
                count += 1
            if char not in _PATTERN_LETTERS:
                return f"Unknown pattern letter: {char}"
            if count > _MAX_PATTERN_LETTERS.get(char, count):
                return f"Too many pattern letters: {char}"
            index += count
            continue
        index += 1
    return None


def check_key_roles(kind: st.SourceKind, columns: Sequence[st.ColumnDef]) -> None:
    """CreateStream / CreateTable: a stream's key columns are KEY, a table's PRIMARY KEY; the
    first wrong one is reported where it is written."""
    wrong, right = ((st.ColumnRole.PRIMARY_KEY, "KEY") if kind is st.SourceKind.STREAM
                    else (st.ColumnRole.KEY, "PRIMARY KEY"))
    column = next((c for c in columns if c.role is wrong), None)
    if column is None:
        return
    at = (column.location.line, column.location.column) if column.location else None
    raise SchemaError(
        f"Column `{column.name}` is a '{wrong.value}' column: please use '{right}' for "
        f"{kind.label}s.\nTables have PRIMARY KEYs, which are unique and NON NULL.\nStreams "
        "have KEYs, which have no uniqueness or NON NULL constraints.", column.name, location=at)


# -- stage 2: the formats ------------------------------------------------------------------------
def check_protobuf_properties(properties: Mapping[str, st.PropertyValue], key_format: str | None,
                              value_format: str | None) -> None:
    """CreateSourceProperties: the nullable representations are for the protobuf formats."""
    for side, fmt in (("KEY", key_format), ("VALUE", value_format)):
        name = f"{side}_PROTOBUF_NULLABLE_REPRESENTATION"
        if name in properties and (fmt or "").upper() not in ("PROTOBUF", "PROTOBUF_NOSR"):
            raise PropertyError(f"Property {name} can only be enabled with protobuf format")


def format_properties(side: str, fmt: str, properties: Mapping[str, st.PropertyValue],
                      source: str) -> dict[str, str]:
    """The format properties ksqlDB derives for one side from the WITH clause, in its order."""
    found: dict[str, str] = {}
    names = ((f"{side}_SCHEMA_FULL_NAME",) if side == "KEY"
             else ("VALUE_AVRO_SCHEMA_FULL_NAME", "VALUE_SCHEMA_FULL_NAME"))
    full_name = next((with_clause_value(properties, n) for n in names if n in properties), None)
    if full_name is not None:
        found["fullSchemaName"] = full_name
    elif side == "KEY" and fmt == "AVRO":
        found["fullSchemaName"] = f"{_AVRO_NAMESPACE}.{_camel(source)}Key"
    delimiter = with_clause_value(properties, f"{side}_DELIMITER")
    if delimiter is not None:
        found["delimiter"] = delimiter
    if fmt == "PROTOBUF":
        found["unwrapPrimitives"] = "true"
    nullable = with_clause_value(properties, f"{side}_PROTOBUF_NULLABLE_REPRESENTATION")
    if nullable is not None and fmt in ("PROTOBUF", "PROTOBUF_NOSR"):
        found["nullableRepresentation"] = nullable.lower()
    schema_id = with_clause_value(properties, f"{side}_SCHEMA_ID")
    if schema_id is not None:
        found["schemaId"] = schema_id
    return found


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:].lower() for part in name.split("_"))


def check_format(side: str, fmt: str, properties: Mapping[str, str]) -> None:
    """FormatFactory.of: a known format, given only the properties it supports, none blank."""
    if formats.lookup(fmt) is None:
        raise FormatError(f"Unknown format: {fmt}")
    supported = _SUPPORTED_PROPERTIES.get(fmt, ())
    unsupported = [name for name in properties if name not in supported]
    if unsupported == ["schemaId"]:  # DefaultSchemaInjector's wording
        raise PropertyError(f"{side}_FORMAT should support schema inference when "
                            f"{side}_SCHEMA_ID is provided. Current format is {fmt}.")
    if unsupported:
        raise FormatError(f"{fmt} does not support the following configs: "
                          f"[{', '.join(unsupported)}]")
    for name, value in properties.items():
        if not value.strip():
            shown = ", ".join(f"{k}={v}" for k, v in properties.items())
            raise FormatError(f"{name} cannot be empty. Format configuration: {{{shown}}}")


# -- the topic (TopicCreateInjector) -------------------------------------------------------------
def check_cleanup_policy(properties: Mapping[str, st.PropertyValue]) -> None:
    """The topic's cleanup policy follows the source's kind; a statement cannot set it."""
    if "CLEANUP_POLICY" in properties:
        raise PropertyError(
            "Invalid config variable in the WITH clause: CLEANUP_POLICY.\nThe CLEANUP_POLICY "
            "config is automatically inferred based on the type of source (STREAM or TABLE)."
            "\nUsers can't set the CLEANUP_POLICY config manually.")


def check_retention(kind: st.SourceKind, properties: Mapping[str, st.PropertyValue],
                    windowed: bool = False) -> None:
    """A table's topic is compacted: it takes no RETENTION_MS, unless the table is windowed."""
    if kind is st.SourceKind.TABLE and not windowed and "RETENTION_MS" in properties:
        raise PropertyError("Invalid config variable in the WITH clause: RETENTION_MS. "
                            "Non-windowed tables do not support retention.")


def topic_config(kind: st.SourceKind, properties: Mapping[str, st.PropertyValue],
                 window_retention_ms: int | None = None, windowed: bool = False
                 ) -> dict[str, str]:
    """The configuration a source's new topic is created with, as ksqlDB's TopicCreateInjector
    gives it: a stream's topic deletes old segments (``retention.ms`` from RETENTION_MS, else the
    broker's default, where ksqlDB copies the source topic's); a table's is compacted, so it
    keeps each key's newest row (a CREATE TABLE's, windowed or not); the topic of a windowed
    aggregation (``windowed``) is compacted and deletes windows older than the larger of
    RETENTION_MS and the window's RETENTION."""
    if kind is st.SourceKind.TABLE and not windowed:
        return {"cleanup.policy": "compact"}
    config = {"cleanup.policy": "delete" if kind is st.SourceKind.STREAM else "compact,delete"}
    given = with_clause_value(properties, "RETENTION_MS")
    retentions = [value for value in (int(given) if given and given.lstrip("-").isdigit()
                                      else None, window_retention_ms) if value is not None]
    if retentions:
        config["retention.ms"] = str(max(retentions))
    return config


# -- stage 3: the schema -------------------------------------------------------------------------
def check_headers(columns: Sequence[st.ColumnDef]) -> None:
    """LogicalSchema.Builder: a HEADERS column after another header column, or a HEADER key
    given twice, is refused."""
    keys: list[str | None] = []
    for column in columns:
        if column.role not in (st.ColumnRole.HEADERS, st.ColumnRole.HEADER):
            continue
        if None in keys:
            raise SchemaError("Schema already contains a HEADERS column.", column.name)
        if column.role is st.ColumnRole.HEADER:
            if column.header_key in keys:
                raise SchemaError(f"Schema already contains a HEADER('{column.header_key}') "
                                  "column.", column.name)
            keys.append(column.header_key)
        else:
            keys.append(None)


def check_value_wrapping(properties: Mapping[str, st.PropertyValue], value_format: str,
                         value_columns: int) -> None:
    """SerdeFeaturesFactory: an explicit WRAP_SINGLE_VALUE is one the format supports, for a
    single value column."""
    check_wrapping_supported(properties, value_format)
    check_single_value(properties, value_columns)


def check_wrapping_supported(properties: Mapping[str, st.PropertyValue],
                             value_format: str) -> None:
    """An explicit WRAP_SINGLE_VALUE is one the value format supports."""
    if "WRAP_SINGLE_VALUE" not in properties:
        return
    wrapped = str(with_clause_value(properties, "WRAP_SINGLE_VALUE")).lower() == "true"
    fmt = formats.lookup(value_format)
    if fmt is not None and not (fmt.wraps if wrapped else fmt.unwraps):
        raise FormatError(f"Format '{fmt.name}' does not support 'WRAP_SINGLE_VALUE' set to "
                          f"'{str(wrapped).lower()}'.")


def check_single_value(properties: Mapping[str, st.PropertyValue], value_columns: int) -> None:
    """An explicit WRAP_SINGLE_VALUE needs exactly one value column."""
    if "WRAP_SINGLE_VALUE" in properties and value_columns != 1:
        raise FormatError("'WRAP_SINGLE_VALUE' is only valid for single-field value schemas")


def avro_problem(columns: Sequence[Column], unwrapped: bool, full_name: str | None) -> str | None:
    """Why Avro cannot name the schema of these columns (AvroSchemaTranslator): a record's or a
    field's name starts with a letter or '_' and holds letters, digits and '_' only; nested
    fields are named before the field holding them."""
    root = full_name or _AVRO_VALUE_NAME
    if unwrapped and len(columns) == 1:
        return _avro_type_problem(columns[0].type, [root])
    problem = _avro_name_problem(root.rsplit(".", 1)[-1])
    for column in columns:
        problem = problem or _avro_type_problem(column.type, [root, column.name])
        problem = problem or _avro_name_problem(column.name.replace(".", "_"))
    return problem


def _avro_type_problem(sql_type: ty.SqlType, context: list[str]) -> str | None:
    if isinstance(sql_type, ty.StructType):
        problem = _avro_name_problem("_".join(context).rsplit(".", 1)[-1])
        for name, field_type in sql_type.fields:
            problem = problem or _avro_type_problem(field_type, [*context, name])
            problem = problem or _avro_name_problem(name.replace(".", "_"))
        return problem
    if isinstance(sql_type, ty.ArrayType):
        return _avro_type_problem(sql_type.element, context)
    if isinstance(sql_type, ty.MapType):
        return (_avro_type_problem(sql_type.key, [*context, "MapKey"])
                or _avro_type_problem(sql_type.value, [*context, "MapValue"]))
    return None


def _avro_name_problem(name: str) -> str | None:
    if not name:
        return "Empty name"
    if not (name[0].isalpha() or name[0] == "_"):
        return f"Illegal initial character: {name}"
    if not all(c.isalnum() or c == "_" for c in name[1:]):
        return f"Illegal character in: {name}"
    return None


def timestamp_column(properties: Mapping[str, st.PropertyValue],
                     columns: Sequence[tuple[str, ty.SqlType]]) -> str | None:
    """ksqlDB's TimestampExtractionPolicyFactory: the TIMESTAMP column (an identifier: quoted
    as written, else upper case) exists; a STRING one needs a TIMESTAMP_FORMAT, which no other
    type takes; otherwise it is a BIGINT or a TIMESTAMP. ``columns``: the names and types of the
    source's columns, or of a query's output, which ksqlDB checks before the keys it must keep."""
    text = with_clause_value(properties, "TIMESTAMP")
    if text is None:
        return None
    quoted = len(text) > 1 and text[0] == text[-1] == "`"
    name = text[1:-1].replace("``", "`") if quoted else text.upper()
    found = next((column for column in columns if column[0] == name), None)
    if found is None:
        raise PropertyError(f"The TIMESTAMP column set in the WITH clause does not exist in the "
                            f"schema: '{name}'")
    has_format = "TIMESTAMP_FORMAT" in properties
    if found[1] == ty.STRING:
        if not has_format:
            raise PropertyError("A String timestamp field has been specified without also "
                                "specifying the timestamp_format")
        return found[0]
    if has_format:
        raise PropertyError("'TIMESTAMP_FORMAT' set in the WITH clause can only be used when the "
                            "timestamp column is of type STRING.")
    if found[1] not in (ty.BIGINT, ty.TIMESTAMP):
        raise PropertyError(f"Timestamp column, `{found[0]}`, should be LONG(INT64), "
                            "TIMESTAMP, or a String with a timestamp_format specified.")
    return found[0]


def check_insert_with_clause(properties: Mapping[str, st.PropertyValue]) -> None:
    """An INSERT INTO's WITH clause: ksqlDB's InsertIntoConfigs knows QUERY_ID alone. A query
    here is always ``INSERTQUERY_<offset>``: a QUERY_ID is refused, not silently ignored (its
    id would need to be unique forever, checkpoints and all, not only among running queries)."""
    unknown = [name for name in properties if name.upper() != "QUERY_ID"]
    if unknown:
        raise PropertyError(f"{PREPARE}Invalid config variable(s) in the WITH clause: "
                            f"{','.join(unknown)}")
    if "QUERY_ID" in properties:
        raise PropertyError("INSERT INTO ... WITH (QUERY_ID=...) is not supported by this "
                            "metastore: an INSERT INTO query's id is INSERTQUERY_<offset>.")
