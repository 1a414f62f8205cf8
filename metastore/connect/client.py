"""A thin typed client of Kafka Connect's REST API: the calls the connector statements make.

Each call is one HTTP request, bounded by the settings' timeout, made up to three times as
ksqlDB's client makes it when Connect answers 409 (a rebalance in progress); a call that only
reads (GET, and PUT of a config to validate) also when Connect answers a 5xx or not at all, but a
POST or DELETE is not sent again after an answer that may have followed its effect. An answer
that is not the one expected raises :class:`ConnectError` with Connect's body as its reason, and
its status; no answer raises :class:`ConnectUnavailableError` naming the URL. Credentials go in
the Authorization header only, and no message shows them.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

import httpx

from metastore.connect.exceptions import ConnectError, ConnectUnavailableError
from metastore.connect.settings import ConnectSettings

ATTEMPTS = 3
RETRY_PAUSE_SECONDS = 0.2
MAX_ANSWER_BYTES = 4 * 1024 * 1024
"""The most a Connect answer may hold: a node reads no unbounded body."""
REASON_CHARS = 2000


class ConnectClient:
    """Calls to the Connect cluster at ``settings.url``."""

    def __init__(self, settings: ConnectSettings) -> None:
        self.url = settings.url
        self._http = httpx.Client(
            base_url=settings.url, timeout=settings.timeout_seconds, trust_env=False,
            auth=httpx.BasicAuth(*settings.credentials) if settings.credentials else None,
            headers={"Accept": "application/json"})

    def close(self) -> None:
        self._http.close()

    def connectors(self) -> list[str]:
        names = self._call("GET", "/connectors", "list connectors")
        return [str(name) for name in names] if isinstance(names, list) else []

    def plugins(self) -> list[dict[str, Any]]:
        found = self._call("GET", "/connector-plugins", "list connector plugins")
        return [p for p in found if isinstance(p, dict)] if isinstance(found, list) else []

    def info(self, name: str) -> dict[str, Any]:
        return _object(self._call("GET", f"/connectors/{_path(name)}", "describe connector"))

    def status(self, name: str) -> dict[str, Any]:
        return _object(self._call("GET", f"/connectors/{_path(name)}/status",
                                  "query connector status"))

    def topics(self, name: str) -> list[str]:
        found = _object(self._call("GET", f"/connectors/{_path(name)}/topics",
                                   "list connector topics"))
        topics = _object(found.get(name)).get("topics")
        return [str(t) for t in topics] if isinstance(topics, list) else []

    def validate(self, connector_class: str, config: dict[str, str]) -> dict[str, Any]:
        return _object(self._call("PUT", f"/connector-plugins/{_path(connector_class)}/config/"
                                  "validate", "validate connector", json=config))

    def create(self, name: str, config: dict[str, str]) -> dict[str, Any]:
        return _object(self._call("POST", "/connectors", "create connector",
                                  json={"name": name, "config": config}, expect=(201, 200)))

    def delete(self, name: str) -> None:
        self._call("DELETE", f"/connectors/{_path(name)}", "drop connector", expect=(204, 200))

    def _call(self, method: str, path: str, what: str, json: Any = None,
              expect: tuple[int, ...] = (200,)) -> Any:
        """The JSON Connect answers ``method path`` with (None for an empty body)."""
        reads = method in ("GET", "PUT")
        for attempt in range(1, ATTEMPTS + 1):
            try:
                response = self._http.request(method, path, json=json)
            except httpx.HTTPError as error:
                if attempt == ATTEMPTS or not reads:
                    raise ConnectUnavailableError(
                        f"Failed to {what}: Kafka Connect at {self.url} did not answer "
                        f"({type(error).__name__}: {_reason(str(error))})") from error
            else:
                if response.status_code in expect:
                    return _json(response, what, self.url)
                again = response.status_code == 409 or (reads and response.status_code >= 500)
                if attempt == ATTEMPTS or not again:
                    reason = _reason(response.text)
                    raise ConnectError(f"Failed to {what}: {reason}", response.status_code,
                                       reason)
            time.sleep(RETRY_PAUSE_SECONDS * attempt)
        raise AssertionError("unreachable")


def _path(segment: str) -> str:
    return quote(segment, safe="")


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _reason(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS] + "..."


def _json(response: httpx.Response, what: str, url: str) -> Any:
    if not response.content:
        return None
    if len(response.content) > MAX_ANSWER_BYTES:
        raise ConnectUnavailableError(f"Failed to {what}: Kafka Connect at {url} answered "
                                      f"{len(response.content)} bytes, over {MAX_ANSWER_BYTES}")
    try:
        return response.json()
    except ValueError as error:
        raise ConnectUnavailableError(f"Failed to {what}: Kafka Connect at {url} answered "
                                      f"what is not JSON: {_reason(response.text)}") from error


__all__ = ["ConnectClient"]
