"""Certificates for the TLS tests: the project's own (:mod:`metastore.dev.certificates`), and an
RSA key in the legacy form OpenSSL's old tools write."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    PrivateFormat,
)

from metastore.dev.certificates import Issued, authority, ca_pem, issue

__all__ = ["Issued", "authority", "ca_pem", "issue", "rsa_key"]


def rsa_key(path: Path, password: str) -> Path:
    """An RSA key as encrypted PKCS#1 PEM (``BEGIN RSA PRIVATE KEY``), as OpenSSL's legacy
    tools write it."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.TraditionalOpenSSL,
                                       BestAvailableEncryption(password.encode())))
    return path
