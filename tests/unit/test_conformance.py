"""ksqlDB's own DDL cases (shared/conformance) through `metastore check`; prints the pass rates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from integration.conformance import DEFAULT_PATH, run

CLI = [sys.executable, "-m", "cli.main"]


def test_conformance_pass_rates() -> None:
    assert DEFAULT_PATH.is_file(), f"conformance cases missing at {DEFAULT_PATH}"
    summary = run(DEFAULT_PATH).summary()
    print("\nksqlDB conformance (development set):")
    for key, (passed, total) in summary.items():
        print(f"  {key:<38} {passed:>4}/{total:<4} {100 * passed / max(total, 1):5.1f}%")
    passed, total = summary["pure_ddl_error_verdict_and_message"]
    assert total > 0 and passed / total >= 0.9


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
