"""``metastore dev up --secure``: a Kafka over SASL_SSL with ACLs of its own and nodes serving
HTTPS, which the CLI reaches with the environment file it writes; the admin creates and writes,
the read-only user reads and is refused a CSAS with ksqlDB's 40301, and ``dev down`` stops it
all. It owns its broker and node (a secured cluster is no test's shared one)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from metastore.dev.kafka_cluster import free_ports


def metastore(*args: str, env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True,
                          text=True, timeout=timeout, check=False, env=env)


def exported(env_file: Path) -> dict[str, str]:
    return {name: value for name, value in re.findall(r'^export (\w+)="(.*)"$',
                                                      env_file.read_text(), re.MULTILINE)}


def test_dev_up_secure_serves_https_over_a_sasl_ssl_kafka_with_acls(tmp_path: Path) -> None:
    env = {**os.environ, "METASTORE_DEV_DIR": str(tmp_path / "dev")}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    [port] = free_ports(1)
    try:
        up = metastore("dev", "up", "--secure", "--nodes", "1", "--no-spark", "--port", str(port),
                       env=env)
        assert up.returncode == 0, up.stderr
        assert f"node-1: https://127.0.0.1:{port}" in up.stdout
        env_file = tmp_path / "dev" / "secure" / "env.sh"
        assert f"source {env_file}" in up.stdout
        assert env_file.stat().st_mode & 0o077 == 0, "credentials readable by the user only"
        admin = {**env, **exported(env_file)}
        reader_login = re.search(r"METASTORE_USER=(reader:\S+)", env_file.read_text())
        assert reader_login is not None
        reader = {**admin, "METASTORE_USER": reader_login.group(1)}
        server = ("--server", f"https://127.0.0.1:{port}")

        created = metastore("exec", "CREATE STREAM CLICKS (ID INT KEY, URL STRING) WITH ("
                            "KAFKA_TOPIC='clicks', PARTITIONS=1, VALUE_FORMAT='JSON'); INSERT INTO "
                            "CLICKS (ID, URL) VALUES (1, 'a');", *server, env=admin)
        assert created.returncode == 0, created.stderr
        printed = metastore("query", "PRINT 'clicks' FROM BEGINNING LIMIT 1;", *server, env=reader)
        assert printed.returncode == 0 and '{"URL":"a"}' in printed.stdout, printed.stderr
        refused = metastore("exec", "CREATE STREAM COPY AS SELECT * FROM CLICKS;", *server,
                            env=reader)
        assert refused.returncode != 0
        assert "40301: Authorization denied to Create on topic(s): [COPY]" in refused.stderr
        untrusted = metastore("list", "streams", *server, env={**admin, "METASTORE_CA_CERT": ""})
        assert untrusted.returncode != 0, "the node's certificate is of the local CA only"
        assert "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr, untrusted.stderr
    finally:
        down = metastore("dev", "down", env=env)
    assert down.returncode == 0 and "Stopped 1 node(s)" in down.stdout, down.stdout + down.stderr
    assert "and 1 broker(s)" in down.stdout, down.stdout
