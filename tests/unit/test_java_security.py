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


def test_pem_files_are_a_trust_store_and_a_key_store(tmp_path: Path) -> None:
    chain, key = tmp_path / "client.pem", tmp_path / "client.key"
    chain.write_text("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nBB==\n-----END PRIVATE KEY-----\n")
    settings = java_security({
        "security.protocol": "SSL", "ssl.ca.location": "/etc/ca.pem",
        "ssl.certificate.location": str(chain), "ssl.key.location": str(key),
        "ssl.key.password": "k", "ssl.endpoint.identification.algorithm": "none"})
    assert settings == {
        "security.protocol": "SSL", "ssl.key.password": "k",
        "ssl.endpoint.identification.algorithm": "",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/etc/ca.pem",
        "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": chain.read_text(),
        "ssl.keystore.key": key.read_text()}


@pytest.mark.parametrize(("client", "reason"), [
    ({"sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.password": "p"},
     "SASL mechanism GSSAPI with sasl.username cannot be given to Spark's Kafka clients"),
    ({"sasl.mechanism": "PLAIN", "sasl.username": "u"}, "needs both sasl.username and "
                                                         "sasl.password"),
    ({"ssl.certificate.location": "/x.pem"}, "needs both ssl.certificate.location and "
                                              "ssl.key.location"),
    ({"ssl.certificate.location": "/nowhere.pem", "ssl.key.location": "/nowhere.key"},
     "ssl.certificate.location /nowhere.pem cannot be read as a PEM file"),
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
