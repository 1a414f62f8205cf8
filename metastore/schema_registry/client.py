"""A typed client of the Confluent Schema Registry REST API (Confluent's own, Apicurio's
``ccompat``, Karapace...): the calls the node makes, each bounded by the client's timeout.

``url`` is the API's base URL (``http://host:8081``, or ``.../apis/ccompat/v7`` for Apicurio);
credentials in it (``http://user:secret@host``) are sent as basic auth and never shown: messages
name :func:`redacted` URLs. A subject, version or id the registry does not hold (a 404 with
Confluent's error code 40401, 40402 or 40403) is None, never an error; any other 404 (a wrong
base URL) is an error, so that nothing is taken for absent unasked. A registry that does not
answer, or answers 5xx, is :class:`SchemaRegistryUnavailableError`; another refusal is
:class:`SchemaRegistryError` with the registry's error code.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import httpx

from metastore.core.limits import MAX_RECORD_BYTES
from metastore.schema_registry.deadline import CallDeadline, one_connection_per_call
from metastore.schema_registry.exceptions import (
    SchemaRegistryAccessError,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
)

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
BAD_ANSWER = 50002
"""The error code of an answer that is not what the registry's API promises (too large, not
JSON, a field missing): the registry misbehaves, as when it is unavailable."""
UNAVAILABLE = 50301
"""The error code of a registry that did not answer (refused, timed out, dripped)."""
MAX_ANSWER_BYTES = 4 * 1024 * 1024
"""An answer larger than this is refused: a schema is text a statement carries."""
NOT_FOUND_CODES = frozenset({40401, 40402, 40403})
"""Confluent's codes of a 404 for an unknown subject, version or schema."""

MAX_REFERENCED_SCHEMAS = 64
"""How many schemas one schema may reference, directly and through its references: more is
refused, so a registry's answers cannot make a statement read without end."""

MAX_KNOWN_REGISTRATIONS = 10_000
"""How many registrations a client remembers (then it forgets them all and asks again)."""
REGISTER_ATTEMPTS = 5
"""How often a registration is sent while another one was creating its subject."""
_REGISTERING: dict[str, threading.Lock] = {}
_REGISTERING_GUARD = threading.Lock()


def _registering(url: str) -> threading.Lock:
    """The lock this process's registrations to the registry at ``url`` take turns with."""
    with _REGISTERING_GUARD:
        return _REGISTERING.setdefault(url, threading.Lock())


def redacted(url: str) -> str:
    """``url`` without the credentials it may carry."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


@dataclass(frozen=True)
class SchemaReference:
    """A schema's reference to another: the name it imports it by (a Protobuf ``import``), and
    the subject and version that hold it."""

    name: str
    subject: str
    version: int

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class ReferencedSchema:
    """The text of a schema another references, and how it is referenced."""

    reference: SchemaReference
    schema: str


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it: its id, the schema text and its type (AVRO, PROTOBUF
    or JSON); ``subject`` and ``version`` when it was asked for by subject; the schemas it
    references, directly (``references``, in the registry's order) and, once read
    (:meth:`SchemaRegistryClient.with_references`), each schema they reference in turn,
    dependencies first (``dependencies``, one per name)."""

    schema_id: int
    schema: str
    schema_type: str = "AVRO"
    subject: str | None = None
    version: int | None = None
    references: tuple[SchemaReference, ...] = ()
    dependencies: tuple[ReferencedSchema, ...] = ()
    reference_problem: str | None = None
    """Why the schemas it references could not be read (see ``with_references``)."""


class _UnreadableReferencesError(Exception):
    """A schema whose references cannot be read, and why."""


