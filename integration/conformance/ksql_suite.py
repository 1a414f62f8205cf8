"""Run every statement test of ksqlDB's own test files through ``metastore check``.

The development set (shared/conformance) is a sample; this measures the same rules on all of
ksqlDB's query-validation and REST query-validation test files, read from a copy of ksqlDB's
repository::

    git -C <ksql repository> archive HEAD ksqldb-functional-tests/src/test/resources \\
        | tar -x -C /tmp/ksql
    python -m integration.conformance.ksql_suite /tmp/ksql/ksqldb-functional-tests/src/test/resources

Each test (per format variant) counts once: a test expecting an error passes when a statement
fails with the expected text in its message; any other test passes when every statement is
accepted and each source it lists afterwards has the schema ksqlDB derives. Failures are grouped
by outcome; ``--failures N`` prints them. Records are not run (``metastore test`` does that).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metastore.engine import overrides
from metastore.functions import extensions
from metastore.testing.check import run_script
from metastore.testing.post import normalise_schema

SUITES = ("query-validation-tests", "rest-query-validation-tests")


@dataclass(frozen=True)
class Outcome:
    file: str
    name: str
    verdict: str
    """``pass``, ``accepted`` (an error was expected), ``refused``, ``message`` or ``schema``."""
    detail: str = ""


def tests(root: Path) -> Iterator[tuple[str, str, list[str], dict[str, Any]]]:
    """(file, name, statements, test) for every test and format variant under ``root``."""
    for suite in SUITES:
        for path in sorted((root / suite).glob("*.json")):
            try:
                document = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                continue
            for test in document.get("tests", []):
                for fmt in test.get("format") or [None]:
                    statements = [s.replace("{FORMAT}", fmt) if fmt else s
                                  for s in test.get("statements", [])]
                    name = f"{test.get('name', '')}{f' - {fmt}' if fmt else ''}"
                    yield f"{suite}/{path.name}", name, statements, test


def evaluate(file: str, name: str, statements: list[str], test: dict[str, Any]) -> Outcome:
    script = "\n".join(s if s.rstrip().endswith(";") else s + ";" for s in statements)
    try:
        config = overrides.resolve(test.get("properties"), strict=False)
    except overrides.ConfigError:
        config = None
    results, image = run_script(script, runtime_check=False, config=config)
    failed = next((r for r in results if not r.ok), None)
    expected = test.get("expectedException") or test.get("expectedError")
    if expected:
        if failed is None:
            return Outcome(file, name, "accepted")
        wanted = expected.get("message") or ""
        if wanted not in failed.message:
            return Outcome(file, name, "message", f"{failed.message[:200]!r} wanted {wanted[:200]!r}")
        return Outcome(file, name, "pass")
    if failed is not None:
        return Outcome(file, name, "refused", failed.message[:200])
    for source in (test.get("post") or {}).get("sources") or []:
        actual = image.sources.get(str(source.get("name", "")).upper())
        if "schema" not in source or actual is None:
            continue
        if normalise_schema(source["schema"]) != normalise_schema(actual.schema_text()):
            return Outcome(file, name, "schema",
                           f"{actual.schema_text()[:200]!r} wanted {source['schema'][:200]!r}")
    return Outcome(file, name, "pass")


TEST_FUNCTIONS = "integration.conformance.ksql_test_functions"
"""ksqlDB's test UDFs, on the classpath of ksqlDB's own test harness."""


def load_test_functions() -> None:
    """Load ksqlDB's test UDFs, as its harness has them, saying which."""
    added = extensions.load([TEST_FUNCTIONS])
    if added:
        print(f"function module {TEST_FUNCTIONS}: ksqlDB's test functions {', '.join(added)}",
              file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path, help="ksqldb-functional-tests/src/test/resources")
    parser.add_argument("--failures", type=int, default=0, help="print up to N failing tests")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    load_test_functions()
    if not all((args.root / suite).is_dir() for suite in SUITES):
        print(f"no {' or '.join(SUITES)} under {args.root}", file=sys.stderr)
        return 2
    outcomes = [evaluate(*test) for test in tests(args.root)]
    counts = Counter(outcome.verdict for outcome in outcomes)
    summary = {"tests": len(outcomes), **{k: counts.get(k, 0) for k in
                                          ("pass", "accepted", "refused", "message", "schema")}}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{summary['pass']}/{summary['tests']} tests pass "
              f"({100 * summary['pass'] / max(summary['tests'], 1):.1f}%); failing: "
              f"{summary['accepted']} accepted though ksqlDB refuses, {summary['refused']} refused "
              f"though ksqlDB accepts, {summary['message']} with another message, "
              f"{summary['schema']} with another schema")
    for outcome in [o for o in outcomes if o.verdict != "pass"][:args.failures]:
        print(f"- {outcome.verdict} {outcome.file}::{outcome.name}: {outcome.detail}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
