"""ksqlDB's query tests with records that the dev records file does not hold, as test files for
``metastore test``: the same kinds of cases as the dev sample, none of them seen by it.

    git -C <ksql repository> archive HEAD ksqldb-functional-tests/src/test/resources \\
        | tar -x -C /tmp/ksql
    python -m integration.conformance.records_outside_dev \\
        /tmp/ksql/ksqldb-functional-tests/src/test/resources /tmp/outside
    metastore test /tmp/outside/*.json --json \\
        --function-module integration.conformance.ksql_test_functions > outside.json

Each query-validation test file that feeds records and checks outputs is written again with
only its tests (and format variants) that the dev file lacks; tests that expect an exception
are left out (``integration.conformance.ksql_suite`` checks those). Prints how many cases it wrote.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from integration.conformance.records_report import DEFAULT_RECORDS


def dev_cases(records: Path) -> set[tuple[str, str]]:
    """(file name, test name with its format variant) of every case of the dev records file."""
    cases = (json.loads(line) for line in records.read_text(encoding="utf-8").splitlines())
    return {(case["file"].rsplit("/", 1)[-1], case["name"]) for case in cases}


def outside(document: dict[str, Any], file: str, seen: set[tuple[str, str]]
            ) -> list[dict[str, Any]]:
    """The tests of one ksqlDB test file the dev file lacks (a test keeps only its unseen
    format variants)."""
    kept = []
    for test in document.get("tests", []):
        if "expectedException" in test or ("inputs" not in test and "outputs" not in test):
            continue
        formats = test.get("format")
        if formats:
            unseen = [f for f in formats if (file, f"{test['name']} - {f}") not in seen]
            if unseen:
                kept.append({**test, "format": unseen})
        elif (file, test["name"]) not in seen:
            kept.append(test)
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("resources", type=Path, help="ksqlDB's functional-test resources")
    parser.add_argument("out", type=Path, help="where the test files are written")
    parser.add_argument("--records", type=Path, default=DEFAULT_RECORDS)
    args = parser.parse_args()
    seen = dev_cases(args.records)
    args.out.mkdir(parents=True, exist_ok=True)
    cases = 0
    for path in sorted((args.resources / "query-validation-tests").glob("*.json")):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        kept = outside(document, path.name, seen)
        if kept:
            (args.out / path.name).write_text(json.dumps({**document, "tests": kept}))
            cases += sum(len(test.get("format") or [None]) for test in kept)
    print(f"{cases} cases outside the dev records file, in {args.out}")


if __name__ == "__main__":
    main()
