"""Certificates for the TLS tests: a CA, and certificates it signs, written as the PEM and PKCS12
files a node and its clients read."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
    pkcs12,
)
from cryptography.x509.oid import NameOID

_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Issued:
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def pem(self, directory: Path, name: str) -> tuple[Path, Path]:
        """The certificate and its key as PEM files ``<name>.pem`` and ``<name>.key``."""
        certificate, key = directory / f"{name}.pem", directory / f"{name}.key"
        certificate.write_bytes(self.certificate.public_bytes(Encoding.PEM))
        key.write_bytes(self.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                                               NoEncryption()))
        return certificate, key

    def pkcs12(self, path: Path, password: str, ca: Issued) -> Path:
        """The certificate, its key and its CA as a PKCS12 key store at ``path``."""
        path.write_bytes(pkcs12.serialize_key_and_certificates(
            b"node", self.key, self.certificate, [ca.certificate],
            BestAvailableEncryption(password.encode())))
        return path


def authority(name: str) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - _DAY).not_valid_after(now + _DAY)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    return Issued(certificate, key)


def issue(ca: Issued, name: str, server: bool) -> Issued:
    """A certificate of ``name`` signed by ``ca``: for a server on 127.0.0.1 and localhost, or
    a client."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
               .issuer_name(ca.certificate.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - _DAY).not_valid_after(now + _DAY))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return Issued(builder.sign(ca.key, hashes.SHA256()), key)


def ca_pem(ca: Issued, path: Path) -> Path:
    path.write_bytes(ca.certificate.public_bytes(Encoding.PEM))
    return path


def rsa_key(path: Path, password: str) -> Path:
    """An RSA key as encrypted PKCS#1 PEM (``BEGIN RSA PRIVATE KEY``), as OpenSSL's legacy
    tools write it."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.TraditionalOpenSSL,
                                       BestAvailableEncryption(password.encode())))
    return path
