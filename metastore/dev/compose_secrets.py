"""The secrets of the secured docker-compose variant (docker-compose.secure.yml), written once into
its ``secrets`` volume by ``python -m metastore.dev.compose_secrets /secrets``: the deployment of
:mod:`metastore.dev.secure`, for the compose services' host names.

- ``ca.pem``: the CA every client trusts; ``kafka.p12`` (host ``kafka``, a PKCS12 key store
  whose password is ``kafka.p12.password``, as the Kafka image wants them) and ``node.pem``
  (``node-1`` to ``node-3``, key and chain in one PEM file);
- ``kafka_jaas.conf``: the broker's JAAS login (``KAFKA_OPTS``): it logs in as the admin, the
  super user, and lets the admin and the nodes' ``metastore`` user log in;
- ``admin.properties``: a Java client's login as the admin, for Kafka's tools; and in the
  Connect worker's own directory, which only it mounts, ``connect.properties`` (its login as the
  admin, for itself and its connectors' clients) and ``ca.pem``;
- ``acls.sh``: the ACLs (:func:`metastore.dev.secure.grants`), run once the broker is up;
- ``node.toml``, ``users``: the nodes' config file and REST users (``admin``, ``reader``);
- ``cli.env``: ``METASTORE_CA_CERT`` and ``METASTORE_USER`` for the CLI, as the admin.

The directories and files belong to uid 1000 (the Kafka image's user; the nodes run as root),
mode 0700 and 0600 but the CA's certificate; run again, it keeps them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from metastore.dev import certificates
from metastore.dev.kafka_cluster import (
    CERTIFICATE_VALIDITY,
    SaslUser,
    Security,
    TlsFiles,
    new_password,
    plain_login,
)
from metastore.dev.secure import (
    NODE_PRINCIPAL,
    cli_environment,
    grants,
    java_client_properties,
    node_config,
    properties_text,
    users_text,
    write_private,
)

KAFKA_UID = 1000
NODES = ("node-1", "node-2", "node-3")


def write(directory: Path, connect_directory: Path | None = None) -> bool:
    """Write every file under ``directory`` (the Connect worker's login and the CA under
    ``connect_directory``, which only Connect mounts); False when they were already there."""
    if (directory / "ca.pem").exists():
        return False
    ca_file = str(directory / "ca.pem")
    security = Security(SaslUser("admin", new_password()),
                        SaslUser(NODE_PRINCIPAL, new_password()),
                        TlsFiles(ca_file, str(directory / "kafka.p12")))
    rest = {"admin": security.admin.password, "reader": new_password()}
    store_password = new_password()
    ca = certificates.authority("metastore compose CA", CERTIFICATE_VALIDITY)
    certificates.issue(ca, "kafka", server=True, valid=CERTIFICATE_VALIDITY, hosts=("kafka",)
                       ).pkcs12(directory / "kafka.p12", store_password, ca)
    certificates.issue(ca, "metastore-node", server=True, valid=CERTIFICATE_VALIDITY,
                       hosts=NODES).key_and_chain(directory / "node.pem", ca)
    files = {
        "kafka.p12.password": store_password,
        "kafka_jaas.conf": "KafkaServer {\n  " + plain_login(
            "admin", security.admin.password,
            {user.name: user.password for user in (security.admin, security.node)}) + "\n};\n",
        "admin.properties": properties_text(
            java_client_properties("admin", security.admin.password, ca_file)),
        "acls.sh": "set -e\n" + "".join(
            f"/opt/kafka/bin/{grant.command('kafka:9092', str(directory / 'admin.properties'))}\n"
            for grant in grants()),
        "users": users_text(rest),
        "node.toml": node_config(str(directory / "users"), security.client_config(security.node),
                                 ca_file, str(directory / "node.pem")),
        "cli.env": "".join(f"{name}={value}\n" for name, value in
                           cli_environment(ca_file, "admin", rest["admin"]).items()),
    }
    for name, text in files.items():
        write_private(directory / name, text)
    if connect_directory is not None:
        _write_connect(connect_directory, ca, security.admin.password)
    certificates.ca_pem(ca, directory / "ca.pem")  # last: its presence says all is written
    _hand_to_kafka(directory)
    return True


def _write_connect(directory: Path, ca: certificates.Issued, admin_password: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    ca_file = certificates.ca_pem(ca, directory / "ca.pem")
    write_private(directory / "connect.properties", _connect_logins(admin_password, str(ca_file)))
    _hand_to_kafka(directory)


def _hand_to_kafka(directory: Path) -> None:
    """The directory and its files to the Kafka image's user, readable by it only (and root,
    the nodes' user)."""
    directory.chmod(0o700)
    if os.geteuid() != 0:
        return
    for path in (directory, *directory.iterdir()):
        os.chown(path, KAFKA_UID, KAFKA_UID)


def _connect_logins(admin_password: str, ca_file: str) -> str:
    """The Connect worker's login, for itself and its connectors' producers, consumers and
    admin clients."""
    login = java_client_properties("admin", admin_password, ca_file)
    return "".join(properties_text({f"{prefix}{key}": value for key, value in login.items()})
                   for prefix in ("", "producer.", "consumer.", "admin."))


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: python -m metastore.dev.compose_secrets DIRECTORY [CONNECT_DIRECTORY]",
              file=sys.stderr)
        return 2
    directory = Path(argv[1])
    directory.mkdir(parents=True, exist_ok=True)
    written = write(directory, Path(argv[2]) if len(argv) == 3 else None)
    print(f"{'wrote' if written else 'kept'} the secured deployment's secrets in {directory}; "
          "the CLI's CA and login: cli.env there (docker compose cp secrets:/secrets/cli.env .)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
