"""TLS on the REST listener, from ksqlDB's ``ssl.*`` server properties.

A node serves HTTPS when ``ssl.keystore.location`` is set (``--ksql-property`` or the config
file's ``[ksql_properties]``, as ksqlDB's server reads them):

- ``ssl.keystore.location``, ``ssl.keystore.type`` (``PKCS12``, ksqlDB's other default JKS
  refused with how to convert it; or ``PEM``: the certificate chain and its key in one file),
  ``ssl.keystore.password`` (PKCS12), ``ssl.key.password`` (an encrypted PEM key);
- ``ssl.truststore.location``, ``ssl.truststore.type`` (``PKCS12`` or ``PEM``),
  ``ssl.truststore.password``: the CAs client certificates must chain to;
- ``ssl.client.authentication``: ``NONE`` (default), ``REQUESTED`` (a certificate, if sent, must
  verify) or ``REQUIRED`` (mutual TLS: a client without a verified certificate is refused in the
  handshake); either needs the trust store;
- ``ssl.keystore.reload`` (``true``): the node watches the key store's file and serves the new
  certificate to new connections once it changes, without a restart.

The listener offers HTTP/2 and HTTP/1.1 by ALPN, TLS 1.2 and later. Nodes forwarding to each
other and the CLI trust the same CAs (:func:`client_verify`).
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from metastore.core.exceptions import PropertyValueError

log = logging.getLogger(__name__)

PREFIX = "ssl."
CLIENT_AUTHENTICATION = {"NONE": ssl.CERT_NONE, "REQUESTED": ssl.CERT_OPTIONAL,
                         "REQUIRED": ssl.CERT_REQUIRED}
STORE_TYPES = ("PKCS12", "PEM")
ALPN = ["h2", "http/1.1"]
RELOAD_CHECK_SECONDS = 2.0
"""How often a reloading listener looks at its key store's file."""


class TlsSettingError(PropertyValueError):
    """An ``ssl.*`` property the listener cannot serve with."""

    code = "bad_tls_setting"


@dataclass(frozen=True)
class Store:
    """A key or trust store file, of ``kind`` (``PKCS12`` or ``PEM``)."""

    path: Path
    kind: str
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class TlsSettings:
    keystore: Store
    key_password: str | None = field(default=None, repr=False)
    truststore: Store | None = None
    client_authentication: str = "NONE"
    reload: bool = False

    @classmethod
    def of(cls, properties: Mapping[str, str]) -> TlsSettings | None:
        """The listener's TLS of ksqlDB's ``ssl.*`` ``properties``; None when it has no key
        store (plain HTTP). Raises :class:`TlsSettingError` naming the property at fault."""
        location = properties.get("ssl.keystore.location")
        if not location:
            others = sorted(name for name in properties if name.startswith(PREFIX))
            if others:
                raise TlsSettingError("ssl.keystore.location", f"{', '.join(others)} set, but "
                                      "no key store: the listener would serve plain HTTP")
            return None
        keystore = _store(properties, "keystore", location)
        trust = properties.get("ssl.truststore.location")
        truststore = _store(properties, "truststore", trust) if trust else None
        authentication = properties.get("ssl.client.authentication", "NONE").upper()
        if authentication not in CLIENT_AUTHENTICATION:
            raise TlsSettingError("ssl.client.authentication",
                                  f"expected one of {', '.join(CLIENT_AUTHENTICATION)}")
        if authentication != "NONE" and truststore is None:
            raise TlsSettingError("ssl.client.authentication", f"{authentication} needs "
                                  "ssl.truststore.location, the CAs client certificates chain to")
        settings = cls(keystore, properties.get("ssl.key.password"), truststore, authentication,
                       properties.get("ssl.keystore.reload", "false").lower() == "true")
        server_context(settings)  # refuse at start what cannot be served
        return settings


def _store(properties: Mapping[str, str], which: str, location: str) -> Store:
    kind = properties.get(f"ssl.{which}.type", "PKCS12").upper()
    if kind == "JKS":
        raise TlsSettingError(f"ssl.{which}.type", "JKS is not read here; convert it with "
                              f"`keytool -importkeystore -srckeystore {location} "
                              "-deststoretype PKCS12 -destkeystore <file>.p12`")
    if kind not in STORE_TYPES:
        raise TlsSettingError(f"ssl.{which}.type", f"expected one of {', '.join(STORE_TYPES)}")
    path = Path(location)
    if not path.is_file():
        raise TlsSettingError(f"ssl.{which}.location", f"{location} is not a readable file")
    return Store(path, kind, properties.get(f"ssl.{which}.password"))


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The listener's context: its certificate, the client CAs, ALPN h2 and http/1.1."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION
    context.set_alpn_protocols(ALPN)
    load_certificate(context, settings)
    if settings.truststore is not None:
        _trust(context, settings.truststore)
    context.verify_mode = CLIENT_AUTHENTICATION[settings.client_authentication]
    return context


