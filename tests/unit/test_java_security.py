"""A node's librdkafka security settings become the Java client settings Spark's Kafka source and
sink take: SASL users as a JAAS login module, PEM certificates as PEM stores; what cannot be
translated is refused with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from metastore.kafka.exceptions import KafkaClientError
from metastore.kafka.java_security import java_security
from metastore.kafka.settings import KafkaSettings
from metastore.spark.views import spark_kafka_options
from tests.support.certificates import authority, ca_pem, issue, rsa_key


def test_a_sasl_user_is_a_jaas_login_of_its_mechanism() -> None:
    plain = java_security({"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
                           "sasl.username": "node", "sasl.password": 'p"a\\ss'})
    assert plain == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="node" password="p\\"a\\\\ss";'}
    scram = java_security({"sasl.mechanism": "scram-sha-512", "sasl.username": "u",
                           "sasl.password": "p"})
    assert scram["sasl.mechanism"] == "SCRAM-SHA-512"
    assert scram["sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.scram.ScramLoginModule required ")


def test_pem_files_are_a_trust_store_and_a_key_store_of_a_pkcs8_key(tmp_path: Path) -> None:
    ca = authority("CA")
    chain, key = issue(ca, "node", server=False).pem(tmp_path, "client")
    ca_file = ca_pem(ca, tmp_path / "ca.pem")
    rsa = rsa_key(tmp_path / "rsa.key", "k")  # PKCS#1, encrypted: Java's PEM store reads neither
    settings = java_security({
        "security.protocol": "SSL", "ssl.ca.location": str(ca_file),
        "ssl.certificate.location": str(chain), "ssl.key.location": str(rsa),
        "ssl.key.password": "k", "ssl.endpoint.identification.algorithm": "none"})
    written = settings.pop("ssl.keystore.key")
    assert settings == {
        "security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_file),
        "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": chain.read_text()}
    assert written.startswith("-----BEGIN PRIVATE KEY-----")
    inline = java_security({"ssl.ca.pem": ca_file.read_text(),
                            "ssl.certificate.pem": chain.read_text(),
                            "ssl.key.pem": key.read_text()})
    assert inline["ssl.truststore.certificates"] == ca_file.read_text()
    assert inline["ssl.keystore.key"] == key.read_text()  # PKCS#8 already


@pytest.mark.parametrize(("client", "reason"), [
    ({"sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.password": "p"},
     "SASL mechanism GSSAPI with sasl.username cannot be given to Spark's Kafka clients"),
    ({"sasl.mechanism": "PLAIN", "sasl.username": "u"}, "needs both sasl.username and "
                                                         "sasl.password"),
    ({"ssl.certificate.pem": "x"}, "needs both ssl.certificate.location"),
    ({"ssl.certificate.location": "/nowhere.pem", "ssl.key.location": "/nowhere.key"},
     "ssl.certificate.location /nowhere.pem cannot be read as a PEM file"),
    ({"ssl.certificate.pem": "x", "ssl.key.pem": "not a key"}, "the client key cannot be read"),
    ({"ssl.ca.location": "/etc"}, "not a directory or the system's store"),
    ({"enable.ssl.certificate.verification": "false"}, "always verify the broker's certificate"),
])
def test_what_cannot_be_translated_is_refused_with_the_reason(client: dict[str, str],
                                                              reason: str) -> None:
    with pytest.raises(KafkaClientError, match=reason):
        java_security(client)


def test_spark_options_carry_the_translation_and_the_rest_as_it_was() -> None:
    options = spark_kafka_options(KafkaSettings("k:9092", {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u",
        "sasl.password": "p", "fetch.wait.max.ms": "10"}))
    assert options == {
        "kafka.bootstrap.servers": "k:9092", "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN", "kafka.fetch.max.wait.ms": "10",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                                  'required username="u" password="p";'}
