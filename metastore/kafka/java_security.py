"""A node's Kafka security settings, written for librdkafka, as Kafka's Java clients take them.

A node's settings are librdkafka's (``security.protocol``, ``sasl.mechanism``,
``sasl.username``, ``ssl.ca.location``, ...): its own clients are librdkafka's. Spark's Kafka
source and sink, and the producers in Spark's JVM, are Kafka's Java clients, which name the same
things differently or take them in another shape: SASL credentials as a JAAS login module,
certificates as a key store and a trust store. :func:`java_security` writes them so:

- ``sasl.mechanism`` (or ``sasl.mechanisms``) PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with
  ``sasl.username`` and ``sasl.password``: ``sasl.jaas.config`` with Kafka's PLAIN or SCRAM login
  module;
- ``ssl.ca.location`` (PEM): a PEM trust store at that path;
- ``ssl.certificate.location`` and ``ssl.key.location`` (PEM, ``ssl.key.password`` if the key
  is encrypted): a PEM key store holding that chain and key (read when the node starts);
- ``ssl.endpoint.identification.algorithm`` ``none``: Java's empty value.

Settings with the same name in both pass through as they are. A SASL mechanism that needs more
than a user and a password (GSSAPI, OAUTHBEARER) is refused with the reason, as is a certificate
file that cannot be read: a node never starts Spark on settings its Java clients would read
otherwise. The values carry secrets: Spark redacts them in plans (:mod:`metastore.spark.session`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from metastore.kafka.exceptions import KafkaClientError

LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
TRANSLATED = frozenset({"sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location",
                        "ssl.certificate.location", "ssl.key.location"})
"""librdkafka's names that the Java clients do not know: written as other settings."""
SECRET_OPTIONS = r"(?i)url|password|sasl\.jaas\.config|ssl\.keystore\.key|secret|token"
"""The Spark option names whose values Spark's plans and UI show redacted."""


def java_security(client: Mapping[str, str]) -> dict[str, str]:
    """The Java client settings of the librdkafka settings ``client``: those it names the same,
    then the translations of those it does not."""
    settings = {name: str(value) for name, value in client.items() if name not in TRANSLATED}
    mechanism = str(client.get("sasl.mechanism", client.get("sasl.mechanisms", ""))).upper()
    if mechanism:
        settings["sasl.mechanism"] = mechanism
    if "sasl.username" in client or "sasl.password" in client:
        settings["sasl.jaas.config"] = _jaas(mechanism or "GSSAPI", client)
    if "ssl.ca.location" in client:
        settings |= {"ssl.truststore.type": "PEM",
                     "ssl.truststore.location": str(client["ssl.ca.location"])}
    if "ssl.certificate.location" in client or "ssl.key.location" in client:
        settings |= _key_store(client)
    if str(client.get("ssl.endpoint.identification.algorithm", "")).lower() == "none":
        settings["ssl.endpoint.identification.algorithm"] = ""
    return settings


def _jaas(mechanism: str, client: Mapping[str, str]) -> str:
    module = LOGIN_MODULES.get(mechanism)
    if module is None:
        raise KafkaClientError(
            f"SASL mechanism {mechanism} with sasl.username cannot be given to Spark's Kafka "
            f"clients: the node translates {', '.join(LOGIN_MODULES)} only")
    username, password = client.get("sasl.username"), client.get("sasl.password")
    if username is None or password is None:
        raise KafkaClientError(f"SASL mechanism {mechanism} needs both sasl.username and "
                               "sasl.password")
    return (f'{module} required username="{_quoted(str(username))}" '
            f'password="{_quoted(str(password))}";')


def _quoted(value: str) -> str:
    """``value`` inside a JAAS quoted string."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _key_store(client: Mapping[str, str]) -> dict[str, str]:
    """A PEM key store of the client certificate chain and its key, by value."""
    certificate, key = client.get("ssl.certificate.location"), client.get("ssl.key.location")
    if certificate is None or key is None:
        raise KafkaClientError("a client certificate needs both ssl.certificate.location and "
                               "ssl.key.location")
    store = {"ssl.keystore.type": "PEM",
             "ssl.keystore.certificate.chain": _pem(str(certificate), "ssl.certificate.location"),
             "ssl.keystore.key": _pem(str(key), "ssl.key.location")}
    return store


def _pem(path: str, setting: str) -> str:
    try:
        return Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as error:
        raise KafkaClientError(f"{setting} {path} cannot be read as a PEM file: {error}") \
            from error


__all__ = ["LOGIN_MODULES", "SECRET_OPTIONS", "TRANSLATED", "java_security"]