def _trust(context: ssl.SSLContext, store: Store) -> None:
    try:
        context.load_verify_locations(cadata=_trusted(store))
    except ssl.SSLError as error:
        raise TlsSettingError("ssl.truststore.location", f"{store.path} holds no usable CA "
                              f"certificate: {error}") from error


def load_certificate(context: ssl.SSLContext, settings: TlsSettings) -> None:
    """Load the key store's chain and key into ``context`` (again, when it changed): read once,
    and loaded into a scratch context first, so that ``context`` keeps its certificate and key
    unless the new ones load whole."""
    store = settings.keystore
    try:
        if store.kind == "PEM":
            pem, password = store.path.read_bytes(), settings.key_password
        else:
            chain, key = _pkcs12(store)
            pem, password = key + chain, None
        with tempfile.TemporaryDirectory(prefix="metastore-tls-") as directory:
            path = Path(directory) / "chain.pem"  # the ssl module loads a chain from a file
            path.touch(mode=0o600)
            path.write_bytes(pem)
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(path, password=password)
            context.load_cert_chain(path, password=password)
    except (ssl.SSLError, OSError, ValueError) as error:
        raise TlsSettingError("ssl.keystore.location", f"{store.path} holds no usable "
                              f"certificate and key: {error}") from error


def _pkcs12(store: Store) -> tuple[bytes, bytes]:
    """The PEM chain and unencrypted PEM key of a PKCS12 key store."""
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )

    password = store.password.encode() if store.password is not None else None
    key, certificate, extra = pkcs12.load_key_and_certificates(store.path.read_bytes(),
                                                               password)
    if key is None or certificate is None:
        raise ValueError("the PKCS12 file has no private key with its certificate")
    chain = b"".join(c.public_bytes(Encoding.PEM) for c in [certificate, *extra])
    return chain, key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())


def _trusted(store: Store) -> str:
    """The CA certificates of a trust store, as PEM text."""
    try:
        if store.kind == "PEM":
            return store.path.read_text(encoding="ascii")
        from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

        password = store.password.encode() if store.password is not None else None
        loaded = pkcs12.load_pkcs12(store.path.read_bytes(), password)
        certificates = [c.certificate for c in loaded.additional_certs]
        certificates += [loaded.cert.certificate] if loaded.cert is not None else []
        if not certificates:
            raise ValueError("it holds no certificate")
        return "".join(c.public_bytes(Encoding.PEM).decode() for c in certificates)
    except (OSError, ValueError, UnicodeDecodeError) as error:
        raise TlsSettingError("ssl.truststore.location", f"{store.path} cannot be read: "
                              f"{error}") from error


class CertificateWatch:
    """Loads the key store again into the listener's context once its file changes (checked
    every :data:`RELOAD_CHECK_SECONDS` on the listener's event loop, where handshakes run)."""

    def __init__(self, context: ssl.SSLContext, settings: TlsSettings,
                 renewed: Callable[[], None] | None = None) -> None:
        """``renewed``: called once the listener serves a new certificate (the node's own
        clients then show it too)."""
        self._context = context
        self._settings = settings
        self._renewed = renewed
        self._seen = self._stamp()

    def _stamp(self) -> tuple[int, int] | None:
        try:
            stat = os.stat(self._settings.keystore.path)
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def check(self) -> bool:
        """Reload if the file changed since last seen; whether it did. A file that cannot be
        loaded leaves the current certificate in place (logged) and is tried again."""
        stamp = self._stamp()
        if stamp is None or stamp == self._seen:
            return False
        try:
            load_certificate(self._context, self._settings)
        except TlsSettingError as error:
            log.warning("the changed key store was not loaded, the listener keeps its "
                        "certificate: %s", error)
            return False
        self._seen = stamp
        log.info("the listener serves the certificate of the changed key store %s",
                 self._settings.keystore.path)
        if self._renewed is not None:
            self._renewed()
        return True


def client_verify(settings: TlsSettings | None) -> ssl.SSLContext | bool:
    """What a node's own HTTPS client (forwarding to another node) verifies with: the trust
    store's CAs when there is one, else the system's; presenting the node's own certificate,
    for listeners that require one."""
    if settings is None:
        return True
    context = ssl.create_default_context()
    if settings.truststore is not None:
        _trust(context, settings.truststore)
    load_certificate(context, settings)
    return context


__all__ = ["CertificateWatch", "TlsSettingError", "TlsSettings", "client_verify",
           "server_context"]
