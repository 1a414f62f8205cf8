"""A node serves HTTPS from ksqlDB's ssl.* properties: HTTP/2 and HTTP/1.1 by ALPN, mutual TLS
that refuses a client without a certificate of its CA, curl and the CLI over it, and a renewed
certificate served to new connections without a restart; the ksql-python client over mutual
TLS."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from cryptography import x509

from cli.client import TLS_ENVIRONMENT
from tests.queries.test_ksql_python_client import client_path, run_client  # noqa: F401
from tests.support.certificates import authority, ca_pem, issue
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually

PASSWORD = "store-secret"


def _context(ca: Path, certificate: tuple[Path, Path] | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca)
    if certificate is not None:
        context.load_cert_chain(*certificate)
    return context


def _served_serial(url: str, context: ssl.SSLContext) -> int:
    """The serial number of the certificate a new connection to ``url`` is shown."""
    host, port = url.removeprefix("https://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_a_node_serves_https_to_clients_with_a_certificate_of_its_ca_only(
        server_factory: Callable[..., ServerProcess], tmp_path: Path) -> None:
    ca, rogue_ca = authority("metastore test CA"), authority("another CA")
    keystore = issue(ca, "node-1", server=True).pkcs12(tmp_path / "node.p12", PASSWORD, ca)
    ca_file = ca_pem(ca, tmp_path / "ca.pem")
    client = issue(ca, "alice", server=False).pem(tmp_path, "alice")
    rogue = issue(rogue_ca, "mallory", server=False).pem(tmp_path, "mallory")
    properties = {"ssl.keystore.location": keystore, "ssl.keystore.password": PASSWORD,
                  "ssl.truststore.location": ca_file, "ssl.truststore.type": "PEM",
                  "ssl.client.authentication": "REQUIRED", "ssl.keystore.reload": "true"}
    node = server_factory(*(arg for name, value in properties.items()
                            for arg in ("--ksql-property", f"{name}={value}")), wait=False)
    node.url = node.url.replace("http://", "https://")
    trusted = _context(ca_file, client)
    eventually(lambda: _serves(node, trusted), 60,
               lambda: f"the node to serve HTTPS:\n{node.output()}", interval=0.2)
    with httpx.Client(verify=trusted, http2=True, timeout=30) as http:
        info = http.get(f"{node.url}/info")
        assert (info.status_code, info.http_version) == (200, "HTTP/2")
        listed = http.post(f"{node.url}/ksql", json={"ksql": "SHOW STREAMS;"})
        assert listed.status_code == 200 and listed.json()[0]["@type"] == "streams"
    with httpx.Client(verify=trusted, http2=False, timeout=30) as http:
        assert http.get(f"{node.url}/info").http_version == "HTTP/1.1"

    for refused in (_context(ca_file, None), _context(ca_file, rogue)):
        with pytest.raises(httpx.TransportError):  # refused in the handshake
            httpx.get(f"{node.url}/info", verify=refused, timeout=10)
    with pytest.raises(httpx.TransportError):
        httpx.get(node.url.replace("https://", "http://") + "/info", timeout=10)

    curl = subprocess.run(["curl", "-sS", "--cacert", str(ca_file), "--cert", str(client[0]),
                           "--key", str(client[1]), f"{node.url}/info"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert curl.returncode == 0 and "KsqlServerInfo" in curl.stdout, curl.stderr
    cli = subprocess.run(
        [sys.executable, "-m", "cli.main", "list", "streams", "--server", node.url, "--json"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, **dict(zip(TLS_ENVIRONMENT, map(str, (ca_file, *client)),
                                      strict=True))})
    assert cli.returncode == 0, cli.stderr

    renewed = issue(ca, "node-1 renewed", server=True)
    first = _served_serial(node.url, trusted)
    renewed.pkcs12(tmp_path / "renewed.p12", PASSWORD, ca).replace(keystore)
    eventually(lambda: _served_serial(node.url, trusted) == renewed.certificate.serial_number,
               30, "the renewed certificate to be served to a new connection", interval=0.5)
    assert first != renewed.certificate.serial_number and node.process.poll() is None


def test_the_ksql_python_client_speaks_mutual_tls(
        server_factory: Callable[..., ServerProcess], tmp_path: Path,
        client_path: Path) -> None:  # noqa: F811 - the fixture
    ca = authority("metastore test CA")
    keystore = issue(ca, "node-1", server=True).pkcs12(tmp_path / "node.p12", PASSWORD, ca)
    ca_file = ca_pem(ca, tmp_path / "ca.pem")
    client = issue(ca, "alice", server=False).pem(tmp_path, "alice")
    properties = {"ssl.keystore.location": keystore, "ssl.keystore.password": PASSWORD,
                  "ssl.truststore.location": ca_file, "ssl.truststore.type": "PEM",
                  "ssl.client.authentication": "REQUIRED"}
    node = server_factory(*(arg for name, value in properties.items()
                            for arg in ("--ksql-property", f"{name}={value}")), wait=False)
    node.url = node.url.replace("http://", "https://")
    trusted = _context(ca_file, client)
    eventually(lambda: _serves(node, trusted), 60, lambda: f"HTTPS:\n{node.output()}",
               interval=0.2)
    answer = run_client(client_path, f"""
        import json
        from ksql import KSQLAPI
        client = KSQLAPI({node.url!r}, timeout=60, cert={tuple(map(str, client))!r})
        [listing] = client.ksql("SHOW STREAMS;")
        print(json.dumps({{"version": client.get_ksql_version(), "type": listing["@type"]}}))
        """, SSL_CERT_FILE=str(ca_file))  # httpx's trust store: the node's CA only
    served = httpx.get(f"{node.url}/info", verify=trusted, timeout=10).json()
    assert answer == {"version": served["KsqlServerInfo"]["version"], "type": "streams"}


def _serves(node: ServerProcess, context: ssl.SSLContext) -> bool:
    assert node.process.poll() is None, node.output()
    try:
        return httpx.get(f"{node.url}/healthcheck", verify=context, timeout=2).is_success
    except httpx.TransportError:
        return False


def test_users_known_by_their_client_certificate_are_checked_and_recorded(
        server_factory: Callable[..., ServerProcess], tmp_path: Path) -> None:
    """Without an auth file, a node that asks for client certificates knows each request's user
    by its certificate's subject, mapped by ssl.principal.mapping.rules: the role file checks
    that user, the command log records it, and a connection without one is no user (401)."""
    ca = authority("metastore test CA")
    keystore = issue(ca, "node-1", server=True).pkcs12(tmp_path / "node.p12", PASSWORD, ca)
    ca_file = ca_pem(ca, tmp_path / "ca.pem")
    roles = tmp_path / "roles.toml"
    roles.write_text('[users.alice]\nread = ["*"]\n\n[users.bob]\nread = ["*"]\nwrite = ["*"]\n'
                     'create = ["*"]\n')
    properties = {"ssl.keystore.location": keystore, "ssl.keystore.password": PASSWORD,
                  "ssl.truststore.location": ca_file, "ssl.truststore.type": "PEM",
                  "ssl.client.authentication": "REQUESTED",
                  "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/L,DEFAULT"}
    node = server_factory("--roles-file", str(roles), *(
        arg for name, value in properties.items()
        for arg in ("--ksql-property", f"{name}={value}")), wait=False)
    node.url = node.url.replace("http://", "https://")
    users = {name: _context(ca_file, issue(ca, cn, server=False).pem(tmp_path, name))
             for name, cn in (("alice", "Alice"), ("bob", "bob"))}
    eventually(lambda: _serves(node, users["bob"]), 60, lambda: f"HTTPS:\n{node.output()}",
               interval=0.2)
    topic = f"certs{os.getpid()}"

    def ksql(user: str, text: str) -> httpx.Response:
        return httpx.post(f"{node.url}/ksql", json={"ksql": text}, verify=users[user],
                          timeout=60)

    create = (f"CREATE STREAM S (ID INT KEY) WITH (KAFKA_TOPIC='{topic}', PARTITIONS=1, "
              "VALUE_FORMAT='JSON');")
    refused = ksql("alice", create)
    assert (refused.status_code, refused.json()["message"]) == (
        403, f"Authorization denied to Create on topic(s): [{topic}]"), "alice may only read"
    assert ksql("bob", create).status_code == 200
    history = httpx.get(f"{node.url}/v1/metastore/log", verify=users["alice"], timeout=30)
    assert [record["submitter"] for record in history.json()["records"]] == ["bob"]
    anonymous = httpx.post(f"{node.url}/ksql", json={"ksql": "SHOW STREAMS;"}, timeout=30,
                           verify=_context(ca_file, None))
    assert (anonymous.status_code, anonymous.json()["error_code"]) == (401, 40100)
