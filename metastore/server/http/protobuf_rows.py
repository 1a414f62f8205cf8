"""A query's rows as ksqlDB's ``application/vnd.ksql.v1+protobuf`` answer of ``/query`` and
``/query-stream``: its ``StreamedRow`` array, whose header carries ``protoSchema`` (the ``.proto``
text of the result's columns, as the PROTOBUF_NOSR format derives it) and whose rows carry
``protobufBytes`` (each row as one message of that schema, base64), never ``columns``.

The schema and the messages are the PROTOBUF_NOSR format's (:mod:`metastore.formats.protobuf`):
one writer of Protobuf in the project.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from metastore.formats.protobuf import proto_text
from metastore.formats.protobuf import schema as protobuf
from metastore.formats.protobuf import values as protobuf_values
from metastore.sql import types as ty

MEDIA_TYPE = "application/vnd.ksql.v1+protobuf"
_EPOCH = datetime.date(1970, 1, 1)


def wants_protobuf(accept: str) -> bool:
    """Whether a request's ``Accept`` header asks for the Protobuf answer."""
    return MEDIA_TYPE in accept


@dataclass(frozen=True)
class ProtobufRows:
    """The Protobuf schema of a result's columns, and its rows as messages of it."""

    columns: tuple[tuple[str, ty.SqlType], ...]
    schema: protobuf.ProtobufSchema

    @staticmethod
    def of(columns: Sequence[tuple[str, ty.SqlType]]) -> ProtobufRows:
        """Raises ValueError when a column has a type Protobuf cannot hold."""
        fixed = tuple(columns)
        return ProtobufRows(fixed, protobuf.derive(fixed, unwrapped=False))

    def header(self, query_id: str, schema_text: str) -> dict[str, Any]:
        return {"header": {"queryId": query_id, "schema": schema_text,
                           "protoSchema": proto_text.render(self.schema)}}

    def row(self, values: Sequence[Any]) -> dict[str, Any]:
        """``values``: a row as the JSON answers carry it (:func:`metastore.spark.query.
        json_value`)."""
        record = {name: _record_value(value, sql_type)
                  for (name, sql_type), value in zip(self.columns, values, strict=True)}
        message = protobuf_values.encode(self.schema, record) or b""
        return {"row": {"protobufBytes": base64.b64encode(message).decode()}}


def _record_value(value: Any, sql_type: ty.SqlType) -> Any:
    """A JSON answer's value as the record representation Protobuf messages are built from
    (a DATE in days and a TIME in milliseconds, where the answer writes ISO text)."""
    if value is None:
        return None
    if sql_type == ty.DATE and isinstance(value, str):
        return (datetime.date.fromisoformat(value) - _EPOCH).days
    if sql_type == ty.TIME and isinstance(value, str):
        time = datetime.time.fromisoformat(value)
        return ((time.hour * 60 + time.minute) * 60 + time.second) * 1000 \
            + time.microsecond // 1000
    if isinstance(sql_type, ty.ArrayType) and isinstance(value, list):
        return [_record_value(item, sql_type.element) for item in value]
    if isinstance(sql_type, ty.MapType) and isinstance(value, dict):
        return {key: _record_value(item, sql_type.value) for key, item in value.items()}
    if isinstance(sql_type, ty.StructType) and isinstance(value, dict):
        types = dict(sql_type.fields)
        return {key: _record_value(item, types[key]) if key in types else item
                for key, item in value.items()}
    return value
