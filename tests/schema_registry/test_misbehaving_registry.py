"""A Schema Registry that drips, answers garbage or answers too much: each call ends within the
client's deadline as the registry's error (503, ksqlDB's shape), never as a node failure."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from integration.misbehaving_registry import misbehaving_registry
from metastore.schema_registry.client import MAX_ANSWER_BYTES, SchemaRegistryClient
from metastore.schema_registry.exceptions import (
    SchemaRegistryAccessError,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
)
from metastore.server.http.error_codes import classify


@pytest.fixture
def registry_url() -> Iterator[str]:
    with misbehaving_registry() as url:
        yield url


@pytest.mark.parametrize(("mode", "says"), [
    ("drip", "did not answer within 2s"),
    ("slowheaders", "did not answer within 2s"),
    ("garbage", "not JSON"),
    ("huge", f"more than {MAX_ANSWER_BYTES} bytes"),
])
def test_a_misbehaving_registry_is_the_registrys_error_within_the_deadline(
        registry_url: str, mode: str, says: str) -> None:
    client = SchemaRegistryClient(f"{registry_url}/{mode}", timeout=2.0)
    started = time.monotonic()
    with pytest.raises(SchemaRegistryUnavailableError, match=says) as raised:
        client.latest("orders-value")
    assert time.monotonic() - started < 4.5
    answer = classify(raised.value)
    assert (answer.http_status, answer.code) == (503, 50300)
    client.close()


@pytest.mark.parametrize(("status", "error", "answer"), [
    (429, SchemaRegistryUnavailableError, (503, 50300)),
    (408, SchemaRegistryUnavailableError, (503, 50300)),
    (401, SchemaRegistryAccessError, (500, 50000)),
    (422, SchemaRegistryError, (400, 40001)),
])
def test_a_refusal_is_the_statements_unless_it_is_the_nodes_or_passes(
        registry_url: str, status: int, error: type[SchemaRegistryError],
        answer: tuple[int, int]) -> None:
    client = SchemaRegistryClient(f"{registry_url}/{status}", timeout=2.0)
    with pytest.raises(error) as raised:
        client.latest("orders-value")
    assert type(raised.value) is error
    classified = classify(raised.value)
    assert (classified.http_status, classified.code) == answer
    client.close()
