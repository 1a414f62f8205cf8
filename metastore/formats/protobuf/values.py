"""ksqlDB's JSON representation of values to and from PROTOBUF_NOSR records, in Python.

The test runner writes a test's input records and reads its sink records with these, through the
Protobuf runtime and the schema :mod:`metastore.formats.protobuf.schema` derives. They follow ksqlDB's
test driver (``SpecToConnectConverter`` over Confluent's ``ProtobufData``):

- writing: object fields match the message's fields case-insensitively (others are ignored), a
  NULL is an absent field, TIMESTAMP is epoch milliseconds, DATE epoch days, TIME milliseconds of
  the day, DECIMAL a number, BYTES base64 text;
- reading: the same representation; a scalar field without presence reads as its default when
  absent (ksqlDB's NULL INT reads back as 0), a repeated field as empty, an absent message or
  proto3 ``optional`` field as NULL; a ``google.protobuf.*Value`` root or field as its value.

The project's JVM codec (``io.metastore.protobuf.ProtobufNoSrCodec``), which Spark uses, follows
the same rules.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeAlias

from google.protobuf import descriptor, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

if TYPE_CHECKING:  # the runtime's descriptors are upb's, typed apart from the pure-Python ones
    from google._upb import _message as upb

from metastore.formats.protobuf.schema import ProtobufSchema

_EPOCH = datetime.date(1970, 1, 1)
_MILLIS_PER_DAY = 86_400_000


Descriptor: TypeAlias = "descriptor.Descriptor | upb.Descriptor"
Field: TypeAlias = "descriptor.FieldDescriptor | upb.FieldDescriptor"


class ProtobufValueError(ValueError):
    """A value that the schema's message cannot hold, or bytes that are not such a message."""


@lru_cache(maxsize=256)
def message_class(schema: ProtobufSchema) -> type[Message]:
    """The Protobuf runtime's class of the schema's root message (a pool of its own)."""
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(schema.descriptor_set).file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(schema.message))


def encode(schema: ProtobufSchema, value: Any) -> bytes | None:
    """``value`` (ksqlDB's JSON representation) as a record of ``schema``; None stays None."""
    if value is None:
        return None
    message = message_class(schema)()
    try:
        _set_message(message, value)
    except (TypeError, ValueError, ArithmeticError, AttributeError) as error:
        raise ProtobufValueError(f"{value!r} does not fit {schema.message}: {error}") from error
    return message.SerializeToString(deterministic=True)


def decode(schema: ProtobufSchema, data: bytes | None) -> Any:
    """A record of ``schema`` in ksqlDB's JSON representation; None stays None."""
    if data is None:
        return None
    try:
        message = message_class(schema).FromString(data)
    except DecodeError as error:
        raise ProtobufValueError(f"not a {schema.message}: {error}") from error
    return _message_value(message)


# -- writing ------------------------------------------------------------------------------------------
HEADER_BYTES = 5
"""Confluent's wire-format header: a zero magic byte and the schema's 4-byte id."""


def framed(schema_id: int, message: bytes, indexes: tuple[int, ...] = (0,)) -> bytes:
    """A PROTOBUF record: the header of ``schema_id``, the message indexes of the record's
    message in its schema (zig-zag varints: their count, then each; ``[0]`` as the single byte
    ``0``), then the message."""
    head = bytearray(b"\0" + schema_id.to_bytes(4, "big"))
    for number in (() if indexes == (0,) else (len(indexes), *indexes)):
        _write_varint(head, number << 1)  # zig-zag of a number >= 0
    if indexes == (0,):
        head.append(0)
    return bytes(head) + message


def _write_varint(out: bytearray, number: int) -> None:
    while number > 0x7F:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)


def unframed(record: bytes) -> bytes | None:
    """The message of a PROTOBUF record, after its header and message indexes (a zig-zag
    varint count, ``0`` standing for the first message, then the indexes); None when the
    record is not one."""
    if len(record) < HEADER_BYTES + 1 or record[0] != 0:
        return None
    position = HEADER_BYTES
    count, position = _varint(record, position)
    if count < 0:
        return None
    for _ in range((count >> 1) ^ -(count & 1)):
        index, position = _varint(record, position)
        if index < 0:
            return None
    return record[position:]


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value, shift = 0, 0
    while position < len(data) and shift < 64:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
    return -1, position


