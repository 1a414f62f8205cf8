"""Certificates for local clusters and tests: a CA, and certificates it signs, written as the PEM
and PKCS12 files brokers, nodes and their clients read. A development CA, not a production one:
its keys are unencrypted on disk, readable by the user only."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
    pkcs12,
)
from cryptography.x509.oid import NameOID

_DAY = datetime.timedelta(days=1)
TEST_VALIDITY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Issued:
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def pem(self, directory: Path, name: str) -> tuple[Path, Path]:
        """The certificate and its key as PEM files ``<name>.pem`` and ``<name>.key``."""
        certificate, key = directory / f"{name}.pem", directory / f"{name}.key"
        certificate.write_bytes(self.certificate.public_bytes(Encoding.PEM))
        key.touch(mode=0o600)
        key.write_bytes(self.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                                               NoEncryption()))
        return certificate, key

    def key_and_chain(self, path: Path, ca: Issued) -> Path:
        """The key (unencrypted PKCS#8) and the certificate chain up to ``ca`` in one PEM file,
        as Kafka's PEM key store (``ssl.keystore.type=PEM``) reads it; readable by the user
        only."""
        path.touch(mode=0o600)
        path.write_bytes(self.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
                         + self.certificate.public_bytes(Encoding.PEM)
                         + ca.certificate.public_bytes(Encoding.PEM))
        return path

    def pkcs12(self, path: Path, password: str, ca: Issued) -> Path:
        """The certificate, its key and its CA as a PKCS12 key store at ``path`` (readable by the
        user only)."""
        path.touch(mode=0o600)
        path.write_bytes(pkcs12.serialize_key_and_certificates(
            b"node", self.key, self.certificate, [ca.certificate],
            BestAvailableEncryption(password.encode())))
        return path


def authority(name: str, valid: datetime.timedelta = TEST_VALIDITY) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - _DAY).not_valid_after(now + valid)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    return Issued(certificate, key)


def issue(ca: Issued, name: str, server: bool,
          valid: datetime.timedelta = TEST_VALIDITY, hosts: tuple[str, ...] = ()) -> Issued:
    """A certificate of ``name`` signed by ``ca``: for a server on 127.0.0.1, localhost and
    ``hosts``, or a client."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
               .issuer_name(ca.certificate.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - _DAY).not_valid_after(now + valid))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            *(x509.DNSName(host) for host in ("localhost", *hosts)),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return Issued(builder.sign(ca.key, hashes.SHA256()), key)


def load(certificate: Path, key: Path) -> Issued:
    """A certificate and its (unencrypted PEM) key, as :meth:`Issued.pem` wrote them."""
    loaded = load_pem_private_key(key.read_bytes(), password=None)
    if not isinstance(loaded, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{key} is not an elliptic-curve key")
    return Issued(x509.load_pem_x509_certificate(certificate.read_bytes()), loaded)


def ca_pem(ca: Issued, path: Path) -> Path:
    path.write_bytes(ca.certificate.public_bytes(Encoding.PEM))
    return path
