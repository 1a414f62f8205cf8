"""A typed client of the Confluent Schema Registry REST API (Confluent's own, Apicurio's
``ccompat``, Karapace...): the calls the node makes, each bounded by the client's timeout.

``url`` is the API's base URL (``http://host:8081``, or ``.../apis/ccompat/v7`` for Apicurio);
credentials in it (``http://user:secret@host``) are sent as basic auth. A subject or id the
registry does not hold is None, never an error. A registry that does not answer, or answers 5xx,
is :class:`SchemaRegistryUnavailableError`; another refusal is :class:`SchemaRegistryError` with the
registry's error code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from metastore.schema_registry.exceptions import (
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
)

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""An answer larger than this is refused: a schema is text a statement carries."""


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it: its id, the schema text and its type (AVRO, PROTOBUF
    or JSON); ``subject`` and ``version`` when it was asked for by subject."""

    schema_id: int
    schema: str
    schema_type: str = "AVRO"
    subject: str | None = None
    version: int | None = None


class SchemaRegistryClient:
    def __init__(self, url: str, timeout: float = 5.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"a Schema Registry URL starts with http:// or https://: {url!r}")
        self.url = url.rstrip("/")
        self._client = httpx.Client(base_url=self.url, timeout=timeout, trust_env=False,
                                    headers={"Accept": MEDIA_TYPE})

    def close(self) -> None:
        self._client.close()

    def subjects(self) -> list[str]:
        answer = self._get("/subjects")
        return [s for s in answer if isinstance(s, str)] if isinstance(answer, list) else []

    def latest(self, subject: str) -> RegisteredSchema | None:
        """The subject's latest version, or None when the subject is unknown."""
        answer = self._get(f"/subjects/{quote(subject, safe='')}/versions/latest")
        return None if answer is None else _registered(answer, subject)

    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        answer = self._get(f"/schemas/ids/{schema_id}")
        return None if answer is None else _registered({**answer, "id": schema_id}, None)

    def versions_of(self, schema_id: int) -> list[tuple[str, int]]:
        """The (subject, version) pairs registered with the schema of ``schema_id``."""
        answer = self._get(f"/schemas/ids/{schema_id}/versions")
        if not isinstance(answer, list):
            return []
        return [(entry["subject"], int(entry["version"])) for entry in answer
                if isinstance(entry, dict) and isinstance(entry.get("subject"), str)
                and isinstance(entry.get("version"), int)]

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """Register ``schema`` under ``subject`` (or find it there); its id."""
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        answer = self._call("POST", f"/subjects/{quote(subject, safe='')}/versions", body)
        if not isinstance(answer, dict) or not isinstance(answer.get("id"), int):
            raise SchemaRegistryError(f"The Schema Registry at {self.url} answered a "
                                      f"registration without an id: {answer!r}", 50002)
        return int(answer["id"])

    # -- transport -----------------------------------------------------------------------------
    def _get(self, path: str) -> Any:
        return self._call("GET", path, None)

    def _call(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        """The answer's JSON; None for a 404 (unknown subject, version or id)."""
        try:
            response = self._client.request(method, path, json=body, headers={
                "Content-Type": MEDIA_TYPE} if body is not None else None)
            content = response.read()
        except httpx.HTTPError as error:
            raise SchemaRegistryUnavailableError(
                f"The Schema Registry at {self.url} is not available: {error}", 50301) from error
        if len(content) > MAX_ANSWER_BYTES:
            raise SchemaRegistryError(f"The Schema Registry at {self.url} answered more than "
                                      f"{MAX_ANSWER_BYTES} bytes", 50002)
        try:
            answer = response.json() if content else None
        except ValueError:
            answer = None
        if response.status_code == 404:
            return None
        if response.status_code >= 500:
            raise SchemaRegistryUnavailableError(
                f"The Schema Registry at {self.url} failed ({response.status_code}): "
                f"{_message(answer, content)}", response.status_code * 100 + 1)
        if response.status_code >= 400:
            code = answer.get("error_code") if isinstance(answer, dict) else None
            raise SchemaRegistryError(
                f"The Schema Registry at {self.url} refused {method} {path}: "
                f"{_message(answer, content)}",
                code if isinstance(code, int) else response.status_code)
        return answer


def _registered(answer: Any, subject: str | None) -> RegisteredSchema:
    if not isinstance(answer, dict) or not isinstance(answer.get("schema"), str):
        raise SchemaRegistryError(f"The Schema Registry answered a schema without its text: "
                                  f"{str(answer)[:200]}", 50002)
    version = answer.get("version")
    return RegisteredSchema(
        schema_id=int(answer.get("id", 0)), schema=answer["schema"],
        schema_type=str(answer.get("schemaType") or "AVRO"),
        subject=answer.get("subject") if isinstance(answer.get("subject"), str) else subject,
        version=version if isinstance(version, int) else None)


def _message(answer: Any, content: bytes) -> str:
    if isinstance(answer, dict) and isinstance(answer.get("message"), str):
        return str(answer["message"])
    return content[:200].decode(errors="replace")