class SchemaRegistryClient:
    def __init__(self, url: str, timeout: float = 5.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"a Schema Registry URL is http:// or https://: {redacted(url)!r}")
        self.url = redacted(url).rstrip("/")
        """The base URL, without credentials."""
        auth = None if parts.username is None else httpx.BasicAuth(
            unquote(parts.username), unquote(parts.password or ""))
        self._timeout = timeout
        self._client = httpx.Client(base_url=self.url, timeout=timeout, trust_env=False,
                                    headers={"Accept": MEDIA_TYPE}, auth=auth,
                                    limits=one_connection_per_call())  # see CallDeadline
        self._ids: dict[tuple[str, str, str], int] = {}
        """Registrations already made: the same schema under a subject keeps its id."""

    def close(self) -> None:
        self._client.close()

    def subjects(self) -> list[str]:
        answer = self._get("/subjects")
        return [s for s in answer if isinstance(s, str)] if isinstance(answer, list) else []

    def latest(self, subject: str) -> RegisteredSchema | None:
        """The subject's latest version, or None when the subject is unknown."""
        answer = self._get(f"/subjects/{quote(subject, safe='')}/versions/latest")
        return None if answer is None else _registered(answer, subject)

    def version(self, subject: str, version: int) -> RegisteredSchema | None:
        """A version of a subject, or None when the registry does not hold it."""
        answer = self._get(f"/subjects/{quote(subject, safe='')}/versions/{int(version)}")
        return None if answer is None else _registered(answer, subject)

    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        answer = self._get(f"/schemas/ids/{schema_id}")
        if answer is None:
            return None
        return _registered({**answer, "id": schema_id} if isinstance(answer, dict) else answer,
                           None)

    def with_references(self, schema: RegisteredSchema) -> RegisteredSchema:
        """``schema`` with the texts of the schemas it references, through their references,
        each after those it references (Confluent's resolution: a name is read once); or with
        the ``reference_problem`` that kept them from being read (a reference the registry does
        not hold, a cycle, too many or too large: the schema's problem, not the registry's).
        A registry that does not answer raises."""
        if not schema.references:
            return schema
        done: dict[str, ReferencedSchema] = {}
        visiting: list[str] = []
        read = [len(schema.schema)]  # characters of every text, which a command must hold

        def visit(reference: SchemaReference) -> None:
            if reference.name in done:
                return
            if reference.name in visiting:
                cycle = " -> ".join([*visiting[visiting.index(reference.name):], reference.name])
                raise _UnreadableReferencesError(f"its references import each other: {cycle}")
            if len(done) + len(visiting) >= MAX_REFERENCED_SCHEMAS:
                raise _UnreadableReferencesError(f"it references more than {MAX_REFERENCED_SCHEMAS} "
                                        "schemas")
            found = self.version(reference.subject, reference.version)
            if found is None:
                raise _UnreadableReferencesError(
                    f"it references {reference.name!r}, which the registry does not hold "
                    f"(subject {reference.subject!r}, version {reference.version})")
            read[0] += len(found.schema)
            if read[0] > MAX_RECORD_BYTES:
                raise _UnreadableReferencesError(
                    f"it and the schemas it references hold more than {MAX_RECORD_BYTES} "
                    "characters, more than a command can keep")
            visiting.append(reference.name)
            for nested in found.references:  # at most MAX_REFERENCED_SCHEMAS deep
                visit(nested)
            visiting.pop()
            done[reference.name] = ReferencedSchema(reference, found.schema)

        try:
            for reference in schema.references:
                visit(reference)
        except _UnreadableReferencesError as problem:
            return replace(schema, reference_problem=str(problem))
        return replace(schema, dependencies=tuple(done.values()))

    def versions_of(self, schema_id: int) -> list[tuple[str, int]]:
        """The (subject, version) pairs registered with the schema of ``schema_id``."""
        answer = self._get(f"/schemas/ids/{schema_id}/versions")
        if not isinstance(answer, list):
            return []
        return [(entry["subject"], int(entry["version"])) for entry in answer
                if isinstance(entry, dict) and isinstance(entry.get("subject"), str)
                and isinstance(entry.get("version"), int)]

    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: tuple[SchemaReference, ...] = ()) -> int:
        """Register ``schema`` (with the schemas it ``references``, registered already) under
        ``subject``, or find it there; its id, asked once per client."""
        key = (subject, schema_type, schema + "".join(
            f"\n{r.name}\n{r.subject}\n{r.version}" for r in references))
        known = self._ids.get(key)
        if known is not None:
            return known
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        if references:
            body["references"] = [reference.as_json() for reference in references]
        answer = self._register_once(f"/subjects/{quote(subject, safe='')}/versions", body)
        if not isinstance(answer, dict) or not isinstance(answer.get("id"), int):
            raise SchemaRegistryUnavailableError(
                f"The Schema Registry at {self.url} answered a registration without an id: "
                f"{answer!r}", BAD_ANSWER)
        if len(self._ids) >= MAX_KNOWN_REGISTRATIONS:
            self._ids.clear()
        self._ids[key] = int(answer["id"])
        return int(answer["id"])

    def _register_once(self, path: str, body: dict[str, Any]) -> Any:
        """POST a registration, one at a time per registry in this process (Apicurio's
        in-memory database fails writers that wait for each other); again, a few times, when
        another process was
        creating the subject at the same moment (Apicurio's Confluent API answers the later of
        two first registrations 409 "already exists"; registering again finds the subject)."""
        for attempt in range(1, REGISTER_ATTEMPTS + 1):
            try:
                with _registering(self.url):
                    return self._call("POST", path, body)
            except SchemaRegistryError as error:
                if attempt == REGISTER_ATTEMPTS or not _created_meanwhile(error):
                    raise
                time.sleep(0.02 * attempt)
        raise AssertionError("unreachable")

    # -- transport -----------------------------------------------------------------------------
    def _get(self, path: str) -> Any:
        return self._call("GET", path, None)

    def _call(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        """The answer's JSON; None for a 404 of an unknown subject, version or id."""
        late = SchemaRegistryUnavailableError(
            f"The Schema Registry at {self.url} did not answer within {self._timeout:g}s",
            UNAVAILABLE)
        deadline = CallDeadline(self._timeout)
        try:
            with deadline, self._client.stream(method, path, json=body, headers={
                    "Content-Type": MEDIA_TYPE} if body is not None else None,
                    extensions={"trace": deadline.trace}) as response:
                content = bytearray()
                for chunk in response.iter_bytes():
                    content += chunk
                    if len(content) > MAX_ANSWER_BYTES:
                        raise SchemaRegistryUnavailableError(
                            f"The Schema Registry at {self.url} answered more than "
                            f"{MAX_ANSWER_BYTES} bytes", BAD_ANSWER)
        except httpx.HTTPError as error:
            if deadline.expired:  # a server that drips its status line or headers
                raise late from error
            raise SchemaRegistryUnavailableError(
                f"The Schema Registry at {self.url} is not available: {error}",
                UNAVAILABLE) from error
        if deadline.expired:  # a server that drips its answer: what came is cut short
            raise late
        status = response.status_code
        try:
            answer = json.loads(content) if content else None
        except ValueError:
            if status < 400:
                raise SchemaRegistryUnavailableError(
                    f"The Schema Registry at {self.url} answered {method} {path} with "
                    f"something that is not JSON: {bytes(content[:100])!r}", BAD_ANSWER) from None
            answer = None
        code = answer.get("error_code") if isinstance(answer, dict) else None
        if status == 404 and code in NOT_FOUND_CODES:
            return None
        if status >= 500 or status in (408, 429):
            raise SchemaRegistryUnavailableError(
                f"The Schema Registry at {self.url} failed ({status}): "
                f"{_message(answer, bytes(content))}", status * 100 + 1)
        if status in (401, 403, 407):
            raise SchemaRegistryAccessError(
                f"The Schema Registry at {self.url} refused this node's credentials ({status}): "
                f"{_message(answer, bytes(content))}", status * 100)
        if status >= 400:
            raise SchemaRegistryError(
                f"The Schema Registry at {self.url} refused {method} {path}: "
                f"{_message(answer, bytes(content))}",
                code if isinstance(code, int) and code > 0 else status * 100)
        return answer


def _created_meanwhile(error: SchemaRegistryError) -> bool:
    return error.error_code in (409, 40900) and "already exists" in str(error)


def _registered(answer: Any, subject: str | None) -> RegisteredSchema:
    if not isinstance(answer, dict) or not isinstance(answer.get("schema"), str):
        raise SchemaRegistryUnavailableError(
            f"The Schema Registry answered a schema without its text: {str(answer)[:200]}", BAD_ANSWER)
    version, schema_id = answer.get("version"), answer.get("id")
    if not isinstance(schema_id, int):
        raise SchemaRegistryUnavailableError(
            f"The Schema Registry answered a schema without its id: {str(answer)[:200]}", BAD_ANSWER)
    return RegisteredSchema(
        schema_id=schema_id, schema=answer["schema"],
        schema_type=str(answer.get("schemaType") or "AVRO"),
        subject=answer.get("subject") if isinstance(answer.get("subject"), str) else subject,
        version=version if isinstance(version, int) else None,
        references=_references(answer.get("references")))


def _references(answer: Any) -> tuple[SchemaReference, ...]:
    if answer is None:
        return ()
    if not isinstance(answer, list) or not all(
            isinstance(entry, dict) and isinstance(entry.get("name"), str)
            and isinstance(entry.get("subject"), str) and isinstance(entry.get("version"), int)
            for entry in answer):
        raise SchemaRegistryUnavailableError(
            f"The Schema Registry answered references that are not name, subject and version: "
            f"{str(answer)[:200]}", BAD_ANSWER)
    return tuple(SchemaReference(entry["name"], entry["subject"], entry["version"])
                 for entry in answer)


def _message(answer: Any, content: bytes) -> str:
    if isinstance(answer, dict) and isinstance(answer.get("message"), str):
        return str(answer["message"])
    return content[:200].decode(errors="replace")
