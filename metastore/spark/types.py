"""ksqlDB types as Spark SQL types (DDL text).

Spark 4.0 has no TIME type: TIME maps to INT (milliseconds of the day, as ksqlDB serializes it).
"""

from __future__ import annotations

from metastore.sql import types as ty

_PRIMITIVES = {
    "BOOLEAN": "BOOLEAN", "INTEGER": "INT", "BIGINT": "BIGINT", "DOUBLE": "DOUBLE",
    "STRING": "STRING", "BYTES": "BINARY", "DATE": "DATE", "TIME": "INT", "TIMESTAMP": "TIMESTAMP",
}


def spark_type(sql_type: ty.SqlType) -> str:
    if isinstance(sql_type, ty.Primitive):
        return _PRIMITIVES[sql_type.name]
    if isinstance(sql_type, ty.DecimalType):
        return f"DECIMAL({sql_type.precision},{sql_type.scale})"
    if isinstance(sql_type, ty.ArrayType):
        return f"ARRAY<{spark_type(sql_type.element)}>"
    if isinstance(sql_type, ty.MapType):
        return f"MAP<{spark_type(sql_type.key)},{spark_type(sql_type.value)}>"
    if isinstance(sql_type, ty.StructType):
        inner = ",".join(f"`{name}`:{spark_type(t)}" for name, t in sql_type.fields)
        return f"STRUCT<{inner}>"
    raise TypeError(f"no Spark type for {sql_type.sql()}")


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def string_literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
