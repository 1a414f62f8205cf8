"""``.proto`` text (proto2 or proto3) as a ``FileDescriptorProto``: the Protobuf schemas a Schema
Registry holds, read without ``protoc``.

What a schema of records needs is read: ``syntax``, ``package``, ``import``, ``message`` (nested,
with fields, ``repeated`` / ``optional`` / ``required`` labels, ``map<K, V>`` fields, ``oneof``
groups, nested ``enum``), top-level ``enum``; options, ``reserved``, ``extensions``,
``extend`` and ``service`` blocks are skipped. Type names are resolved as ``protoc`` resolves
them (innermost scope outwards) against the file's own types; a name it does not define (an
imported type) is kept fully qualified. Text that is not a ``.proto`` file is a
:class:`ProtoFileError`, with the line of the problem.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from google.protobuf import descriptor_pb2 as pb

_F = pb.FieldDescriptorProto
_Kind: TypeAlias = "pb.FieldDescriptorProto.Type.ValueType"
SCALARS: dict[str, _Kind] = {
    "double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT, "int64": _F.TYPE_INT64,
    "uint64": _F.TYPE_UINT64, "int32": _F.TYPE_INT32, "fixed64": _F.TYPE_FIXED64,
    "fixed32": _F.TYPE_FIXED32, "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES, "uint32": _F.TYPE_UINT32, "sfixed32": _F.TYPE_SFIXED32,
    "sfixed64": _F.TYPE_SFIXED64, "sint32": _F.TYPE_SINT32, "sint64": _F.TYPE_SINT64,
}
MAX_DEPTH = 64
_TOKEN = re.compile(r"""\s+|//[^\n]*|/\*.*?\*/|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"""
                    r"""|([A-Za-z_.][A-Za-z0-9_.]*)|([-+]?[0-9][0-9A-Za-z_.+-]*)|(.)""", re.S)


class ProtoFileError(ValueError):
    """Text that is not a ``.proto`` file this reader understands."""


@dataclass(frozen=True)
class _Token:
    text: str
    line: int
    is_string: bool = False


def parse(text: str, name: str = "schema.proto",
          imported: Sequence[pb.FileDescriptorProto] = ()) -> pb.FileDescriptorProto:
    """The file of ``text``; its type names resolved against its own types and those of the
    ``imported`` files (parsed already)."""
    parser = _Parser(_tokens(text))
    file = parser.file(name)
    _resolve(file, imported)
    return file


def parse_with_imports(text: str, imports: Sequence[tuple[str, str]],
                       name: str = "schema.proto") -> list[pb.FileDescriptorProto]:
    """The files of a schema and of the schemas it imports (``imports``: name and text, each
    after those it imports), dependencies first, the schema's own last."""
    files: list[pb.FileDescriptorProto] = []
    for import_name, import_text in imports:
        files.append(parse(import_text, import_name, files))
    taken = {import_name for import_name, _ in imports}
    while name in taken:  # the schema's own name is no import's
        name = f"_{name}"
    files.append(parse(text, name, files))
    return files


FIELD_META = "confluent.field_meta"
"""Confluent's field option whose ``params`` (key, value) give a ``confluent.type.Decimal``
field its ``precision`` and ``scale``."""


def field_meta(field: pb.FieldDescriptorProto) -> dict[str, str]:
    """The ``params`` of a field's ``(confluent.field_meta)`` option."""
    for option in field.options.uninterpreted_option:
        if [part.name_part for part in option.name] == [FIELD_META]:
            return dict(re.findall(r'key: "([^"]*)" value: "([^"]*)"', option.aggregate_value))
    return {}


def _field_meta_params(options: list[_Token]) -> list[tuple[str, str]]:
    """The (key, value) params of the ``(confluent.field_meta) = { params: [...] }`` among a
    field's option tokens, in order."""
    if not any(t.text == FIELD_META and not t.is_string for t in options):
        return []
    params: list[tuple[str, str]] = []
    entry: dict[str, str] = {}
    for index, token in enumerate(options):
        following = options[index + 1:index + 3]
        if (not token.is_string and token.text in ("key", "value") and len(following) == 2
                and following[0].text == ":" and following[1].is_string):
            entry[token.text] = following[1].text
        elif token.text == "}" and not token.is_string and "key" in entry:
            params.append((entry["key"], entry.get("value", "")))
            entry = {}
    return params


