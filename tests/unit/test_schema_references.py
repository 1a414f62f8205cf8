"""Schemas that reference other registered schemas (a Protobuf ``import``): the client resolves
their texts, a CREATE infers columns across the files and keeps them, and the source is read and
written with all of them, registering its schema with the same references."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from google.protobuf import descriptor_pb2 as pb

from metastore.catalog.exceptions import SchemaError
from metastore.catalog.model import DataSource
from metastore.core.limits import MAX_RECORD_BYTES
from metastore.engine.inference import PrefetchedSchemas, infer_columns
from metastore.formats.protobuf import values
from metastore.formats.protobuf.schema import registered, value_schema
from metastore.formats.written_schemas import written_schema
from metastore.schema_registry.client import (
    MAX_REFERENCED_SCHEMAS,
    ReferencedSchema,
    RegisteredSchema,
    SchemaReference,
    SchemaRegistryClient,
)
from metastore.sql import statements as st
from metastore.sql import types as ty
from metastore.sql.parser import parse

ORDER = ('syntax = "proto3";\npackage shop;\nimport "shop/event.proto";\n'
         'message Order {\n  Event event = 1;\n  Kind kind = 2;\n  int32 count = 3;\n}\n')
EVENT = ('syntax = "proto3";\npackage shop;\nimport "google/protobuf/timestamp.proto";\n'
         'message Event {\n  google.protobuf.Timestamp at = 1;\n  string name = 2;\n}\n'
         'enum Kind {\n  NEW = 0;\n  OLD = 1;\n}\n')
EVENT_REFERENCE = SchemaReference("shop/event.proto", "event-subject", 3)


def inferred(schema: RegisteredSchema, statement_text: str) -> DataSource:
    statement = parse(statement_text)[0]
    assert isinstance(statement, st.CreateSource)
    result = infer_columns(statement, [], "KAFKA", "PROTOBUF",
                           PrefetchedSchemas({"orders-value": schema}, {5: schema}))
    return DataSource("S", st.SourceKind.STREAM, tuple(result.columns), "orders", "KAFKA",
                      "PROTOBUF", 1, "", properties=result.properties)


def order_schema() -> RegisteredSchema:
    return RegisteredSchema(5, ORDER, "PROTOBUF", references=(EVENT_REFERENCE,),
                            dependencies=(ReferencedSchema(EVENT_REFERENCE, EVENT),))


def test_columns_are_inferred_across_the_files_a_schema_imports() -> None:
    source = inferred(order_schema(), "CREATE STREAM S WITH (KAFKA_TOPIC='orders', "
                                      "VALUE_FORMAT='PROTOBUF');")
    assert [(c.name, c.type) for c in source.value_columns] == [
        ("EVENT", ty.StructType((("AT", ty.TIMESTAMP), ("NAME", ty.STRING)))),
        ("KIND", ty.STRING), ("COUNT", ty.INTEGER)]
    written = written_schema(source, False)
    assert written is not None and written.text == ORDER
    assert written.references == (EVENT_REFERENCE,)
    assert json.loads(written.references_json()) == [
        {"name": "shop/event.proto", "subject": "event-subject", "version": 3}]


def test_a_source_reads_and_writes_with_the_files_its_schema_imports() -> None:
    source = inferred(order_schema(), "CREATE STREAM S WITH (KAFKA_TOPIC='orders', "
                                      "VALUE_FORMAT='PROTOBUF', VALUE_SCHEMA_ID=5);")
    schema = value_schema(source)
    files = pb.FileDescriptorSet.FromString(schema.descriptor_set).file
    assert [f.name for f in files] == [
        "google/protobuf/timestamp.proto", "shop/event.proto", "registered.proto"]
    assert list(files[-1].dependency) == ["shop/event.proto"]
    assert schema.message == "shop.Order" and schema.indexes == (0,)
    message = values.encode(schema, {"event": {"name": "x"}, "kind": "OLD", "count": 2})
    assert message == bytes([0x0A, 0x03, 0x12, 0x01, ord("x"), 0x10, 0x01, 0x18, 0x02])


def test_references_of_other_formats_are_refused_with_the_reason() -> None:
    statement = parse("CREATE STREAM S WITH (KAFKA_TOPIC='orders', VALUE_FORMAT='AVRO');")[0]
    assert isinstance(statement, st.CreateSource)
    schema = RegisteredSchema(1, '{"type": "record", "name": "R", "fields": [{"name": "e", '
                                 '"type": "shop.Event"}]}', "AVRO",
                              references=(SchemaReference("shop.Event", "e", 1),))
    with pytest.raises(SchemaError, match="references are read in PROTOBUF schemas only"):
        infer_columns(statement, [], "KAFKA", "AVRO", PrefetchedSchemas({"orders-value": schema}))


class Registry:
    """A registry's answers over HTTP, by path; what was asked, in order."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.asked: list[str] = []
        self.bodies: list[Any] = []

    def client(self) -> SchemaRegistryClient:
        client = SchemaRegistryClient("http://registry:8081")
        client._client = httpx.Client(base_url="http://registry:8081",
                                      transport=httpx.MockTransport(self.handle))
        return client

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.asked.append(f"{request.method} {path}")
        if request.method == "POST":
            self.bodies.append(json.loads(request.content))
            return httpx.Response(200, json={"id": 9})
        if path not in self.answers:
            return httpx.Response(404, json={"error_code": 40402, "message": "not found"})
        return httpx.Response(200, json=self.answers[path])


