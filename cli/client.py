"""A small client of the ksqlDB REST API, with request ids that make retries safe."""

from __future__ import annotations

import json
import os
import ssl
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

DEFAULT_SERVER = "http://127.0.0.1:8088"
MEDIA_TYPE = "application/vnd.ksql.v1+json"
DELIMITED = "application/vnd.ksqlapi.delimited.v1"


class ClientError(Exception):
    """Could not talk to the server (exit 2)."""


@dataclass
class StatementFailedError(Exception):
    """The server rejected a statement (exit 1)."""

    error_code: int
    message: str
    body: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.error_code}: {self.message}"


def server_url(explicit: str | None) -> str:
    return (explicit or os.environ.get("METASTORE_SERVER") or DEFAULT_SERVER).rstrip("/")


TLS_ENVIRONMENT = ("METASTORE_CA_CERT", "METASTORE_CLIENT_CERT", "METASTORE_CLIENT_KEY")
"""PEM files of an HTTPS node: the CAs its certificate chains to, and the client certificate and
key a node that requires one (``ssl.client.authentication=REQUIRED``) is shown."""


def tls_verify() -> ssl.SSLContext | bool:
    """How an HTTPS node is trusted: by :data:`TLS_ENVIRONMENT`'s files, else the system's
    CAs."""
    ca, certificate, key = (os.environ.get(name) or None for name in TLS_ENVIRONMENT)
    if ca is None and certificate is None:
        return True
    try:
        context = ssl.create_default_context(cafile=ca)
        if certificate is not None:
            context.load_cert_chain(certificate, key)
    except (OSError, ssl.SSLError) as error:
        raise ClientError(f"the TLS files of {', '.join(TLS_ENVIRONMENT)} cannot be used: "
                          f"{error}") from error
    return context


class KsqlClient:
    def __init__(self, url: str, auth: tuple[str, str] | None = None, timeout: float = 60.0,
                 headers: Mapping[str, str] | None = None) -> None:
        """``headers``: sent with every request (the Accept header excepted)."""
        self.url = url
        self._http = httpx.Client(base_url=url, timeout=timeout, auth=auth,
                                  headers={**(headers or {}), "Accept": MEDIA_TYPE},
                                  verify=tls_verify())

    def close(self) -> None:
        self._http.close()

    def ksql(self, text: str, command_sequence_number: int | None = None,
             attempts: int = 3, properties: dict[str, Any] | None = None,
             variables: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Run statements, with ``properties`` as ksqlDB configuration overrides and
        ``variables`` as its session variables; a lost connection is retried with the same
        request id (never twice applied)."""
        body: dict[str, Any] = {"ksql": text, "streamsProperties": dict(properties or {}),
                                "requestId": str(uuid.uuid4())}
        if variables:
            body["sessionVariables"] = dict(variables)
        if command_sequence_number is not None:
            body["commandSequenceNumber"] = command_sequence_number
        for attempt in range(attempts):
            try:
                response = self._http.post("/ksql", json=body,
                                           headers={"Content-Type": MEDIA_TYPE})
            except httpx.TransportError as error:
                if attempt + 1 == attempts:
                    raise ClientError(f"cannot reach {self.url}: {error}. Is a node running "
                                      "there? (metastore server / metastore dev up)") from error
                time.sleep(0.5 * (attempt + 1))
                continue
            answer = self._answer(response)
            if not isinstance(answer, list):
                raise ClientError(f"unexpected answer from {self.url}: {answer!r:.200}")
            return answer
        raise ClientError("unreachable")

    def stream_query(self, text: str, properties: dict[str, Any] | None = None,
                     variables: dict[str, str] | None = None) -> Iterator[Any]:
        """Run one query over ``/query-stream``: yields its metadata (``queryId``,
        ``columnNames``, ``columnTypes``), then each row (a list) as it arrives. Closing the
        iterator closes the connection, which stops a push query on the node."""
        body = {"sql": text, "properties": dict(properties or {}),
                "sessionVariables": dict(variables or {})}
        try:
            with self._http.stream("POST", "/query-stream", json=body, timeout=httpx.Timeout(
                    self._http.timeout.connect, read=None), headers={"Accept": DELIMITED}) as response:
                if response.status_code >= 400:
                    response.read()
                    self._answer(response)
                for line in response.iter_lines():
                    if not line.strip():
                        continue
                    item = json.loads(line)
                    if isinstance(item, dict) and "error_code" in item:
                        raise StatementFailedError(int(item["error_code"]),
                                                   str(item.get("message", "")), item)
                    yield item
        except httpx.TransportError as error:
            raise ClientError(f"cannot reach {self.url}: {error}") from error

    def print_topic(self, text: str, properties: dict[str, Any] | None = None,
                    variables: dict[str, str] | None = None) -> Iterator[str]:
        """Run one PRINT over ``/query``: yields its lines (format lines, then one per record)
        as they arrive. Closing the iterator closes the connection, which ends the PRINT."""
        body = {"ksql": text, "streamsProperties": dict(properties or {}),
                "sessionVariables": dict(variables or {})}
        try:
            with self._http.stream("POST", "/query", json=body, timeout=httpx.Timeout(
                    self._http.timeout.connect, read=None)) as response:
                if response.status_code >= 400:
                    response.read()
                    self._answer(response)
                for line in response.iter_lines():
                    if line.strip():
                        yield line
        except httpx.TransportError as error:
            raise ClientError(f"cannot reach {self.url}: {error}") from error

    def get(self, path: str) -> Any:
        try:
            response = self._http.get(path)
        except httpx.TransportError as error:
            raise ClientError(f"cannot reach {self.url}: {error}") from error
        return self._answer(response)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        try:
            response = self._http.post(path, json=body, headers={"Content-Type": MEDIA_TYPE})
        except httpx.TransportError as error:
            raise ClientError(f"cannot reach {self.url}: {error}") from error
        return self._answer(response)

    def _answer(self, response: httpx.Response) -> Any:
        if response.status_code == 401:
            raise ClientError("the server requires credentials: pass --user USER:PASSWORD")
        try:
            data = response.json()
        except ValueError as error:
            raise ClientError(f"unexpected answer from {self.url} ({response.status_code}): "
                              f"{response.text[:200]}") from error
        if response.status_code >= 400:
            if isinstance(data, dict) and "error_code" in data:
                raise StatementFailedError(int(data["error_code"]), str(data.get("message", "")), data)
            raise ClientError(f"HTTP {response.status_code}: {data}")
        return data
