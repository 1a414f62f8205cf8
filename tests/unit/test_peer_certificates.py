"""A client certificate's principal, by Kafka's ssl.principal.mapping.rules
(:mod:`metastore.server.peer_certificates`)."""

from __future__ import annotations

import re

import pytest
from cryptography.hazmat.primitives.serialization import Encoding

from metastore.core.exceptions import PropertyValueError
from metastore.server.peer_certificates import CertificateUsers, parse_rules, subject_name
from tests.support.certificates import authority, issue


def der(common_name: str) -> bytes:
    return issue(authority("CA"), common_name, server=False).certificate.public_bytes(
        Encoding.DER)


@pytest.mark.parametrize(("rules", "name", "principal"), [
    ("DEFAULT", "Alice", "CN=Alice"),
    ("RULE:^CN=([^,]+)$/$1/", "Alice", "Alice"),
    ("RULE:^CN=([^,]+)$/$1/L", "Alice", "alice"),
    ("RULE:^CN=([^,]+)$/$1/U", "Alice", "ALICE"),
    ("RULE:^CN=svc-(.*)$/$1/,DEFAULT", "Alice", "CN=Alice"),
    ("RULE:^CN=svc-(.*)$/$1/", "Alice", None),
    ("RULE:^CN=(.*)$/user\\/$1/", "bob", "user/bob"),
    ("RULE:^CN=(.*)$/$2$1/", "bob", "$2bob"),  # past the last group: literal, as Kafka
    ("RULE:^CN=(.*)$/$12/", "bob", "bob2"),  # digits taken while they name a group, as Java
    ("RULE:^CN=(.*)$/\\$1\\b/", "bob", "$1b"),  # a backslash makes the next character literal
    ("RULE:(.*)/$1@x/", "bob", "CN=bob@x@x"),  # every match replaced, as Java's replaceAll
    ("RULE:^CN=(.*)$//", "bob", None),  # mapped to nothing: no user
])
def test_the_first_rule_that_matches_the_whole_subject_maps_it(
        rules: str, name: str, principal: str | None) -> None:
    subject = subject_name(der(name))
    assert subject is not None
    assert CertificateUsers(parse_rules(rules)).principal(subject) == principal


@pytest.mark.parametrize("rules", ["RULE:x", "RULE:(/$1/", "NOPE", "RULE:a/b", "", "  "])
def test_a_rule_it_cannot_read_is_refused_by_name(rules: str) -> None:
    with pytest.raises(PropertyValueError, match=re.escape("ssl.principal.mapping.rules")):
        parse_rules(rules)


def test_a_request_is_the_user_of_its_own_connections_certificate() -> None:
    users = CertificateUsers(parse_rules("RULE:^CN=(.*)$/$1/"))
    scope = {"extensions": {"tls": {"client_cert_name": "CN=carol"}}}
    assert users.user(scope) == "carol"
    assert users.user({"extensions": {"tls": {"client_cert_name": None}}}) is None
    assert users.user({}) is None, "no TLS extension: no certificate, no user"
    assert subject_name(None) is None and subject_name(b"not a certificate") is None
