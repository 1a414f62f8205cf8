"""ksqlDB's own DDL cases (shared/conformance) through `metastore check`; prints the pass rates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from integration.conformance.ksql_suite import TEST_FUNCTIONS
from integration.conformance.statements import DEFAULT_PATH, run
from metastore.functions import extensions

CLI = [sys.executable, "-m", "cli.main"]


def test_conformance_pass_rates() -> None:
    """Guards the rates semantic analysis reached; the figures are in docs/conformance.md."""
    assert DEFAULT_PATH.is_file(), f"conformance cases missing at {DEFAULT_PATH}"
    loaded_before = TEST_FUNCTIONS in extensions.loaded()
    extensions.load([TEST_FUNCTIONS])  # ksqlDB's runner has its test functions on its classpath
    try:
        summary = run(DEFAULT_PATH).summary()
    finally:
        if not loaded_before:
            extensions.unload(TEST_FUNCTIONS)
    print("\nksqlDB conformance (development set):")
    for key, (passed, total) in summary.items():
        print(f"  {key:<38} {passed:>4}/{total:<4} {100 * passed / max(total, 1):5.1f}%")
    def rate(key: str) -> float:
        passed, total = summary[key]
        assert total > 0
        return passed / total

    assert rate("pure_ddl_error_verdict") == rate("pure_ddl_error_verdict_and_message") == 1.0
    assert rate("query_error_verdict") >= 0.9 and rate("query_error_verdict_and_message") >= 0.6
    assert rate("schema_verdict") >= 0.9


def test_check_cli_reports_each_statement_and_the_catalog(tmp_path: Path) -> None:
    script = tmp_path / "ok.sql"
    script.write_text("CREATE STREAM A (K INT KEY, V STRING) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='JSON');\n"
                      "SHOW STREAMS;\n")
    result = subprocess.run([*CLI, "check", str(script), "--json", "--catalog"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    assert [entry["ok"] for entry in output[:2]] == [True, True]
    assert output[0]["entity"]["commandStatus"]["message"] == "Stream created"
    assert output[1]["entity"]["streams"][0]["name"] == "A"
    assert output[2]["catalog"]["sources"] == [{
        "name": "A", "type": "STREAM", "schema": "K INTEGER KEY, V STRING", "keyFormat": "KAFKA",
        "valueFormat": "JSON", "topic": "a", "isSource": False}]


def test_check_cli_exit_codes(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE TABLE T (A INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');\nSHOW TABLES;")
    result = subprocess.run([*CLI, "check", str(bad), "--json"], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 1
    [entry] = json.loads(result.stdout)
    assert entry["ok"] is False and entry["error_code"] == 40001
    assert "Tables require a PRIMARY KEY" in entry["message"]
    missing = subprocess.run([*CLI, "check", str(tmp_path / "nope.sql")], capture_output=True,
                             text=True, check=False)
    assert missing.returncode == 2 and "cannot read" in missing.stderr
