"""Users known by their TLS client certificate: on a node that asks for client certificates
(``ssl.client.authentication`` REQUIRED or REQUESTED) and has no ``--auth-file``, a request's user
is the principal of the certificate its connection showed, the role file and the Kafka ACL
validator check that user, and the command log records it as the statement's writer.

The principal is the certificate subject's distinguished name (RFC 4514 as Python's
``cryptography`` writes it: ``CN=alice,OU=eng``, which is Java's RFC 2253 form for the usual
attributes; an e-mail address is written ``1.2.840.113549.1.9.1=...`` where Java writes its
encoding in hex) mapped by Kafka's ``ssl.principal.mapping.rules``, taken as a ksqlDB property:
rules ``RULE:pattern/replacement/`` (``/L`` or ``/U`` to lower or upper its case; the pattern in
Python's regular expressions), tried in order, the first whose pattern matches the whole name
replacing every match as Java's ``replaceAll`` does (``$n`` a group, ``\\x`` the character x, a
``$n`` past the last group literal text); and ``DEFAULT``, the name as it is (the default). A
certificate no rule maps to a name is no user (401).

hypercorn hands an app no peer certificate: :func:`install` substitutes a subclass of its
connection handler that gives every request of a TLS connection ASGI's TLS extension
(``scope["extensions"]["tls"]``, ``client_cert_name``: the subject's name), so the user is the
connection's own, whatever other connection shares its address.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509

from metastore.core.exceptions import PropertyValueError

MAPPING_RULES = "ssl.principal.mapping.rules"
_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")



@dataclass(frozen=True)
class PrincipalRule:
    """One mapping rule; ``pattern`` None: DEFAULT. ``replacement``: literal text and group
    numbers, in order."""

    pattern: re.Pattern[str] | None
    replacement: tuple[str | int, ...] = ()
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        mapped = self.pattern.sub(self._replace, name)
        return mapped.lower() if self.case == "L" else mapped.upper() if self.case == "U" else mapped

    def _replace(self, found: re.Match[str]) -> str:
        return "".join(part if isinstance(part, str) else found.group(part) or ""
                       for part in self.replacement)


def parse_rules(text: str) -> tuple[PrincipalRule, ...]:
    """Kafka's ``ssl.principal.mapping.rules``; raises :class:`PropertyValueError`."""
    if not text.strip():
        raise PropertyValueError(MAPPING_RULES, "no rules: expected DEFAULT or "
                                 "RULE:pattern/replacement/[LU], comma-separated")
    rules: list[PrincipalRule] = []
    position = 0
    while position < len(text.strip()):
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
        rules.append(PrincipalRule(pattern, _java_replacement(found.group(3), pattern.groups),
                                   found.group(4)))
    return tuple(rules)


def _java_replacement(text: str, groups: int) -> tuple[str | int, ...]:
    """Java's replacement syntax: ``\\x`` is x; ``$n`` is group n, its digits taken while they
    name a group; a ``$n`` past the last group is literal text (Kafka escapes those)."""
    parts: list[str | int] = []
    literal = ""
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            literal += text[index + 1]
            index += 2
        elif char == "$" and index + 1 < len(text) and text[index + 1].isdigit() \
                and int(text[index + 1]) <= groups:
            number, index = int(text[index + 1]), index + 2
            while index < len(text) and text[index].isdigit() \
                    and number * 10 + int(text[index]) <= groups:
                number, index = number * 10 + int(text[index]), index + 1
            parts += [literal, number] if literal else [number]
            literal = ""
        else:
            literal += char
            index += 1
    return (*parts, literal) if literal else tuple(parts)


def subject_name(certificate_der: bytes | None) -> str | None:
    """A certificate's subject as RFC 4514 text; None without one, or for one that cannot be
    read."""
    if not certificate_der:
        return None
    try:
        return x509.load_der_x509_certificate(certificate_der).subject.rfc4514_string()
    except ValueError:
        return None


class CertificateUsers:
    """The user of a request, from its connection's certificate and the mapping rules."""

    def __init__(self, rules: tuple[PrincipalRule, ...]) -> None:
        self._rules = rules

    def principal(self, name: str) -> str | None:
        for rule in self._rules:
            mapped = rule.apply(name)
            if mapped is not None:
                return mapped or None
        return None

    def user(self, scope: Mapping[str, Any]) -> str | None:
        """The user of a request's scope; None without a certificate no rule maps."""
        tls = (scope.get("extensions") or {}).get("tls") or {}
        name = tls.get("client_cert_name")
        return self.principal(name) if isinstance(name, str) else None


class _WithTls:
    """hypercorn's app wrapper, handing each scope of one connection its TLS extension."""

    def __init__(self, app: Any, tls: dict[str, Any]) -> None:
        self._app = app
        self._tls = tls

    async def __call__(self, scope: Any, receive: Any, send: Any, sync_spawn: Any,
                       call_soon: Any) -> None:
        extended = {**scope, "extensions": {**(scope.get("extensions") or {}),
                                            "tls": self._tls}}
        await self._app(extended, receive, send, sync_spawn, call_soon)


def install() -> None:
    """Have hypercorn's TLS connections give their requests ASGI's TLS extension."""
    from hypercorn.asyncio import run as hypercorn_run
    from hypercorn.asyncio.tcp_server import TCPServer

    class TlsExtensionServer(TCPServer):
        async def run(self) -> None:
            tls = self.writer.get_extra_info("ssl_object")
            certificate = tls.getpeercert(binary_form=True) if tls is not None else None
            self.app = _WithTls(self.app, {
                "client_cert_name": subject_name(certificate), "client_cert_chain": [],
                "client_cert_error": None, "server_cert": None,
                "tls_version": None, "cipher_suite": None})
            await super().run()

    setattr(hypercorn_run, "TCPServer", TlsExtensionServer)  # noqa: B010 - its module global


__all__ = ["MAPPING_RULES", "CertificateUsers", "PrincipalRule", "install", "parse_rules",
           "subject_name"]