def _tokens(text: str) -> list[_Token]:
    tokens, line = [], 1
    for match in _TOKEN.finditer(text):
        string, word, number, symbol = match.groups()
        if string is not None:
            tokens.append(_Token(string[1:-1], line, is_string=True))
        elif word is not None or number is not None or symbol is not None:
            tokens.append(_Token(word or number or symbol or "", line))
        line += match.group(0).count("\n")
    return tokens


class _Parser:
    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.position = 0

    def peek(self) -> str | None:
        return self.tokens[self.position].text if self.position < len(self.tokens) else None

    def next(self) -> _Token:
        if self.position >= len(self.tokens):
            raise ProtoFileError("unexpected end of the schema")
        token = self.tokens[self.position]
        self.position += 1
        return token

    def expect(self, text: str) -> None:
        token = self.next()
        if token.text != text or token.is_string:
            raise ProtoFileError(f"line {token.line}: expected {text!r}, found {token.text!r}")

    def skip_statement(self) -> None:
        """Skip to the end of a statement (its ``;``) or over a ``{ ... }`` block."""
        depth = 0
        while True:
            token = self.next()
            if token.is_string:
                continue
            if token.text == "{":
                depth += 1
            elif token.text == "}":
                depth -= 1
                if depth <= 0:
                    return
            elif token.text == ";" and depth == 0:
                return

    def file(self, name: str) -> pb.FileDescriptorProto:
        file = pb.FileDescriptorProto(name=name, syntax="proto2")
        while self.peek() is not None:
            word = self.next()
            if word.text == "syntax":
                self.expect("=")
                file.syntax = self.next().text
                self.expect(";")
            elif word.text == "package":
                file.package = self.next().text
                self.expect(";")
            elif word.text == "import":
                target = self.next()
                if target.text in ("public", "weak") and not target.is_string:
                    target = self.next()
                file.dependency.append(target.text)
                self.expect(";")
            elif word.text == "message":
                file.message_type.append(self.message(file.syntax, 0))
            elif word.text == "enum":
                file.enum_type.append(self.enum())
            elif word.text == ";":
                continue
            else:  # option, service, extend
                self.skip_statement()
        return file

    def message(self, syntax: str, depth: int) -> pb.DescriptorProto:
        if depth > MAX_DEPTH:
            raise ProtoFileError(f"messages nested more than {MAX_DEPTH} deep")
        message = pb.DescriptorProto(name=self.next().text)
        self.expect("{")
        while (word := self.peek()) != "}":
            if word is None:
                raise ProtoFileError(f"message {message.name} is not closed")
            if word == "message":
                self.next()
                message.nested_type.append(self.message(syntax, depth + 1))
            elif word == "enum":
                self.next()
                message.enum_type.append(self.enum())
            elif word == "oneof":
                self.next()
                index = len(message.oneof_decl)
                message.oneof_decl.add(name=self.next().text)
                self.expect("{")
                while self.peek() != "}":
                    if self.peek() == "option":
                        self.skip_statement()
                        continue
                    field = self.field(message, syntax)
                    field.oneof_index = index
                self.expect("}")
            elif word in ("option", "reserved", "extensions", "extend"):
                self.skip_statement()
            elif word == ";":
                self.next()
            else:
                self.field(message, syntax)
        self.expect("}")
        for field in message.field:  # protoc's order: the synthetic oneofs after the real ones
            if field.proto3_optional:
                field.oneof_index = len(message.oneof_decl)
                message.oneof_decl.add(name=f"_{field.name}")
        return message

    def skip_brackets(self) -> list[_Token]:
        """Skip a field's or value's ``[ ... ]`` options, nested brackets and braces included;
        returns the tokens skipped."""
        depth = 0
        skipped: list[_Token] = []
        while True:
            token = self.next()
            skipped.append(token)
            if token.is_string:
                continue
            if token.text in ("[", "{"):
                depth += 1
            elif token.text in ("]", "}"):
                depth -= 1
                if depth == 0:
                    return skipped

    def field(self, message: pb.DescriptorProto, syntax: str) -> pb.FieldDescriptorProto:
        label = _F.LABEL_OPTIONAL
        optional = False
        if self.peek() in ("repeated", "optional", "required"):
            word = self.next().text
            label = {"repeated": _F.LABEL_REPEATED, "required": _F.LABEL_REQUIRED}.get(
                word, _F.LABEL_OPTIONAL)
            optional = word == "optional" and syntax == "proto3"
        if self.peek() == "map":
            self.next()
            self.expect("<")
            key = self.next().text
            self.expect(",")
            value = self.next().text
            self.expect(">")
            name = self.next().text
            entry = message.nested_type.add(name="".join(
                part[:1].upper() + part[1:] for part in name.split("_")) + "Entry")
            entry.options.map_entry = True
            _typed(entry.field.add(name="key", number=1, label=_F.LABEL_OPTIONAL), key)
            _typed(entry.field.add(name="value", number=2, label=_F.LABEL_OPTIONAL), value)
            field = message.field.add(name=name, label=_F.LABEL_REPEATED, type=_F.TYPE_MESSAGE,
                                      type_name=entry.name)
        else:
            type_name = self.next().text
            field = message.field.add(name=self.next().text, label=label)
            _typed(field, type_name)
        self.expect("=")
        number = self.next()
        try:
            field.number = int(number.text, 0)
        except ValueError as error:
            raise ProtoFileError(f"line {number.line}: {number.text!r} is no field number") from error
        if self.peek() == "[":
            params = _field_meta_params(self.skip_brackets())
            if params:  # kept as protoc keeps an option it has not resolved
                option = field.options.uninterpreted_option.add(aggregate_value=" ".join(
                    f'params {{ key: "{key}" value: "{value}" }}' for key, value in params))
                option.name.add(name_part=FIELD_META, is_extension=True)
        self.expect(";")
        if optional:  # proto3 optional: a synthetic oneof, added after the message's own
            field.proto3_optional = True
        return field

    def enum(self) -> pb.EnumDescriptorProto:
        enum = pb.EnumDescriptorProto(name=self.next().text)
        self.expect("{")
        while (word := self.peek()) != "}":
            if word is None:
                raise ProtoFileError(f"enum {enum.name} is not closed")
            if word in ("option", "reserved"):
                self.skip_statement()
                continue
            if word == ";":
                self.next()
                continue
            name = self.next().text
            self.expect("=")
            value = self.next()
            try:
                number = int(value.text, 0)
            except ValueError as error:
                raise ProtoFileError(f"line {value.line}: {value.text!r} is no enum value") from error
            enum.value.add(name=name, number=number)
            if self.peek() == "[":
                while self.next().text != "]":
                    pass
            self.expect(";")
        self.expect("}")
        return enum