def version(subject: str, number: int, schema: str, *references: tuple[str, str, int]
            ) -> dict[str, Any]:
    return {"subject": subject, "version": number, "id": 100 + number, "schema": schema,
            "schemaType": "PROTOBUF",
            "references": [{"name": n, "subject": s, "version": v} for n, s, v in references]}


def test_the_client_resolves_references_dependencies_first_each_name_once() -> None:
    registry = Registry({
        "/schemas/ids/5": {"schema": "main", "schemaType": "PROTOBUF", "references": [
            {"name": "a.proto", "subject": "a", "version": 1},
            {"name": "b.proto", "subject": "b", "version": 2}]},
        "/subjects/a/versions/1": version("a", 1, "A", ("c.proto", "c", 1)),
        "/subjects/b/versions/2": version("b", 2, "B", ("c.proto", "c", 1), ("a.proto", "a", 1)),
        "/subjects/c/versions/1": version("c", 1, "C"),
    })
    client = registry.client()
    found = client.by_id(5)
    assert found is not None and found.dependencies == () and registry.asked == [
        "GET /schemas/ids/5"], "a schema alone reads no reference (ASSERT SCHEMA asks this)"
    found = client.with_references(found)
    assert [r.name for r in found.references] == ["a.proto", "b.proto"]
    assert [(d.reference.name, d.schema) for d in found.dependencies] == [
        ("c.proto", "C"), ("a.proto", "A"), ("b.proto", "B")]
    assert registry.asked.count("GET /subjects/c/versions/1") == 1


def problem_of(answers: dict[str, Any]) -> str | None:
    client = Registry(answers).client()
    found = client.by_id(5)
    assert found is not None
    return client.with_references(found).reference_problem


