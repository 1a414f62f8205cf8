"""SQL types of the ksqlDB type system, immutable and printable in ksqlDB's canonical form."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PRIMITIVE_ALIASES = {
    "BOOLEAN": "BOOLEAN", "INT": "INTEGER", "INTEGER": "INTEGER", "BIGINT": "BIGINT",
    "DOUBLE": "DOUBLE", "VARCHAR": "STRING", "STRING": "STRING", "BYTES": "BYTES",
    "DATE": "DATE", "TIME": "TIME", "TIMESTAMP": "TIMESTAMP",
}


class SqlType:
    """Base of every type. ``sql()`` is the canonical text, which also round-trips through the parser."""

    def sql(self) -> str:
        raise NotImplementedError

    @property
    def base(self) -> str:
        """The type's family name as ksqlDB reports it in errors: INTEGER, ARRAY, STRUCT, ..."""
        raise NotImplementedError

    def walk(self) -> list[SqlType]:
        """This type and every type nested in it."""
        return [self]

    def __str__(self) -> str:
        return self.sql()


@dataclass(frozen=True)
class Primitive(SqlType):
    name: str

    def sql(self) -> str:
        return self.name

    @property
    def base(self) -> str:
        return self.name


@dataclass(frozen=True)
class DecimalType(SqlType):
    precision: int
    scale: int

    def sql(self) -> str:
        return f"DECIMAL({self.precision}, {self.scale})"

    @property
    def base(self) -> str:
        return "DECIMAL"


@dataclass(frozen=True)
class ArrayType(SqlType):
    element: SqlType

    def sql(self) -> str:
        return f"ARRAY<{self.element.sql()}>"

    @property
    def base(self) -> str:
        return "ARRAY"

    def walk(self) -> list[SqlType]:
        return [self, *self.element.walk()]


@dataclass(frozen=True)
class MapType(SqlType):
    key: SqlType
    value: SqlType

    def sql(self) -> str:
        return f"MAP<{self.key.sql()}, {self.value.sql()}>"

    @property
    def base(self) -> str:
        return "MAP"

    def walk(self) -> list[SqlType]:
        return [self, *self.key.walk(), *self.value.walk()]


@dataclass(frozen=True)
class StructType(SqlType):
    fields: tuple[tuple[str, SqlType], ...]

    def sql(self) -> str:
        inner = ", ".join(f"{quote(name)} {ftype.sql()}" for name, ftype in self.fields)
        return f"STRUCT<{inner}>"

    @property
    def base(self) -> str:
        return "STRUCT"

    def walk(self) -> list[SqlType]:
        return [self, *(t for _, ftype in self.fields for t in ftype.walk())]

    def field(self, name: str) -> SqlType | None:
        for field_name, ftype in self.fields:
            if field_name == name:
                return ftype
        return None


@dataclass(frozen=True)
class TypeRef(SqlType):
    """A custom type by name, as written; validation resolves it against the registered types."""

    name: str

    def sql(self) -> str:
        return quote(self.name)

    @property
    def base(self) -> str:
        return self.name


BOOLEAN = Primitive("BOOLEAN")
INTEGER = Primitive("INTEGER")
BIGINT = Primitive("BIGINT")
DOUBLE = Primitive("DOUBLE")
STRING = Primitive("STRING")
BYTES = Primitive("BYTES")
DATE = Primitive("DATE")
TIME = Primitive("TIME")
TIMESTAMP = Primitive("TIMESTAMP")
HEADERS_TYPE = ArrayType(StructType((("KEY", STRING), ("VALUE", BYTES))))


def is_plain_identifier(name: str) -> bool:
    return bool(name) and (name[0].isalpha() or name[0] == "_") and all(
        c.isalnum() or c == "_" for c in name) and name == name.upper()


def quote(name: str) -> str:
    """``name`` as it must be written to read back the same: plain when it can be, else backticked."""
    return name if is_plain_identifier(name) else "`" + name.replace("`", "``") + "`"


def depth(sql_type: SqlType) -> int:
    """Nesting depth (``INT`` is 1, ``ARRAY<INT>`` 2), measured without recursion."""
    deepest = 0
    pending = [(sql_type, 1)]
    while pending:
        current, level = pending.pop()
        deepest = max(deepest, level)
        if isinstance(current, ArrayType):
            pending.append((current.element, level + 1))
        elif isinstance(current, MapType):
            pending += [(current.key, level + 1), (current.value, level + 1)]
        elif isinstance(current, StructType):
            pending += [(field_type, level + 1) for _, field_type in current.fields]
    return deepest


def contains_map(sql_type: SqlType) -> bool:
    return any(isinstance(t, MapType) for t in sql_type.walk())


def resolve(sql_type: SqlType, custom: dict[str, SqlType]) -> SqlType:
    """``sql_type`` with every custom type reference replaced by its definition."""
    if isinstance(sql_type, TypeRef):
        return custom[sql_type.name]
    if isinstance(sql_type, ArrayType):
        return ArrayType(resolve(sql_type.element, custom))
    if isinstance(sql_type, MapType):
        return MapType(resolve(sql_type.key, custom), resolve(sql_type.value, custom))
    if isinstance(sql_type, StructType):
        return StructType(tuple((n, resolve(t, custom)) for n, t in sql_type.fields))
    return sql_type


def unresolved(sql_type: SqlType, custom: dict[str, SqlType]) -> str | None:
    """The first custom type name in ``sql_type`` that is not registered, if any."""
    for nested in sql_type.walk():
        if isinstance(nested, TypeRef) and nested.name not in custom:
            return nested.name
    return None


def field_text(name: str, sql_type: SqlType) -> str:
    """A column or struct field as ksqlDB prints it in messages and schemas: ```NAME` TYPE``."""
    return f"`{name}` {backticked(sql_type)}"


def backticked(sql_type: SqlType) -> str:
    """The type as ksqlDB prints it inside persistence schemas: struct fields in backticks."""
    if isinstance(sql_type, ArrayType):
        return f"ARRAY<{backticked(sql_type.element)}>"
    if isinstance(sql_type, MapType):
        return f"MAP<{backticked(sql_type.key)}, {backticked(sql_type.value)}>"
    if isinstance(sql_type, StructType):
        inner = ", ".join(field_text(name, t) for name, t in sql_type.fields)
        return f"STRUCT<{inner}>"
    return sql_type.sql()


def decimal_problem(precision: int, scale: int) -> str | None:
    """Why ksqlDB refuses ``DECIMAL(precision, scale)`` (its SqlDecimal), or None."""
    for holds, rule in ((precision > 0, "precision must be >= 1"), (scale >= 0, "scale must be >= 0"),
                        (precision >= scale, "precision must be >= scale")):
        if not holds:
            return f"DECIMAL {rule}: DECIMAL({precision},{scale})"
    return None


def struct_fields_problem(fields: Sequence[tuple[str, SqlType]]) -> str | None:
    """Why ksqlDB refuses a STRUCT of ``fields`` (its SqlStruct.Builder: a repeated name), or
    None."""
    for index, (name, field_type) in enumerate(fields):
        first = next(((n, t) for n, t in fields[:index] if n == name), None)
        if first is not None:
            return (f"Duplicate field names found in STRUCT: '{field_text(*first)}' and "
                    f"'{field_text(name, field_type)}'")
    return None
