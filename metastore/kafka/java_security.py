"""A node's Kafka security settings, written for librdkafka, as Kafka's Java clients take them.

A node's settings are librdkafka's (``security.protocol``, ``sasl.mechanism``,
``sasl.username``, ``ssl.ca.location``, ...): its own clients are librdkafka's. Spark's Kafka
source and sink, and the producers in Spark's JVM, are Kafka's Java clients, which name the same
things differently or take them in another shape: SASL credentials as a JAAS login module,
certificates as a key store and a trust store. :func:`java_security` writes them so:

- ``sasl.mechanism`` (or ``sasl.mechanisms``) PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with
  ``sasl.username`` and ``sasl.password``: ``sasl.jaas.config`` with Kafka's PLAIN or SCRAM login
  module;
- ``ssl.ca.location`` (a PEM file) or ``ssl.ca.pem``: a PEM trust store;
- ``ssl.certificate.location`` and ``ssl.key.location`` (PEM, ``ssl.key.password`` if the key
  is encrypted), or their ``.pem`` values: a PEM key store holding that chain and the key as
  unencrypted PKCS#8 (read when the node starts: Java's PEM key store reads no other form);
- ``ssl.endpoint.identification.algorithm`` ``none``: Java's empty value.

Settings with the same name in both pass through as they are. A SASL mechanism that needs more
than a user and a password (GSSAPI, OAUTHBEARER), a CA directory, a key or certificate that
cannot be read, and ``enable.ssl.certificate.verification`` are refused with the reason: a node
never starts Spark on settings its Java clients would read otherwise. The values carry secrets:
Spark redacts them in plans (:mod:`metastore.spark.session`).
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
                        "ssl.ca.pem", "ssl.certificate.location", "ssl.certificate.pem",
                        "ssl.key.location", "ssl.key.pem", "ssl.key.password"})
"""librdkafka's names that the Java clients do not know (or, ``ssl.key.password``, take for
another shape of key): written as other settings."""
REFUSED = {"enable.ssl.certificate.verification": "Kafka's Java clients always verify the "
           "broker's certificate; give its CA with ssl.ca.location instead"}
SECRET_OPTIONS = (r"(?i)url|password|sasl\.jaas\.config|ssl\.keystore\.key|ssl\.key\.pem|"
                  r"secret|token")
"""The Spark option names whose values Spark's plans and UI show redacted."""


def java_security(client: Mapping[str, str]) -> dict[str, str]:
    """The Java client settings of the librdkafka settings ``client``: those it names the same,
    then the translations of those it does not."""
    for name, reason in REFUSED.items():
        if name in client:
            raise KafkaClientError(f"{name} cannot be given to Spark's Kafka clients: {reason}")
    settings = {name: str(value) for name, value in client.items() if name not in TRANSLATED}
    mechanism = str(client.get("sasl.mechanism", client.get("sasl.mechanisms", ""))).upper()
    if mechanism:
        settings["sasl.mechanism"] = mechanism
    if "sasl.username" in client or "sasl.password" in client:
        settings["sasl.jaas.config"] = _jaas(mechanism or "GSSAPI", client)
    settings |= _trust_store(client)
    if any(name in client for name in ("ssl.certificate.location", "ssl.certificate.pem",
                                       "ssl.key.location", "ssl.key.pem")):
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


def _trust_store(client: Mapping[str, str]) -> dict[str, str]:
    """A PEM trust store of ``ssl.ca.location`` (a file) or ``ssl.ca.pem``."""
    if "ssl.ca.pem" in client:
        return {"ssl.truststore.type": "PEM",
                "ssl.truststore.certificates": str(client["ssl.ca.pem"])}
    location = client.get("ssl.ca.location")
    if location is None:
        return {}
    if not Path(str(location)).is_file():
        raise KafkaClientError(f"ssl.ca.location {location} cannot be given to Spark's Kafka "
                               "clients: they read one PEM file of CA certificates, not a "
                               "directory or the system's store")
    return {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(location)}


def _key_store(client: Mapping[str, str]) -> dict[str, str]:
    """A PEM key store of the client certificate chain and its key, by value; the key as
    unencrypted PKCS#8, the only form Java's PEM key store reads without more settings."""
    chain = client.get("ssl.certificate.pem") or _read(client, "ssl.certificate.location")
    key = client.get("ssl.key.pem") or _read(client, "ssl.key.location")
    if chain is None or key is None:
        raise KafkaClientError("a client certificate needs both ssl.certificate.location (or "
                               ".pem) and ssl.key.location (or .pem)")
    return {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": str(chain),
            "ssl.keystore.key": _pkcs8(str(key), client.get("ssl.key.password"))}


def _read(client: Mapping[str, str], setting: str) -> str | None:
    path = client.get(setting)
    if path is None:
        return None
    try:
        return Path(str(path)).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as error:
        raise KafkaClientError(f"{setting} {path} cannot be read as a PEM file: {error}") \
            from error


def _pkcs8(key: str, password: str | None) -> str:
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        load_pem_private_key,
    )

    try:
        loaded = load_pem_private_key(key.encode(), password.encode() if password else None)
    except (ValueError, TypeError) as error:
        raise KafkaClientError(f"the client key cannot be read (with ssl.key.password, if it is "
                               f"encrypted): {error}") from error
    return loaded.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()


__all__ = ["LOGIN_MODULES", "SECRET_OPTIONS", "TRANSLATED", "java_security"]
