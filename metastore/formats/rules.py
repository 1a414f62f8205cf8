"""Serialization formats: which exist, which types and options each supports.

The rules and their wording follow ksqlDB, so that a statement ksqlDB rejects is rejected here
with the same reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from metastore.sql.types import DecimalType, MapType, Primitive, SqlType, field_text


@dataclass(frozen=True)
class Format:
    name: str
    unsupported: frozenset[str]
    """Type families (SqlType.base) the format cannot carry."""
    wraps: bool
    """ksqlDB's WRAP_SINGLES: a single value column may be written as an object or record."""
    unwraps: bool
    """ksqlDB's UNWRAP_SINGLES: a single value column may be written bare."""
    infers_schema: bool
    string_map_keys_only: str | None = None
    single_column: bool = False
    names_column: bool = False
    """Whether ksqlDB names the offending column in an unsupported-type reason."""

    def unsupported_reason(self, sql_type: SqlType) -> str | None:
        for nested in sql_type.walk():
            if nested.base in self.unsupported or (
                    isinstance(nested, DecimalType) and "DECIMAL" in self.unsupported):
                return f"The '{self.name}' format does not support type '{nested.base}'"
            if (self.string_map_keys_only and isinstance(nested, MapType)
                    and nested.key != Primitive("STRING")):
                return self.string_map_keys_only
        return None


_COMPLEX = frozenset({"ARRAY", "MAP", "STRUCT"})
_PROTOBUF_MAP_KEYS = ("PROTOBUF format only supports MAP types with STRING keys. See "
                      "https://github.com/confluentinc/ksql/issues/6177.")

FORMATS: dict[str, Format] = {
    "KAFKA": Format("KAFKA", _COMPLEX | {"BOOLEAN", "DECIMAL", "DATE", "TIME", "TIMESTAMP"},
                    wraps=False, unwraps=True, infers_schema=False, single_column=True),
    "DELIMITED": Format("DELIMITED", _COMPLEX, wraps=False, unwraps=True, infers_schema=False,
                         names_column=True),
    "JSON": Format("JSON", frozenset(), wraps=True, unwraps=True, infers_schema=False,
                   string_map_keys_only="JSON only supports MAP types with STRING keys"),
    "JSON_SR": Format("JSON_SR", frozenset(), wraps=True, unwraps=True, infers_schema=True,
                      string_map_keys_only="JSON only supports MAP types with STRING keys"),
    "AVRO": Format("AVRO", frozenset(), wraps=True, unwraps=True, infers_schema=True,
                   string_map_keys_only="Avro only supports MAPs with STRING keys"),
    "PROTOBUF": Format("PROTOBUF", frozenset(), wraps=True, unwraps=False, infers_schema=True,
                       string_map_keys_only=_PROTOBUF_MAP_KEYS),
    "PROTOBUF_NOSR": Format("PROTOBUF_NOSR", frozenset(), wraps=True, unwraps=True,
                            infers_schema=False, string_map_keys_only=_PROTOBUF_MAP_KEYS),
    "NONE": Format("NONE", frozenset(), wraps=False, unwraps=False, infers_schema=False),
}

SPARK_READABLE = frozenset({"KAFKA", "JSON", "DELIMITED", "NONE"})
"""Formats the Spark projection can decode (the others are catalogued but not queryable yet)."""


def lookup(name: str) -> Format | None:
    return FORMATS.get(name.upper())


def schema_problem(fmt: Format, columns: Sequence[tuple[str, SqlType]],
                   key: bool = False) -> str | None:
    """Why ``fmt`` cannot carry these (name, type) columns of the key or the value, or None."""
    if fmt.name == "NONE" and columns:
        return "The 'NONE' format can only be used when no columns are defined."
    if fmt.single_column and len(columns) > 1:
        shown = ", ".join(field_text(name, sql_type) + (" KEY" if key else "")
                          for name, sql_type in columns)
        return f"The '{fmt.name}' format only supports a single field. Got: [{shown}]"
    for name, sql_type in columns:
        reason = fmt.unsupported_reason(sql_type)
        if reason:
            return f"{reason}, column: `{name}`" if fmt.names_column else reason
    return None
