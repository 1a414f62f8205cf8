"""``metastore migrations`` against a node with Spark, run as ksqlDB's tool is run: a project's
life from new-project to destroy-metadata, and a failing migration recorded ERROR and applied
again once fixed. Each test names its own metadata stream, table and topics."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.support.servers import ServerProcess


def migrations(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", "migrations", *args],
                          capture_output=True, text=True, timeout=180, check=False)


def _new_project(tmp_path: Path, server: ServerProcess) -> tuple[Path, str]:
    """A project on ``server`` with metadata names of its own; its config file and a suffix."""
    suffix = uuid.uuid4().hex[:10].upper()
    created = migrations("new-project", str(tmp_path / "project"), server.url)
    assert created.returncode == 0, created.stderr
    config = tmp_path / "project" / "ksql-migrations.properties"
    with config.open("a") as out:
        out.write(f"ksql.migrations.stream.name=MIG_EVENTS_{suffix}\n"
                  f"ksql.migrations.table.name=MIG_VERSIONS_{suffix}\n"
                  f"ksql.migrations.stream.topic.name=mig-events-{suffix.lower()}\n"
                  f"ksql.migrations.table.topic.name=mig-versions-{suffix.lower()}\n")
    return config, suffix


def _ok(*args: str) -> str:
    result = migrations(*args)
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result.stdout


def _info(config: Path) -> dict[str, Any]:
    info: dict[str, Any] = json.loads(_ok("-c", str(config), "info", "--json"))
    return info


def _sources(server: ServerProcess, kind: str) -> set[str]:
    [listed] = httpx.post(f"{server.url}/ksql", json={"ksql": f"SHOW {kind};"}, timeout=60).json()
    return {source["name"] for source in listed[kind.lower()]}


def test_a_project_from_new_to_destroyed(spark_node: ServerProcess, tmp_path: Path) -> None:
    config, suffix = _new_project(tmp_path, spark_node)
    assert (tmp_path / "project" / "migrations").is_dir()
    _ok("--config-file", str(config), "initialize-metadata")
    assert {f"MIG_EVENTS_{suffix}"} <= _sources(spark_node, "STREAMS")
    assert {f"MIG_VERSIONS_{suffix}"} <= _sources(spark_node, "TABLES")
    again = migrations("-c", str(config), "initialize-metadata")
    assert again.returncode == 1 and "already exists" in again.stderr

    first = json.loads(_ok("create", "-c", str(config), "Create orders", "--json"))
    second = json.loads(_ok("create", "-c", str(config), "Add first order", "--json"))
    assert Path(first["file"]).name == "V000001__Create_orders.sql" and second["version"] == 2
    Path(first["file"]).write_text(
        f"-- the orders\nDEFINE topic='orders-{suffix}';\n"
        f"CREATE STREAM ORDERS_{suffix} (ID INT KEY, ITEM STRING)\n"
        "  WITH (KAFKA_TOPIC='${topic}', VALUE_FORMAT='JSON', PARTITIONS=1);\n")
    Path(second["file"]).write_text(
        f"INSERT INTO ORDERS_{suffix} (ID, ITEM) VALUES (1, '${{item}}');\n")

    later = {3: f"CREATE STREAM BIG_{suffix} AS SELECT * FROM ORDERS_{suffix} WHERE ID > 1;\n",
             4: f"INSERT INTO ORDERS_{suffix} (ID, ITEM) VALUES (2, 'pen');\n",
             5: f"INSERT INTO ORDERS_{suffix} (ID, ITEM) VALUES (3, '${{item}}');\n"}
    for version, text in later.items():
        made = json.loads(_ok("create", "-c", str(config), f"Step {version}", "--json"))
        Path(made["file"]).write_text(text)

    for version in (1, 2):  # one by one
        applied = json.loads(_ok("-c", str(config), "apply", "--next", "-d", "item=book",
                                 "--json"))
        assert [(m["version"], m["state"]) for m in applied["migrations"]] == [
            (version, "MIGRATED")]
    applied = json.loads(_ok("-c", str(config), "apply", "--all", "-d", "item=ink", "--json"))
    assert [(m["version"], m["name"], m["state"]) for m in applied["migrations"]] == [
        (3, "Step 3", "MIGRATED"), (4, "Step 4", "MIGRATED"), (5, "Step 5", "MIGRATED")]
    info = _info(config)
    assert info["currentVersion"] == "5"
    rows = {row["version"]: row for row in info["migrations"]}
    assert rows[2]["previousVersion"] == "1" and rows[1]["previousVersion"] == "<none>"
    assert rows[1]["checksum"] == hashlib.md5(Path(first["file"]).read_bytes()).hexdigest()
    assert "MIGRATED" in _ok("-c", str(config), "info")
    _ok("-c", str(config), "validate")

    Path(first["file"]).write_text(Path(first["file"]).read_text() + "-- changed\n")
    changed = migrations("-c", str(config), "validate", "--json")
    assert changed.returncode == 1 and "does not match the checksum" in changed.stderr
    assert json.loads(changed.stdout)["valid"] is False

    _ok("-c", str(config), "destroy-metadata")
    assert f"MIG_EVENTS_{suffix}" not in _sources(spark_node, "STREAMS")
    assert f"MIG_VERSIONS_{suffix}" not in _sources(spark_node, "TABLES")


def test_a_failing_migration_is_recorded_and_applied_again(spark_node: ServerProcess,
                                                           tmp_path: Path) -> None:
    config, suffix = _new_project(tmp_path, spark_node)
    _ok("-c", str(config), "initialize-metadata")
    migrations_dir = tmp_path / "project" / "migrations"
    (migrations_dir / "V000001__Types.sql").write_text(
        f"CREATE TYPE ADDR_{suffix} AS STRUCT<CITY STRING>;\n")
    broken = migrations_dir / "V000002__Drop_missing.sql"
    broken.write_text(f"DROP STREAM NOPE_{suffix};\n")
    (migrations_dir / "V000003__Later.sql").write_text(f"DROP TYPE ADDR_{suffix};\n")

    failed = migrations("-c", str(config), "apply", "--all")
    assert failed.returncode == 1
    assert f"Failed to execute sql: DROP STREAM NOPE_{suffix};" in failed.stderr
    rows = {row["version"]: row for row in _info(config)["migrations"]}
    assert [rows[v]["state"] for v in (1, 2, 3)] == ["MIGRATED", "ERROR", "PENDING"]
    assert "does not exist" in rows[2]["errorReason"]

    dry = json.loads(_ok("-c", str(config), "apply", "--until", "2", "--dry-run", "--json"))
    assert [m["version"] for m in dry["migrations"]] == [2] and dry["dryRun"] is True
    broken.write_text(f"DROP STREAM IF EXISTS NOPE_{suffix};\n")
    again = json.loads(_ok("-c", str(config), "apply", "--until", "2", "--json"))
    assert [(m["version"], m["state"]) for m in again["migrations"]] == [(2, "MIGRATED")]
    _ok("-c", str(config), "destroy-metadata")


def test_an_unreachable_server_is_named_and_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "ksql-migrations.properties"
    config.write_text("ksql.server.url=http://127.0.0.1:9\n")
    result = migrations("-c", str(config), "info")
    assert result.returncode == 2 and "http://127.0.0.1:9" in result.stderr
