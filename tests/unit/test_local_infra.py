"""Pure pieces of the local infrastructure."""

from __future__ import annotations

from pathlib import Path

import pytest

from metastore.local.kafka_cluster import new_cluster_id


def test_cluster_ids_never_look_like_options() -> None:
    ids = {new_cluster_id() for _ in range(5000)}
    assert len(ids) == 5000
    assert not any(cluster_id.startswith("-") for cluster_id in ids)
    assert all(len(cluster_id) == 22 for cluster_id in ids)


def test_the_spark_connector_follows_the_pyspark_the_checkout_pins() -> None:
    import pyspark

    from metastore.local import jars, prefetch

    assert prefetch.pinned_spark_version() == pyspark.__version__  # what pip installed
    assert jars.spark_kafka_connector(prefetch.pinned_spark_version()) == (
        jars.spark_kafka_connector())
    assert prefetch.pinned_spark_version(Path("/nonexistent/pyproject.toml")) is None


def test_dev_fetch_builds_the_schema_registry_only_when_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from cli import dev
    from cli.main import app
    from metastore.local import prefetch

    ran: list[list[str]] = []
    monkeypatch.setattr(prefetch, "run", lambda steps, say: ran.append([n for n, _ in steps]))
    monkeypatch.setattr(dev, "schema_registry_built", lambda: False)
    plain = CliRunner().invoke(app, ["dev", "fetch"])
    everything = CliRunner().invoke(app, ["dev", "fetch", "--all"])
    monkeypatch.setattr(dev, "schema_registry_built", lambda: True)
    built = CliRunner().invoke(app, ["dev", "fetch"])
    assert plain.exit_code == everything.exit_code == built.exit_code == 0, plain.output
    core = ["the Kafka broker jars", "the Spark connector jars", "the project's Java classes"]
    assert ran == [core, [*core, "the local Schema Registry"], core]
    assert "built the first time it is needed" in plain.output
    assert "built the first time" not in everything.output + built.output


def test_prefetch_runs_with_the_standard_library_alone(tmp_path: Path) -> None:
    """The bootstrap runs it with the system Python, before pip installed anything."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    probe = ("import sys; import metastore.local.prefetch, metastore.local.schema_registry; "
             "print(sorted(m.split('.')[0] for m in sys.modules if m.split('.')[0] in "
             "{'pyspark', 'confluent_kafka', 'typer', 'pydantic', 'fastapi', 'httpx'}))")
    done = subprocess.run([sys.executable, "-S", "-c", probe], cwd=root, capture_output=True,
                          text=True, check=True, env={"PYTHONPATH": str(root)})
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