def test_references_that_cannot_be_read_are_the_schemas_problem() -> None:
    assert problem_of({"/schemas/ids/5": {"schema": "main", "references": [
        {"name": "a.proto", "subject": "a", "version": 1}]}}) == (
        "it references 'a.proto', which the registry does not hold (subject 'a', version 1)")
    chain = {f"/subjects/s{n}/versions/1": version(f"s{n}", 1, "x", (f"{n + 1}.proto",
                                                                    f"s{n + 1}", 1))
             for n in range(MAX_REFERENCED_SCHEMAS + 5)}
    chain["/schemas/ids/5"] = {"schema": "main", "references": [
        {"name": "0.proto", "subject": "s0", "version": 1}]}
    assert problem_of(chain) == "it references more than 64 schemas"
    assert problem_of({
        "/schemas/ids/5": {"schema": "main", "references": [
            {"name": "a.proto", "subject": "a", "version": 1}]},
        "/subjects/a/versions/1": version("a", 1, "x" * (MAX_RECORD_BYTES + 1))}) == (
        f"it and the schemas it references hold more than {MAX_RECORD_BYTES} characters, more "
        "than a command can keep")
    assert problem_of({
        "/schemas/ids/5": {"schema": "main", "references": [
            {"name": "a.proto", "subject": "a", "version": 1}]},
        "/subjects/a/versions/1": version("a", 1, "A", ("b.proto", "b", 1)),
        "/subjects/b/versions/1": version("b", 1, "B", ("a.proto", "a", 1)),
    }) == "its references import each other: a.proto -> b.proto -> a.proto"
    statement = parse("CREATE STREAM S WITH (KAFKA_TOPIC='orders', VALUE_FORMAT='PROTOBUF');")[0]
    assert isinstance(statement, st.CreateSource)
    broken = RegisteredSchema(5, ORDER, "PROTOBUF", references=(EVENT_REFERENCE,),
                              reference_problem="it references 'shop/event.proto', which ...")
    with pytest.raises(SchemaError, match=r"the schemas it references cannot be read: it "
                                          r"references 'shop/event\.proto'"):
        infer_columns(statement, [], "KAFKA", "PROTOBUF",
                      PrefetchedSchemas({"orders-value": broken}))


def test_a_writer_registers_the_references_in_the_registrys_order() -> None:
    first = SchemaReference("shop/order_kind.proto", "kinds", 1)
    schema = RegisteredSchema(
        5, ORDER.replace('import "shop/event.proto";',
                         'import "shop/event.proto";\nimport "shop/order_kind.proto";'),
        "PROTOBUF", references=(EVENT_REFERENCE, first),
        dependencies=(ReferencedSchema(first, 'syntax = "proto3";\npackage shop;\n'
                                              'enum Kind {\n  NEW = 0;\n  OLD = 1;\n}\n'),
                      ReferencedSchema(EVENT_REFERENCE, EVENT.replace(
                          "enum Kind {\n  NEW = 0;\n  OLD = 1;\n}\n", ""))))
    source = inferred(schema, "CREATE STREAM S WITH (KAFKA_TOPIC='orders', "
                              "VALUE_FORMAT='PROTOBUF');")
    written = written_schema(source, False)
    assert written is not None and written.references == (EVENT_REFERENCE, first)
    assert [c.name for c in source.value_columns] == ["EVENT", "KIND", "COUNT"]


def test_the_descriptor_set_names_each_file_once() -> None:
    timestamp = ('syntax = "proto3";\npackage google.protobuf;\n'
                 'message Timestamp {\n  int64 seconds = 1;\n  int32 nanos = 2;\n}\n')
    schema = registered(ORDER, None, (("google/protobuf/timestamp.proto", timestamp),
                                      ("shop/event.proto", EVENT)))
    names = [f.name for f in pb.FileDescriptorSet.FromString(schema.descriptor_set).file]
    assert names == ["google/protobuf/timestamp.proto", "shop/event.proto", "registered.proto"]
    clash = registered(ORDER.replace("shop/event.proto", "registered.proto"), None,
                       (("registered.proto", EVENT),))
    names = [f.name for f in pb.FileDescriptorSet.FromString(clash.descriptor_set).file]
    assert names == ["google/protobuf/timestamp.proto", "registered.proto", "_registered.proto"]
    assert values.encode(clash, {"count": 1}) == bytes([0x18, 0x01])


def test_a_schema_is_registered_with_its_references() -> None:
    registry = Registry({})
    client = registry.client()
    assert client.register("orders-value", ORDER, "PROTOBUF", (EVENT_REFERENCE,)) == 9
    assert client.register("orders-value", ORDER, "PROTOBUF", (EVENT_REFERENCE,)) == 9
    client.register("orders-value", ORDER, "PROTOBUF")
    assert registry.bodies == [
        {"schema": ORDER, "schemaType": "PROTOBUF", "references": [
            {"name": "shop/event.proto", "subject": "event-subject", "version": 3}]},
        {"schema": ORDER, "schemaType": "PROTOBUF"}]
