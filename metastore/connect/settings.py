"""Where a node finds Kafka Connect, as ksqlDB's ``ksql.connect.*`` properties say.

``ksql.connect.url`` (``--connect-url`` wins; ksqlDB's default ``http://localhost:8083``),
``ksql.connect.request.timeout.ms`` (30,000: ksqlDB's 5,000 is less than a connector that checks
its database, as Debezium's does, may take to validate on a loaded machine), and basic auth from a file
(``ksql.connect.basic.auth.credentials.source=FILE`` with ``ksql.connect.basic.auth.credentials
.file``, a properties file of ``username`` and ``password``). The credentials are read once, at
start, and never shown: a setting's error names the file, not what it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from metastore.core.exceptions import MetastoreError
from metastore.core.java_properties import PropertiesFormatError, parse_properties

URL = "ksql.connect.url"
TIMEOUT = "ksql.connect.request.timeout.ms"
CREDENTIALS_SOURCE = "ksql.connect.basic.auth.credentials.source"
CREDENTIALS_FILE = "ksql.connect.basic.auth.credentials.file"
PREFIX = "ksql.connect."
"""ksqlDB's Connect settings: those not read here (``...credentials.reload``, ``ssl.*``, the
embedded worker's) are accepted and have no effect."""
DEFAULT_URL = "http://localhost:8083"


class ConnectSettingsError(MetastoreError):
    """A ``ksql.connect.*`` setting a node cannot start with."""

    code = "connect_settings"


@dataclass(frozen=True)
class ConnectSettings:
    url: str = DEFAULT_URL
    timeout_seconds: float = 30.0
    credentials: tuple[str, str] | None = field(default=None, repr=False)
    """(username, password) of basic auth; None: none sent."""


def connect_settings(url: str | None, properties: Mapping[str, str]) -> ConnectSettings:
    """The settings from ``--connect-url`` (``url``) and the ``ksql.connect.*`` properties."""
    chosen = (url or properties.get(URL) or DEFAULT_URL).rstrip("/")
    parts = urlsplit(chosen)
    if "@" in parts.netloc or (parts.scheme not in ("http", "https") and "@" in chosen):
        raise ConnectSettingsError(f"{URL} must be a URL without credentials (give them in "
                                   f"{CREDENTIALS_FILE})")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConnectSettingsError(f"{URL} must be an http:// or https:// URL; got {chosen!r}")
    try:
        timeout = int(properties.get(TIMEOUT, "30000")) / 1000
    except ValueError as error:
        raise ConnectSettingsError(f"{TIMEOUT} must be a number of milliseconds") from error
    if timeout <= 0:
        raise ConnectSettingsError(f"{TIMEOUT} must be positive")
    return ConnectSettings(chosen, timeout, _credentials(properties))


def _credentials(properties: Mapping[str, str]) -> tuple[str, str] | None:
    source = properties.get(CREDENTIALS_SOURCE, "NONE").upper()
    if source == "NONE":
        return None
    if source != "FILE":
        raise ConnectSettingsError(f"{CREDENTIALS_SOURCE} must be NONE or FILE; got {source!r}")
    path = properties.get(CREDENTIALS_FILE, "")
    if not path:
        raise ConnectSettingsError(f"'{CREDENTIALS_FILE}' cannot be empty if "
                                   f"'{CREDENTIALS_SOURCE}' is set to 'FILE'")
    try:
        values = parse_properties(Path(path).read_text(encoding="latin-1"))
    except (OSError, PropertiesFormatError) as error:
        raise ConnectSettingsError(f"cannot read {CREDENTIALS_FILE} {path}: "
                                   f"{type(error).__name__}") from error
    if not values.get("username") or "password" not in values:
        raise ConnectSettingsError(f"{CREDENTIALS_FILE} {path} must give username and password")
    return values["username"], values["password"]


__all__ = ["PREFIX", "ConnectSettings", "ConnectSettingsError", "connect_settings"]