def _typed(field: pb.FieldDescriptorProto, type_name: str) -> None:
    if type_name in SCALARS:
        field.type = SCALARS[type_name]
    else:
        field.type_name = type_name  # resolved by _resolve


def _resolve(file: pb.FileDescriptorProto, imported: Sequence[pb.FileDescriptorProto]) -> None:
    """Each message or enum type name as the fully qualified name ``protoc`` would resolve it
    to: searched from the field's scope outwards among the file's types and the ``imported``
    files'; an unknown name is taken as fully qualified (an imported type)."""
    package = f".{file.package}" if file.package else ""
    kinds: dict[str, _Kind] = {}

    def collect(scope: str, messages: list[pb.DescriptorProto],
                enums: list[pb.EnumDescriptorProto]) -> None:
        for enum in enums:
            kinds[f"{scope}.{enum.name}"] = _F.TYPE_ENUM
        for message in messages:
            kinds[f"{scope}.{message.name}"] = _F.TYPE_MESSAGE
            collect(f"{scope}.{message.name}", list(message.nested_type),
                    list(message.enum_type))

    for other in imported:
        collect(f".{other.package}" if other.package else "", list(other.message_type),
                list(other.enum_type))
    collect(package, list(file.message_type), list(file.enum_type))

    def resolve(scope: str, messages: list[pb.DescriptorProto]) -> None:
        for message in messages:
            inner = f"{scope}.{message.name}"
            for field in message.field:
                if not field.type_name or field.type_name.startswith("."):
                    continue
                field.type_name, field.type = _lookup(field.type_name, inner, kinds)
            for entry in (n for n in message.nested_type if n.options.map_entry):
                for field in entry.field:
                    if field.type_name and not field.type_name.startswith("."):
                        field.type_name, field.type = _lookup(field.type_name, inner, kinds)
            resolve(inner, [n for n in message.nested_type if not n.options.map_entry])

    resolve(package, list(file.message_type))


def _lookup(name: str, scope: str, kinds: dict[str, _Kind]) -> tuple[str, _Kind]:
    parts = scope.split(".")
    while parts:
        candidate = ".".join([*parts, name])
        if not candidate.startswith("."):
            candidate = "." + candidate
        if candidate in kinds:
            return candidate, kinds[candidate]
        parts.pop()
    candidate = "." + name
    return candidate, kinds.get(candidate, _F.TYPE_MESSAGE)
