"""The secrets of the secured docker-compose variant (docker-compose.secure.yml), written once into
its ``secrets`` volume by ``python -m metastore.dev.compose_secrets /secrets``: the deployment of
:mod:`metastore.dev.secure`, for the compose services' host names.

- ``ca.pem``: the CA every client trusts; ``kafka.p12`` (host ``kafka``, a PKCS12 key store
  whose password is ``kafka.p12.password``, as the Kafka image wants them) and ``node.pem``
  (``node-1`` to ``node-3``, key and chain in one PEM file);
- ``kafka_jaas.conf``: the broker's JAAS login (``KAFKA_OPTS``): it logs in as the admin, the
  super user, and lets the admin and the nodes' ``metastore`` user log in;
- ``admin.properties`` and ``connect.properties``: Java clients' logins as the admin, for
  Kafka's tools and the Connect worker;
- ``acls.sh``: the ACLs (:func:`metastore.dev.secure.grants`), run once the broker is up;
- ``node.toml``, ``users``: the nodes' config file and REST users (``admin``, ``reader``);
- ``cli.env``: ``METASTORE_CA_CERT`` and ``METASTORE_USER`` for the CLI, as the admin.

The files belong to uid 1000 (the Kafka image's user; the nodes run as root), mode 0600 but the
CA's certificate; run again, it keeps them.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from metastore.dev import certificates
from metastore.dev.kafka_cluster import CERTIFICATE_VALIDITY, plain_login
from metastore.dev.secure import (
    NODE_PRINCIPAL,
    grants,
    java_client_properties,
    node_config,
    properties_text,
    write_private,
)

KAFKA_UID = 1000
NODES = ("node-1", "node-2", "node-3")


def write(directory: Path) -> bool:
    """Write every file under ``directory``; False when they were already there."""
    if (directory / "ca.pem").exists():
        return False
    password = {user: secrets.token_urlsafe(18) for user in ("admin", NODE_PRINCIPAL, "reader")}
    ca_file = str(directory / "ca.pem")
    ca = certificates.authority("metastore compose CA", CERTIFICATE_VALIDITY)
    store_password = secrets.token_urlsafe(18)
    certificates.issue(ca, "kafka", server=True, valid=CERTIFICATE_VALIDITY, hosts=("kafka",)
                       ).pkcs12(directory / "kafka.p12", store_password, ca)
    certificates.issue(ca, "metastore-node", server=True, valid=CERTIFICATE_VALIDITY,
                       hosts=NODES).key_and_chain(directory / "node.pem", ca)
    files = {
        "kafka.p12.password": store_password,
        "kafka_jaas.conf": "KafkaServer {\n  " + plain_login(
            "admin", password["admin"],
            {"admin": password["admin"], NODE_PRINCIPAL: password[NODE_PRINCIPAL]}) + "\n};\n",
        "admin.properties": properties_text(
            java_client_properties("admin", password["admin"], ca_file)),
        "connect.properties": _connect_logins(password["admin"], ca_file),
        "acls.sh": "set -e\n" + "".join(
            f"/opt/kafka/bin/{grant.command('kafka:9092', str(directory / 'admin.properties'))}\n"
            for grant in grants()),
        "users": f"admin:{password['admin']}\nreader:{password['reader']}\n",
        "node.toml": node_config(str(directory / "users"), {
            "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.username": NODE_PRINCIPAL, "sasl.password": password[NODE_PRINCIPAL],
            "ssl.ca.location": ca_file}, ca_file, str(directory / "node.pem")),
        "cli.env": f"METASTORE_CA_CERT={ca_file}\nMETASTORE_USER=admin:{password['admin']}\n",
    }
    for name, text in files.items():
        write_private(directory / name, text)
    for path in directory.iterdir():
        if os.geteuid() == 0:
            os.chown(path, KAFKA_UID, KAFKA_UID)
    certificates.ca_pem(ca, directory / "ca.pem")  # last: its presence says all is written
    return True


def _connect_logins(admin_password: str, ca_file: str) -> str:
    """The Connect worker's login, for itself and its connectors' producers, consumers and
    admin clients."""
    login = java_client_properties("admin", admin_password, ca_file)
    return "".join(properties_text({f"{prefix}{key}": value for key, value in login.items()})
                   for prefix in ("", "producer.", "consumer.", "admin."))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m metastore.dev.compose_secrets DIRECTORY", file=sys.stderr)
        return 2
    directory = Path(argv[1])
    directory.mkdir(parents=True, exist_ok=True)
    written = write(directory)
    print(f"{'wrote' if written else 'kept'} the secured deployment's secrets in {directory}; "
          "the CLI's CA and login: cli.env there (docker compose cp secrets:/secrets/cli.env .)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
