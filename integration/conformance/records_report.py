"""Pass rates of a `metastore test --json` report over ksqlDB's records file, by family.

``python -m integration.conformance.records_report REPORT.json [RECORDS.jsonl] [--reasons N] [--file F]``
prints the overall and plain-format rates (plain: KAFKA, JSON, DELIMITED or NONE only), those of
files without joins or windows (by name) and of stateless cases (no JOIN, WINDOW or HAVING, no
query reading a table's changelog), the Schema Registry cases by format, the rate per test file,
and the most common reasons a test did not pass.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path
from typing import Any

DEFAULT_RECORDS = Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / (
    "ksql-records-dev.jsonl")
PLAIN = {"KAFKA", "JSON", "DELIMITED", "NONE"}
NO_REGISTRY = PLAIN | {"PROTOBUF_NOSR"}
REGISTRY_FORMATS = ("AVRO", "PROTOBUF", "JSON_SR")
STATEFUL = re.compile(r"\bJOIN\b|\bWINDOW\b|\bHAVING\b", re.IGNORECASE)


def is_plain(case: dict[str, Any]) -> bool:
    return set(case["formats"]) <= PLAIN and not case["needs_schema_registry"]


def needs_no_registry(case: dict[str, Any]) -> bool:
    """Plain formats or PROTOBUF_NOSR: formats that need no Schema Registry (the 644 cases the
    records file's README counts as plain)."""
    return set(case["formats"]) <= NO_REGISTRY and not case["needs_schema_registry"]


STATEFUL_FILES = re.compile(r"join|window|suppress", re.IGNORECASE)
_TABLE = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?`?(\w+)",
                    re.IGNORECASE)
_FROM = re.compile(r"\bFROM\s+`?(\w+)", re.IGNORECASE)


def is_stateless(case: dict[str, Any]) -> bool:
    """No JOIN, WINDOW or HAVING, and no query reading a table's changelog."""
    text = " ".join(case["statements"])
    tables = {name.upper() for name in _TABLE.findall(text)}
    reads_table = any(name.upper() in tables for name in _FROM.findall(text))
    return not STATEFUL.search(text) and not reads_table


def in_stateless_file(case: dict[str, Any]) -> bool:
    """The case's test file is not one of joins or windows (by its name)."""
    return not STATEFUL_FILES.search(case["file"].split("/")[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("report", type=Path)
    parser.add_argument("records", type=Path, nargs="?", default=DEFAULT_RECORDS)
    parser.add_argument("--reasons", type=int, default=25)
    parser.add_argument("--file", help="only cases of this test file (substring)")
    args = parser.parse_args()
    cases = {c["id"]: c for c in map(json.loads, args.records.read_text().splitlines())}
    results = {r["id"]: r for r in json.loads(args.report.read_text())["cases"]}

    def rate(label: str, chosen: list[str]) -> None:
        passed = sum(results.get(i, {}).get("status") == "passed" for i in chosen)
        print(f"{label:<44} {passed:>4}/{len(chosen):<4} {100 * passed / max(len(chosen), 1):5.1f}%")

    plain = [i for i, c in cases.items() if is_plain(c)]
    rate("all cases", list(cases))
    rate("plain-format cases", plain)
    rate("plain-format, files without joins/windows", [i for i in plain
                                                        if in_stateless_file(cases[i])])
    rate("plain-format, stateless cases", [i for i in plain if is_stateless(cases[i])])
    no_registry = [i for i, c in cases.items() if needs_no_registry(c)]
    rate("no-registry cases (plain + PROTOBUF_NOSR)", no_registry)
    rate("no-registry, files without joins/windows", [i for i in no_registry
                                                       if in_stateless_file(cases[i])])
    registry = [i for i in cases if not needs_no_registry(cases[i])]
    rate("Schema Registry cases", registry)
    for fmt in REGISTRY_FORMATS:  # a case counts under each registry format it uses
        rate(f"  using {fmt}", [i for i in registry if fmt in cases[i]["formats"]])
    statuses = collections.Counter(results[i]["status"] for i in plain if i in results)
    print("plain-format statuses:", dict(statuses))
    def per_file(label: str, chosen: list[str]) -> None:
        by_file: dict[str, list[str]] = collections.defaultdict(list)
        for i in chosen:
            by_file[cases[i]["file"].split("/")[-1]].append(i)
        print(f"\nper file ({label}):")
        for name, ids in sorted(by_file.items(), key=lambda item: -len(item[1])):
            if args.file is None or args.file in name:
                rate(f"  {name}", ids)

    per_file("plain-format cases", plain)
    per_file("Schema Registry cases", registry)
    reasons = collections.Counter()
    for i in plain:
        result = results.get(i)
        if result and result["status"] != "passed" and (args.file is None or args.file in i):
            text = re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "_", result["reason"].splitlines()[0])
            reasons[f"{result['status']}: {text[:150]}"] += 1
    print("\ncommon reasons:")
    for reason, count in reasons.most_common(args.reasons):
        print(f"{count:>4}  {reason}")


if __name__ == "__main__":
    main()
