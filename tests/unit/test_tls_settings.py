"""ksqlDB's ssl.* properties become the REST listener's TLS, and each one it cannot serve with is
refused at start, naming the property."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from metastore.server.settings import SettingsError, server_settings
from metastore.server.tls import TlsSettingError, TlsSettings, server_context
from tests.support.certificates import authority, ca_pem, issue


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    ca = authority("test CA")
    node = issue(ca, "node", server=True)
    certificate, key = node.pem(tmp_path, "node")
    combined = tmp_path / "combined.pem"
    combined.write_bytes(key.read_bytes() + certificate.read_bytes())
    return {"p12": str(node.pkcs12(tmp_path / "node.p12", "secret", ca)),
            "pem": str(combined), "ca": str(ca_pem(ca, tmp_path / "ca.pem"))}


def test_no_ssl_property_is_plain_http_and_one_without_a_key_store_is_refused() -> None:
    assert TlsSettings.of({"ksql.streams.num.stream.threads": "2"}) is None
    with pytest.raises(TlsSettingError, match=re.escape(
            "ssl.client.authentication, ssl.truststore.location set, but no key store")):
        TlsSettings.of({"ssl.client.authentication": "REQUIRED",
                        "ssl.truststore.location": "/ca.pem"})


def test_a_pkcs12_or_pem_key_store_serves_http2_and_http1_with_the_client_authentication_asked(
        files: dict[str, str]) -> None:
    settings = TlsSettings.of({
        "ssl.keystore.location": files["p12"], "ssl.keystore.password": "secret",
        "ssl.truststore.location": files["ca"], "ssl.truststore.type": "PEM",
        "ssl.client.authentication": "required", "ssl.keystore.reload": "true"})
    assert settings is not None
    assert (settings.keystore.kind, settings.client_authentication, settings.reload) == (
        "PKCS12", "REQUIRED", True)
    assert server_context(settings).verify_mode.name == "CERT_REQUIRED"
    pem = TlsSettings.of({"ssl.keystore.location": files["pem"], "ssl.keystore.type": "PEM"})
    assert pem is not None and server_context(pem).verify_mode.name == "CERT_NONE"


@pytest.mark.parametrize(("properties", "reason"), [
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type: JKS is not read here; convert it with "
                                   "`keytool -importkeystore"),
    ({"ssl.keystore.password": "wrong"}, "ssl.keystore.location: .* holds no usable "
                                         "certificate and key"),
    ({"ssl.client.authentication": "REQUIRED"}, "REQUIRED needs ssl.truststore.location"),
    ({"ssl.client.authentication": "SOMETIMES"}, "expected one of NONE, REQUESTED, REQUIRED"),
    ({"ssl.truststore.location": "/nowhere.pem"}, "ssl.truststore.location: /nowhere.pem is "
                                                  "not a readable file"),
    ({"ssl.truststore.location": "EMPTY", "ssl.truststore.type": "PEM"},
     "ssl.truststore.location: .* holds no usable CA certificate"),
])
def test_what_cannot_be_served_is_refused_naming_the_property(
        files: dict[str, str], properties: dict[str, str], reason: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty.pem"
    empty.write_text("no certificate here\n")
    given = {name: str(empty) if value == "EMPTY" else value for name, value in properties.items()}
    with pytest.raises(TlsSettingError, match=reason):
        TlsSettings.of({"ssl.keystore.location": files["p12"],
                        "ssl.keystore.password": "secret", **given})


def test_client_certificates_name_the_users_only_without_an_auth_file(
        files: dict[str, str], tmp_path: Path) -> None:
    mutual = {"ssl.keystore.location": files["p12"], "ssl.keystore.password": "secret",
              "ssl.truststore.location": files["ca"], "ssl.truststore.type": "PEM",
              "ssl.client.authentication": "REQUIRED"}
    roles = tmp_path / "roles.toml"
    roles.write_text('[users.alice]\nread = ["*"]\n')
    base = {"bootstrap_servers": "kafka:9092", "roles_file": str(roles)}
    known = server_settings({**base, "ksql_properties": mutual})
    assert known.certificate_users is not None and known.node.roles is not None
    users = tmp_path / "users"
    users.write_text("alice:a\n")
    assert server_settings({**base, "auth_file": str(users),
                            "ksql_properties": mutual}).certificate_users is None
    with pytest.raises(SettingsError, match=r"needs ssl\.client\.authentication"):
        server_settings({"bootstrap_servers": "kafka:9092", "ksql_properties": {
            **mutual, "ssl.client.authentication": "NONE",
            "ssl.principal.mapping.rules": "DEFAULT"}})
    with pytest.raises(SettingsError, match="--auth-file or client certificates"):
        server_settings({**base, "ksql_properties": {
            **mutual, "ssl.client.authentication": "NONE"}})