def _set_message(message: Message, value: Any) -> None:
    name = message.DESCRIPTOR.full_name
    if name == "google.protobuf.Timestamp":
        millis = int(value)
        _set(message, seconds=millis // 1000, nanos=millis % 1000 * 1_000_000)
    elif name == "google.type.Date":
        date = _EPOCH + datetime.timedelta(days=int(value))
        _set(message, year=date.year, month=date.month, day=date.day)
    elif name == "google.type.TimeOfDay":
        millis = int(value) % _MILLIS_PER_DAY
        _set(message, hours=millis // 3_600_000, minutes=millis // 60_000 % 60,
             seconds=millis // 1000 % 60, nanos=millis % 1000 * 1_000_000)
    elif name == "confluent.type.Decimal":
        number = decimal.Decimal(str(value))
        exponent = number.as_tuple().exponent
        scale = -exponent if isinstance(exponent, int) and exponent < 0 else 0
        unscaled = int(number.scaleb(scale))
        _set(message, value=_twos_complement(unscaled), precision=len(str(abs(unscaled))),
             scale=scale)
    elif _is_wrapper(message.DESCRIPTOR):
        field = message.DESCRIPTOR.fields_by_name["value"]
        _set(message, value=_scalar(field, value))
    else:
        _fill(message, value)


def _set(message: Message, **values: Any) -> None:
    for name, value in values.items():
        setattr(message, name, value)


def _twos_complement(number: int) -> bytes:
    """Java's ``BigInteger.toByteArray``: big-endian two's complement, shortest, 0 as one byte."""
    length = (number + (number < 0)).bit_length() // 8 + 1
    return number.to_bytes(length, "big", signed=True)


def _is_wrapper(message: Descriptor) -> bool:
    return (message.file.package == "google.protobuf" and message.name.endswith("Value")
            and [f.name for f in message.fields] == ["value"])


def _is_map(field: Field) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _entry(field: Field) -> tuple[Field, Field]:
    """A map field's key and value fields."""
    entry = field.message_type
    if entry is None:
        raise ProtobufValueError(f"{field.full_name} is not a map")
    return entry.fields_by_name["key"], entry.fields_by_name["value"]


def _fill(message: Message, value: Any) -> None:
    if not isinstance(value, dict):
        raise ProtobufValueError(f"{message.DESCRIPTOR.full_name} needs an object, got {value!r}")
    upper = {str(k).upper(): v for k, v in value.items()}
    for field in message.DESCRIPTOR.fields:
        item = value[field.name] if field.name in value else upper.get(field.name.upper())
        if item is None:
            continue
        container = getattr(message, field.name)
        if _is_map(field):
            key_field, value_field = _entry(field)
            for key, element in dict(item).items():
                map_key = _scalar(key_field, key)
                if value_field.message_type is not None:
                    if element is not None:
                        _set_message(container[map_key], element)
                elif element is not None:
                    container[map_key] = _scalar(value_field, element)
        elif field.is_repeated:
            for element in item:
                if element is None:  # Protobuf has no NULL element
                    continue
                if field.message_type is not None:
                    _set_message(container.add(), element)
                else:
                    container.append(_scalar(field, element))
        elif field.message_type is not None:
            container.SetInParent()
            _set_message(container, item)
        else:
            setattr(message, field.name, _scalar(field, item))


def _scalar(field: Field, value: Any) -> Any:
    kind = field.type
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return float(value)
    if kind == FieldDescriptor.TYPE_BOOL:
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if kind == FieldDescriptor.TYPE_STRING:
        if isinstance(value, str):
            return value
        return json.dumps(value) if isinstance(value, bool | dict | list) else str(value)
    if kind == FieldDescriptor.TYPE_BYTES:
        return base64.b64decode(str(value))
    if kind == FieldDescriptor.TYPE_ENUM and field.enum_type is not None:
        return field.enum_type.values_by_name[str(value)].number
    if isinstance(value, float) and not value.is_integer():
        raise ProtobufValueError(f"{value!r} is not an integer")
    return int(value)


# -- reading ------------------------------------------------------------------------------------------
def _message_value(message: Message) -> Any:
    name = message.DESCRIPTOR.full_name
    fields = {f.name: getattr(message, f.name) for f in message.DESCRIPTOR.fields}
    if name == "google.protobuf.Timestamp":
        return fields["seconds"] * 1000 + int(fields["nanos"] / 1_000_000)
    if name == "google.type.Date":
        try:
            return (datetime.date(fields["year"], fields["month"], fields["day"]) - _EPOCH).days
        except ValueError as error:
            raise ProtobufValueError(f"not a date: {message}") from error
    if name == "google.type.TimeOfDay":
        return ((fields["hours"] * 60 + fields["minutes"]) * 60 + fields["seconds"]) * 1000 + int(
            fields["nanos"] / 1_000_000)
    if name == "confluent.type.Decimal":
        unscaled = int.from_bytes(fields["value"], "big", signed=True) if fields["value"] else 0
        return float(decimal.Decimal(unscaled).scaleb(-fields["scale"]))
    if _is_wrapper(message.DESCRIPTOR):
        return _plain(message.DESCRIPTOR.fields_by_name["value"], fields["value"])
    return {field.name: _field_value(message, field) for field in message.DESCRIPTOR.fields}


def _field_value(message: Message, field: Field) -> Any:
    container = getattr(message, field.name)
    if _is_map(field):
        value_field = _entry(field)[1]
        return {str(k): _element(value_field, v) for k, v in container.items()}
    if field.is_repeated:
        return [_element(field, v) for v in container]
    if field.has_presence and not message.HasField(field.name):
        return None  # an absent message, or an absent proto3 optional scalar
    return _element(field, container)


def _element(field: Field, value: Any) -> Any:
    return _message_value(value) if field.message_type is not None else _plain(field, value)


def _plain(field: Field, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode()
    if field.type == FieldDescriptor.TYPE_ENUM and field.enum_type is not None:
        return field.enum_type.values_by_number[value].name
    return value
