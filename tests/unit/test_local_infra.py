"""Pure pieces of the local infrastructure."""

from __future__ import annotations

from pathlib import Path

import pytest

from metastore.dev.kafka_cluster import new_cluster_id


def test_cluster_ids_never_look_like_options() -> None:
    ids = {new_cluster_id() for _ in range(5000)}
    assert len(ids) == 5000
    assert not any(cluster_id.startswith("-") for cluster_id in ids)
    assert all(len(cluster_id) == 22 for cluster_id in ids)


def test_the_spark_connector_follows_the_pyspark_the_checkout_pins() -> None:
    import pyspark

    from metastore.dev import jars, prefetch

    assert prefetch.pinned_spark_version() == pyspark.__version__  # what pip installed
    assert jars.spark_kafka_connector(prefetch.pinned_spark_version()) == (
        jars.spark_kafka_connector())
    assert prefetch.pinned_spark_version(Path("/nonexistent/pyproject.toml")) is None


def test_dev_fetch_builds_the_optional_components_only_when_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from cli import dev
    from cli.main import app
    from metastore.dev import prefetch

    ran: list[list[str]] = []
    monkeypatch.setattr(prefetch, "run", lambda steps, say: ran.append([n for n, _ in steps]))
    monkeypatch.setattr(dev, "schema_registry_built", lambda: False)
    plain = CliRunner().invoke(app, ["dev", "fetch"])
    everything = CliRunner().invoke(app, ["dev", "fetch", "--all"])
    monkeypatch.setattr(dev, "schema_registry_built", lambda: True)
    built = CliRunner().invoke(app, ["dev", "fetch"])
    assert plain.exit_code == everything.exit_code == built.exit_code == 0, plain.output
    core = ["the Kafka broker jars", "the Spark connector jars", "the project's JVM classes"]
    assert ran == [core, [*core, "the local Schema Registry",
                          "the Kafka Connect worker and its plugins"], core]
    assert "built the first time it is needed" in plain.output
    assert "built the first time" not in everything.output + built.output


def test_prefetch_runs_with_the_standard_library_alone(tmp_path: Path) -> None:
    """The bootstrap runs it with the system Python, before pip installed anything."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    probe = ("import sys; import metastore.dev.prefetch, metastore.dev.schema_registry, "
             "metastore.dev.jvm_build; "
             "print(sorted(m.split('.')[0] for m in sys.modules if m.split('.')[0] in "
             "{'pyspark', 'confluent_kafka', 'typer', 'pydantic', 'fastapi', 'httpx'}))")
    done = subprocess.run([sys.executable, "-S", "-c", probe], cwd=root, capture_output=True,
                          text=True, check=True, env={"PYTHONPATH": str(root)})
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def _module(root: Path, source: str) -> Path:
    module = root / "jvm"
    (module / "src" / "main" / "java" / "io").mkdir(parents=True, exist_ok=True)
    (module / "pom.xml").write_text("<project/>")
    (module / "src" / "main" / "java" / "io" / "A.java").write_text(source)
    return module


def test_a_node_refuses_jars_missing_or_built_from_other_sources(tmp_path: Path) -> None:
    import json

    from metastore.jvm.exceptions import JvmJarsError
    from metastore.jvm.jars import PROJECT_JAR, STAMP, checked_jar, module_stamp

    module = _module(tmp_path, "class A {}")
    jars_dir = tmp_path / "jars"
    jars_dir.mkdir()
    with pytest.raises(JvmJarsError) as missing:
        checked_jar(PROJECT_JAR, "4.2.0", jars_dir, module)
    assert missing.value.reason == "missing"
    assert "metastore.dev.prefetch" in missing.value.message
    (jars_dir / PROJECT_JAR).write_bytes(b"PK")
    (jars_dir / STAMP).write_text(json.dumps(module_stamp("4.2.0", module)))
    assert checked_jar(PROJECT_JAR, "4.2.0", jars_dir, module) == jars_dir / PROJECT_JAR
    with pytest.raises(JvmJarsError) as other_spark:
        checked_jar(PROJECT_JAR, "4.1.0", jars_dir, module)
    assert other_spark.value.reason == "stale"
    _module(tmp_path, "class A { int changed; }")
    with pytest.raises(JvmJarsError) as edited:
        checked_jar(PROJECT_JAR, "4.2.0", jars_dir, module)
    assert edited.value.reason == "stale"
    test_source = module / "src" / "test" / "java" / "ATest.java"
    test_source.parent.mkdir(parents=True)
    test_source.write_text("class ATest {}")
    (jars_dir / STAMP).write_text(json.dumps(module_stamp("4.2.0", module)))
    test_source.write_text("class ATest { int more; }")  # tests do not change the jars
    assert checked_jar(PROJECT_JAR, "4.2.0", jars_dir, module) == jars_dir / PROJECT_JAR


def test_installed_jars_without_a_module_are_taken_as_built(tmp_path: Path) -> None:
    from metastore.jvm.jars import FILE_SYSTEM_JAR, checked_jar

    (tmp_path / FILE_SYSTEM_JAR).write_bytes(b"PK")
    assert checked_jar(FILE_SYSTEM_JAR, "4.2.0", tmp_path, tmp_path / "no-module") == (
        tmp_path / FILE_SYSTEM_JAR)


def test_the_checkouts_jars_are_built_from_its_module() -> None:
    """What the bootstrap built is what a node of this checkout loads."""
    import pyspark

    from metastore.jvm import jars

    assert jars.CHECKOUT_MODULE.is_dir()
    assert jars.project_jar().is_file() and jars.file_system_jar().is_file()
    assert jars.built_stamp() == jars.module_stamp(pyspark.__version__)
