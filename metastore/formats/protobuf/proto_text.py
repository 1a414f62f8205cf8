"""A derived Protobuf schema as ``.proto`` text: what a PROTOBUF sink registers.

The schema registry holds Protobuf schemas as the text of their ``.proto`` file, which imports
the well-known files it uses by name (the registry knows ``google/protobuf/*`` and
``google/type/*``). The text is rendered from the root's file descriptor alone, so it is a pure
function of the derived schema: every node renders the same text.
"""

from __future__ import annotations

from functools import lru_cache

from google.protobuf import descriptor_pb2 as pb

from metastore.formats.protobuf.schema import ProtobufSchema

_F = pb.FieldDescriptorProto
_SCALAR_NAMES = {
    _F.TYPE_DOUBLE: "double", _F.TYPE_FLOAT: "float", _F.TYPE_INT64: "int64",
    _F.TYPE_UINT64: "uint64", _F.TYPE_INT32: "int32", _F.TYPE_FIXED64: "fixed64",
    _F.TYPE_FIXED32: "fixed32", _F.TYPE_BOOL: "bool", _F.TYPE_STRING: "string",
    _F.TYPE_BYTES: "bytes", _F.TYPE_UINT32: "uint32", _F.TYPE_SFIXED32: "sfixed32",
    _F.TYPE_SFIXED64: "sfixed64", _F.TYPE_SINT32: "sint32", _F.TYPE_SINT64: "sint64",
}


class ProtoTextError(ValueError):
    """A schema that has no ``.proto`` file of its own (an unwrapped scalar's wrapper)."""


@lru_cache(maxsize=256)  # a sink's and an INSERT VALUES target's schema, rendered once
def render(schema: ProtobufSchema) -> str:
    files = pb.FileDescriptorSet.FromString(schema.descriptor_set)
    main = next((f for f in files.file if any(m.name == schema.message.split(".")[-1]
                                              for m in f.message_type)
                 and not f.package), None)
    if main is None:
        raise ProtoTextError(f"{schema.message} is a well-known type, not a schema of its own")
    lines = ['syntax = "proto3";', ""]
    lines += [f'import "{dependency}";' for dependency in main.dependency]
    if main.dependency:
        lines.append("")
    for message in main.message_type:
        lines += _message(message, "")
    return "\n".join(lines) + "\n"


def _message(message: pb.DescriptorProto, indent: str) -> list[str]:
    lines = [f"{indent}message {message.name} {{"]
    entries = {nested.name: nested for nested in message.nested_type
               if nested.options.map_entry}
    for field in message.field:
        lines.append(f"{indent}  {_field(field, entries)} = {field.number};")
    for nested in message.nested_type:
        if not nested.options.map_entry:
            lines += _message(nested, indent + "  ")
    lines.append(f"{indent}}}")
    return lines


def _field(field: pb.FieldDescriptorProto, entries: dict[str, pb.DescriptorProto]) -> str:
    type_name = _type(field)
    entry = entries.get(field.type_name.rsplit(".", 1)[-1]) if field.type == _F.TYPE_MESSAGE else None
    if entry is not None:
        key, value = entry.field[0], entry.field[1]
        return f"map<{_type(key)}, {_type(value)}> {field.name}"
    if field.label == _F.LABEL_REPEATED:
        return f"repeated {type_name} {field.name}"
    if field.proto3_optional:
        return f"optional {type_name} {field.name}"
    return f"{type_name} {field.name}"


def _type(field: pb.FieldDescriptorProto) -> str:
    if field.type in (_F.TYPE_MESSAGE, _F.TYPE_ENUM):
        return field.type_name.lstrip(".")
    return _SCALAR_NAMES[field.type]
