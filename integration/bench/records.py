"""ksqlDB's query tests through ``metastore test``: how long the plain-format cases take, and how
many pass.

Runs the plain-format cases (KAFKA, JSON, DELIMITED, NONE) of the dev records file as one
``metastore test --json`` process (one SparkSession, the local Kafka or
``KAFKA_BOOTSTRAP_SERVERS``) and reports the wall time, the time per case by status, and the
pass rates (all plain cases; those of files without joins or windows; stateless cases). ``--quick`` runs every
tenth case.
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

from integration.records_report import (
    DEFAULT_RECORDS,
    in_stateless_file,
    is_plain,
    is_stateless,
)


def run(quick: bool) -> dict[str, Any]:
    cases = [c for c in map(json.loads, DEFAULT_RECORDS.read_text().splitlines()) if is_plain(c)]
    if quick:
        cases = cases[::10]
    with tempfile.TemporaryDirectory(prefix="records-bench-") as directory:
        chosen = Path(directory) / "plain.jsonl"
        chosen.write_text("".join(json.dumps(c) + "\n" for c in cases))
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "cli.main", "test", str(chosen), "--json"],
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"metastore test failed: {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    results = {r["id"]: r for r in report["cases"]}
    stateless = [c["id"] for c in cases if is_stateless(c)]
    plain_files = [c["id"] for c in cases if in_stateless_file(c)]
    by_status: dict[str, list[float]] = {}
    for result in report["cases"]:
        by_status.setdefault(result["status"], []).append(result["seconds"])
    return {
        "cases": len(cases),
        "wall_seconds": round(wall, 1),
        "passed": report["passed"],
        "passed_in_files_without_joins_or_windows": [
            sum(results[i]["status"] == "passed" for i in plain_files), len(plain_files)],
        "passed_stateless": [
            sum(results[i]["status"] == "passed" for i in stateless), len(stateless)],
        "seconds_per_case": {status: {"count": len(times), "mean": round(statistics.mean(times), 2)}
                             for status, times in sorted(by_status.items())},
    }
