"""docker-compose.yml and its Dockerfile cannot run here (no Docker engine); keep them correct."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import typing
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text()))


def server_options() -> set[str]:
    help_text = subprocess.run([sys.executable, "-m", "cli.main", "server", "--help"],
                               capture_output=True, text=True, check=True,
                               env={"COLUMNS": "200", "PATH": ""}).stdout
    return set(re.findall(r"--[a-z][a-z-]+", help_text))


def test_kafka_is_configured_for_transactions_and_safety() -> None:
    kafka = compose()["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:4.")
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == 1
    assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == 1
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == 1
    assert env["KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE"] == "false"
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://kafka:9092"
    assert "healthcheck" in kafka


def test_three_nodes_of_one_service_with_valid_settings() -> None:
    services = compose()["services"]
    nodes = {name: spec for name, spec in services.items() if name.startswith("node-")}
    assert sorted(nodes) == ["node-1", "node-2", "node-3"]
    options = server_options()
    host_ports = set()
    for name, spec in nodes.items():
        env = spec["environment"]
        assert env["METASTORE_SERVICE_ID"] == "demo"
        assert env["KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
        command = spec["command"]
        assert command[0] == "server"
        flags = [part for part in command if part.startswith("--")]
        assert set(flags) <= options, set(flags) - options
        assert command[command.index("--node-id") + 1] == name
        assert spec["depends_on"]["kafka"]["condition"] == "service_healthy"
        assert "/healthcheck" in " ".join(spec["healthcheck"]["test"])
        host_ports.add(spec["ports"][0].split(":")[0])
    assert host_ports == {"8088", "8089", "8090"}


def test_environment_variables_are_ones_the_server_reads() -> None:
    from cli.server import server

    envvars = set()
    for annotation in typing.get_type_hints(server, include_extras=True).values():
        for meta in getattr(annotation, "__metadata__", ()):
            envvar = getattr(meta, "envvar", None)
            if envvar:
                envvars.add(envvar)
    node_env = compose()["services"]["node-1"]["environment"]
    assert set(node_env) <= envvars, set(node_env) - envvars


def test_demo_runs_the_examples_against_the_nodes() -> None:
    demo = compose()["services"]["demo"]
    script = demo["command"][0]
    for example in re.findall(r"examples/\S+\.sql", script):
        assert (ROOT / example).is_file(), example
    assert {"node-1", "node-2", "node-3"} <= set(demo["depends_on"])


def test_dockerfile_copies_what_exists_and_runs_metastore() -> None:
    for service in compose()["services"].values():
        build = service.get("build")
        if build is None:
            continue
        dockerfile = ROOT / build["dockerfile"]
        text = dockerfile.read_text()
        for source in re.findall(r"^COPY (.+) \S+$", text, re.M):
            for path in source.split():
                assert (ROOT / path).exists(), path
        assert 'ENTRYPOINT ["metastore"]' in text
        assert "openjdk-17" in text, "Spark needs a Java runtime"


def test_nodes_keep_their_data_and_share_the_query_checkpoints() -> None:
    document = compose()
    nodes = {n: s for n, s in document["services"].items() if n.startswith("node-")}
    shared = set()
    for name, spec in nodes.items():
        env = spec["environment"]
        mounts = dict(volume.split(":")[::-1] for volume in spec["volumes"])
        assert mounts[env["METASTORE_DATA_DIR"]] == f"{name}-data"
        checkpoints = env["METASTORE_QUERY_CHECKPOINT_DIR"]
        [volume] = [v for t, v in mounts.items() if checkpoints.startswith(t + "/")]
        shared.add(volume)
    assert len(shared) == 1 and shared <= set(document["volumes"])


def test_a_spark_cluster_of_the_nodes_spark_version_runs_their_queries() -> None:
    document = compose()
    services = document["services"]
    pinned = re.search(r'"pyspark==([0-9.]+)"', (ROOT / "pyproject.toml").read_text())
    assert pinned is not None
    master, workers = services["spark-master"], [services["spark-worker-1"],
                                                  services["spark-worker-2"]]
    for spark in (master, *workers):
        assert spark["image"] == f"apache/spark:{pinned.group(1)}", "driver and executors match"
        assert spark["command"][0] == "/opt/spark/bin/spark-class"
    assert master["command"][1] == "org.apache.spark.deploy.master.Master"
    port = master["command"][master["command"].index("--port") + 1]
    host = master["command"][master["command"].index("--host") + 1]
    probe = " ".join(master["healthcheck"]["test"])
    assert f"/dev/tcp/{host}/{port}" in probe, "the probe reaches the address the master binds"
    nodes = {n: s for n, s in services.items() if n.startswith("node-")}
    checkpoint_mounts = set()
    for name, spec in nodes.items():
        assert spec["environment"]["METASTORE_SPARK_MASTER"] == f"spark://spark-master:{port}"
        assert spec["depends_on"]["spark-master"]["condition"] == "service_healthy"
        conf = dict(spec["command"][i + 1].split("=", 1)
                    for i, part in enumerate(spec["command"]) if part == "--spark-conf")
        assert conf["spark.driver.host"] == name, "executors reach the driver by its name"
        checkpoint_mounts |= {v for v in spec["volumes"] if v.startswith("query-checkpoints:")}
    cores = 0
    for worker in workers:
        command = worker["command"]
        assert command[1] == "org.apache.spark.deploy.worker.Worker"
        assert command[-1] == f"spark://spark-master:{port}"
        assert set(worker["volumes"]) == checkpoint_mounts, "state stores beside the checkpoints"
        cores += int(command[command.index("--cores") + 1])
    wanted = sum(int(dict(spec["command"][i + 1].split("=", 1) for i, part in enumerate(
        spec["command"]) if part == "--spark-conf")["spark.cores.max"]) for spec in nodes.values())
    assert cores >= wanted, "every node's application gets its executors at once"


def test_the_nodes_ask_a_schema_registry_of_the_local_version() -> None:
    services = compose()["services"]
    registry = services["schema-registry"]
    pom = (ROOT / "metastore" / "dev" / "schema_registry_app" / "pom.xml").read_text()
    version = re.search(r"<apicurio.version>([^<]+)</apicurio.version>", pom)
    assert version is not None
    assert registry["image"] == f"apicurio/apicurio-registry-mem:{version.group(1)}"
    assert "/dev/tcp/127.0.0.1/8080" in " ".join(registry["healthcheck"]["test"])
    assert "--schema-registry-url" in server_options()
    for name, spec in services.items():
        if name.startswith("node-"):
            assert spec["environment"]["METASTORE_SCHEMA_REGISTRY_URL"] == \
                "http://schema-registry:8080/apis/ccompat/v7"
            assert spec["depends_on"]["schema-registry"]["condition"] == "service_healthy"


def test_the_nodes_run_connector_statements_on_the_connect_worker() -> None:
    services = compose()["services"]
    connect = services["connect"]
    assert connect["image"] == services["kafka"]["image"], "Connect of the broker's version"
    script = connect["command"][-1]
    assert "bootstrap.servers=kafka:9092" in script
    assert "connect-distributed.sh" in script and "plugin.path=/opt/connect-plugins" in script
    assert services["node-1"]["environment"]["METASTORE_CONNECT_URL"] == "http://connect:8083"
    assert services["node-1"]["depends_on"]["connect"]["condition"] == "service_healthy"
    assert "wal_level=logical" in services["postgres"]["command"]


SECURE = ROOT / "docker-compose.secure.yml"


def test_the_secured_variant_runs_kafka_over_sasl_ssl_with_acls_from_its_secrets(
        tmp_path: Path) -> None:
    from metastore.dev.compose_secrets import write
    from metastore.dev.secure import grants

    secrets, connect = tmp_path / "secrets", tmp_path / "connect-secrets"
    secrets.mkdir()
    assert write(secrets, connect) and not write(secrets, connect), "written once, then kept"
    written = {path.name for path in secrets.iterdir()}
    for directory in (secrets, connect):
        assert directory.stat().st_mode & 0o077 == 0
        for path in directory.iterdir():
            assert path.stat().st_mode & 0o077 == 0 or path.name == "ca.pem", path
    text = SECURE.read_text()
    named = set(re.findall(r"/(?:etc/kafka/)?secrets/([\w.]+)", text))
    services = yaml.safe_load(text)["services"]
    kafka = services["kafka"]["environment"]
    named |= {kafka["KAFKA_SSL_KEYSTORE_FILENAME"], kafka["KAFKA_SSL_KEYSTORE_CREDENTIALS"]}
    assert named <= written, named - written
    assert kafka["KAFKA_ADVERTISED_LISTENERS"] == "SASL_SSL://kafka:9092"
    assert kafka["KAFKA_AUTHORIZER_CLASS_NAME"].endswith("StandardAuthorizer")
    assert kafka["KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND"] == "false"
    assert "java.security.auth.login.config=/secrets/kafka_jaas.conf" in kafka["KAFKA_OPTS"]
    assert "secrets:/etc/kafka/secrets:ro" in services["kafka"]["volumes"], \
        "the image reads its key store there"
    assert (secrets / "acls.sh").read_text().count("kafka-acls.sh") == len(grants())
    assert services["acls"]["command"] == ["bash", "/secrets/acls.sh"]
    assert "cat /connect-secrets/connect.properties >>" in services["connect"]["command"][2]
    assert {path.name for path in connect.iterdir()} == {"connect.properties", "ca.pem"}
    assert "/connect-secrets/ca.pem" in (connect / "connect.properties").read_text()
    assert not any("secrets:/secrets" in volume for volume in services["connect"]["volumes"]), \
        "Connect sees its own login, not the nodes' or the users' secrets"


def test_the_secured_nodes_serve_https_and_check_their_users_acls(tmp_path: Path) -> None:
    from metastore.dev.compose_secrets import write
    from metastore.server.settings import server_settings

    write(tmp_path)
    services = yaml.safe_load(SECURE.read_text())["services"]
    for name in ("node-1", "node-2", "node-3"):
        node = services[name]
        assert node["environment"] == {"METASTORE_CONFIG": "/secrets/node.toml",
                                       "METASTORE_ADVERTISED_URL": f"https://{name}:8088"}
        assert "secrets:/secrets:ro" in node["volumes"]
        assert node["depends_on"]["acls"]["condition"] == "service_completed_successfully"
        assert "https://localhost:8088/healthcheck" in node["healthcheck"]["test"][-1]
    config = tomllib.loads((tmp_path / "node.toml").read_text().replace("/secrets/",
                                                                        f"{tmp_path}/"))
    settings = server_settings({**config, "bootstrap_servers": "kafka:9092",
                                "advertised_url": "https://node-1:8088"})
    assert settings.tls is not None and settings.auth_file == tmp_path / "users"
    assert settings.node.access_validator.mode == "on"
    assert settings.node.kafka_client["security.protocol"] == "SASL_SSL"
    demo = services["demo"]["command"][0]
    assert ". /secrets/cli.env" in demo and "http://" not in demo
