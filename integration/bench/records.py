"""ksqlDB's query tests through ``metastore test``: how long the dev records file's cases take,
and how many pass.

Runs every case of the dev records file as one ``metastore test --json`` process (one
SparkSession, the local Kafka or ``KAFKA_BOOTSTRAP_SERVERS``, the local Schema Registry or
``METASTORE_SCHEMA_REGISTRY_URL``) and reports the wall time, the time per case by status, and
the pass rates: of the plain-format cases (all, in files without joins or windows, stateless), of
the cases that need no registry (plain and PROTOBUF_NOSR, the 644 the file's README counts), and
of the Schema Registry cases by format (AVRO, PROTOBUF, JSON_SR; a case counts under each it
uses). ``--quick`` runs every tenth case. The run's own report (every case's status and reason)
is kept in ``.cache/bench/records-report.json`` for ``python -m integration.conformance.records_report``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from integration.conformance.records_report import (
    DEFAULT_RECORDS,
    REGISTRY_FORMATS,
    in_stateless_file,
    is_plain,
    is_stateless,
    needs_no_registry,
)

REPORT = Path(__file__).resolve().parents[2] / ".cache" / "bench" / "records-report.json"
TEST_FUNCTIONS = "integration.conformance.ksql_test_functions"
"""ksqlDB's test UDFs, on the classpath of ksqlDB's own test harness: loaded by the run."""


def run(quick: bool) -> dict[str, Any]:
    cases = [json.loads(line) for line in DEFAULT_RECORDS.read_text().splitlines()]
    if quick:
        cases = cases[::10]
    with tempfile.TemporaryDirectory(prefix="records-bench-") as directory:
        chosen = Path(directory) / "cases.jsonl"
        chosen.write_text("".join(json.dumps(c) + "\n" for c in cases))
        print(f"metastore test --function-module {TEST_FUNCTIONS}: ksqlDB's test functions "
              "loaded, as its harness has them", file=sys.stderr)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "cli.main", "test", str(chosen), "--json",
                               "--function-module", TEST_FUNCTIONS],
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"metastore test failed: {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(done.stdout)
    results = {r["id"]: r for r in report["cases"]}
    plain = [c for c in cases if is_plain(c)]
    stateless = [c["id"] for c in plain if is_stateless(c)]
    plain_files = [c["id"] for c in plain if in_stateless_file(c)]
    no_registry_files = [c["id"] for c in cases if in_stateless_file(c)]

    def passed(ids: list[str]) -> list[int]:
        return [sum(results[i]["status"] == "passed" for i in ids), len(ids)]

    by_status: dict[str, list[float]] = {}
    for result in report["cases"]:
        by_status.setdefault(result["status"], []).append(result["seconds"])
    return {
        "report": str(REPORT),
        "cases": len(cases),
        "wall_seconds": round(wall, 1),
        "passed": report["passed"],
        "passed_plain": passed([c["id"] for c in plain]),
        "passed_plain_in_files_without_joins_or_windows": passed(plain_files),
        "passed_plain_stateless": passed(stateless),
        "passed_no_registry_in_files_without_joins_or_windows": passed(no_registry_files),
        "passed_no_registry": passed([c["id"] for c in cases if needs_no_registry(c)]),
        "passed_schema_registry_by_format": {
            fmt: passed([c["id"] for c in cases if not needs_no_registry(c)
                         and fmt in c["formats"]]) for fmt in REGISTRY_FORMATS},
        "seconds_per_case": {status: {"count": len(times), "mean": round(statistics.mean(times), 2)}
                             for status, times in sorted(by_status.items())},
    }
