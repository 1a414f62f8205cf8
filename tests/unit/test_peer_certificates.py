"""A client certificate's principal, by Kafka's ssl.principal.mapping.rules
(:mod:`metastore.server.peer_certificates`)."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.serialization import Encoding

from metastore.core.exceptions import PropertyValueError
from metastore.server.peer_certificates import PeerCertificates, parse_rules, principal_of
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
])
def test_the_first_rule_that_matches_the_whole_subject_maps_it(
        rules: str, name: str, principal: str | None) -> None:
    assert principal_of(der(name), parse_rules(rules)) == principal


@pytest.mark.parametrize("rules", ["RULE:x", "RULE:(/$1/", "NOPE", "RULE:a/b"])
def test_a_rule_it_cannot_read_is_refused_by_name(rules: str) -> None:
    with pytest.raises(PropertyValueError, match=r"ssl\.principal\.mapping\.rules"):
        parse_rules(rules)


def test_a_connection_is_its_certificates_user_until_it_closes() -> None:
    registry = PeerCertificates(parse_rules("RULE:^CN=(.*)$/$1/"))
    registry.opened(("127.0.0.1", 5000), der("carol"))
    registry.opened(("127.0.0.1", 5001), None)
    assert registry.user(("127.0.0.1", 5000)) == "carol"
    assert registry.user(("127.0.0.1", 5001)) is None and registry.user(None) is None
    registry.closed(("127.0.0.1", 5000))
    assert registry.user(("127.0.0.1", 5000)) is None
