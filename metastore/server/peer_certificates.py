"""Users known by their TLS client certificate: on a node that asks for client certificates
(``ssl.client.authentication`` REQUIRED or REQUESTED) and has no ``--auth-file``, a request's user
is the principal of the certificate its connection showed, the role file and the Kafka ACL
validator check that user, and the command log records it as the statement's writer.

The principal is the certificate subject's distinguished name (RFC 2253: ``CN=alice,OU=eng``)
mapped by Kafka's ``ssl.principal.mapping.rules``, which this node takes as a ksqlDB property:
rules ``RULE:pattern/replacement/`` (``/L`` or ``/U`` to lower or upper its case), tried in order,
the first whose pattern matches the whole name giving the principal, and ``DEFAULT``, the name as
it is (the default). A certificate no rule matches is no user (401).

hypercorn hands an app no peer certificate, so the node records each TLS connection's
certificate when hypercorn's connection handler starts (:func:`install`, a subclass of its
``TCPServer``), by the client address the request's scope carries, and forgets it when the
connection ends.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from cryptography import x509

from metastore.core.exceptions import PropertyValueError

MAPPING_RULES = "ssl.principal.mapping.rules"
_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")

Peer = tuple[str, int]


@dataclass(frozen=True)
class PrincipalRule:
    """One mapping rule; ``pattern`` None: DEFAULT."""

    pattern: re.Pattern[str] | None
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        mapped = self.pattern.sub(self.replacement, name, count=1)
        return mapped.lower() if self.case == "L" else mapped.upper() if self.case == "U" else mapped


def parse_rules(text: str) -> tuple[PrincipalRule, ...]:
    """Kafka's ``ssl.principal.mapping.rules``; raises :class:`PropertyValueError`."""
    rules: list[PrincipalRule] = []
    position = 0
    while position < len(text.strip()) or not rules:
        found = _RULE.match(text, position)
        if found is None or found.end() == position:
            raise PropertyValueError(MAPPING_RULES, f"expected DEFAULT or "
                                     f"RULE:pattern/replacement/[LU], at {text[position:]!r}")
        position = found.end()
        if found.group(1):
            rules.append(PrincipalRule(None))
            continue
        try:
            pattern = re.compile(found.group(2).replace("\\/", "/"))
        except re.error as error:
            raise PropertyValueError(MAPPING_RULES, f"bad pattern: {error}") from error
        replacement = re.sub(r"\$(\d)", r"\\\1", found.group(3).replace("\\/", "/"))
        rules.append(PrincipalRule(pattern, replacement, found.group(4)))
    return tuple(rules)


def principal_of(certificate_der: bytes, rules: tuple[PrincipalRule, ...]) -> str | None:
    """The principal of a certificate, or None when no rule maps its subject."""
    name = x509.load_der_x509_certificate(certificate_der).subject.rfc4514_string()
    for rule in rules:
        mapped = rule.apply(name)
        if mapped:
            return mapped
    return None


class PeerCertificates:
    """The principals of the open TLS connections, by the client's address."""

    def __init__(self, rules: tuple[PrincipalRule, ...]) -> None:
        self._rules = rules
        self._lock = threading.Lock()
        self._by_peer: dict[Peer, str | None] = {}

    def opened(self, peer: Peer, certificate_der: bytes | None) -> None:
        user = principal_of(certificate_der, self._rules) if certificate_der else None
        with self._lock:
            self._by_peer[peer] = user

    def closed(self, peer: Peer) -> None:
        with self._lock:
            self._by_peer.pop(peer, None)

    def user(self, client: Any) -> str | None:
        """The principal of the connection ``client`` (a scope's ``(host, port)``), if any."""
        if not client:
            return None
        with self._lock:
            return self._by_peer.get((str(client[0]), int(client[1])))


def install(registry: PeerCertificates) -> None:
    """Have hypercorn's connections report their peer certificate to ``registry``."""
    from hypercorn.asyncio import run as hypercorn_run
    from hypercorn.asyncio.tcp_server import TCPServer

    class CertificateRecordingServer(TCPServer):
        async def run(self) -> None:
            address = self.writer.get_extra_info("peername")
            tls = self.writer.get_extra_info("ssl_object")
            peer = (str(address[0]), int(address[1])) if address else None
            if peer is not None:
                registry.opened(peer, tls.getpeercert(binary_form=True) if tls else None)
            try:
                await super().run()
            finally:
                if peer is not None:
                    registry.closed(peer)

    setattr(hypercorn_run, "TCPServer", CertificateRecordingServer)  # noqa: B010 - its module global


__all__ = ["MAPPING_RULES", "PeerCertificates", "PrincipalRule", "install", "parse_rules",
           "principal_of"]
