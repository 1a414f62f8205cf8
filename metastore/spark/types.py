"""ksqlDB types as Spark SQL types (DDL text).

Spark 4.0 has no TIME type: TIME maps to INT (milliseconds of the day, as ksqlDB serializes it).
"""

from __future__ import annotations

from metastore.functions.sparksql import spark_type

__all__ = ["quote", "spark_type", "string_literal"]


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def string_literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
