"""Run ksqlDB's own DDL test cases through ``metastore check`` and report pass rates.

``python -m integration.conformance [PATH] [--failures N] [--json]``. The cases' format is described
in shared/conformance/README.md. Verdict (the right statement fails, or all succeed) and message
(the expected substring) are scored separately; schema cases compare each expected source.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from integration.conformance.ksql_suite import load_test_functions
from metastore.engine import overrides
from metastore.testing.check import run_script
from metastore.testing.post import normalise_schema

DEFAULT_PATH = Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / "ksql-dev.jsonl"


@dataclass
class CaseResult:
    case_id: str
    kind: str
    pure_ddl: bool
    verdict: bool
    message: bool | None
    detail: str = ""
    runtime_refused: bool = False
    """A schema case ksqlDB accepts, derived right, that the Spark runtime cannot run."""
    needs_schema_registry: bool = False
    """ksqlDB derived the case's columns from schemas registered in a Schema Registry."""


@dataclass
class Report:
    results: list[CaseResult] = field(default_factory=list)

    def rate(self, kind: str, pure: bool | None, what: str) -> tuple[int, int]:
        chosen = [r for r in self.results if r.kind == kind and (pure is None or r.pure_ddl == pure)]
        if what == "verdict":
            return sum(r.verdict for r in chosen), len(chosen)
        return sum(bool(r.verdict and r.message) for r in chosen), len(chosen)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for kind, pure, label in (("error", True, "pure_ddl_error"), ("error", False, "query_error"),
                                  ("schema", None, "schema")):
            passed, total = self.rate(kind, pure, "verdict")
            out[f"{label}_verdict"] = [passed, total]
            if kind == "error":
                passed, total = self.rate(kind, pure, "message")
                out[f"{label}_verdict_and_message"] = [passed, total]
        schema = [r for r in self.results if r.kind == "schema"]
        without_registry = [r for r in schema if not r.needs_schema_registry]
        out["schema_verdict_without_schema_registry"] = [
            sum(r.verdict for r in without_registry), len(without_registry)]
        out["schema_verdict_runnable_on_spark"] = [
            sum(r.verdict and not r.runtime_refused for r in schema), len(schema)]
        return out


def evaluate(case: dict[str, Any]) -> CaseResult:
    script = "\n".join(s if s.rstrip().endswith(";") else s + ";" for s in case["statements"])
    try:  # the case's configuration overrides, resolved as ksqlDB's test driver does
        config = overrides.resolve(case.get("properties"), strict=False)
    except overrides.ConfigError:
        config = None
    results, image = run_script(script, runtime_check=False, config=config)  # its catalog rules
    failed = next((i for i, r in enumerate(results) if not r.ok), None)
    base = dict(case_id=case["id"], kind=case["kind"], pure_ddl=bool(case.get("pure_ddl")),
                needs_schema_registry=bool(case.get("needs_schema_registry")))
    if case["kind"] == "error":
        expected_index = case.get("failing_statement_index")
        if failed is None:
            return CaseResult(**base, verdict=False, message=False, detail="no statement failed")
        parse_failure = (len(results) == 1 and results[0].error_code == 40001
                         and "Syntax Error" in results[0].message)
        verdict = expected_index is None or failed == expected_index or parse_failure
        expected = (case.get("expected_error") or {}).get("message", "")
        message = expected in results[failed].message
        return CaseResult(**base, verdict=verdict, message=message,
                          detail=f"failed at {failed} (expected {expected_index}): "
                                 f"{results[failed].message[:300]!r} expected {expected[:300]!r}")
    if failed is not None:
        return CaseResult(**base, verdict=False, message=None,
                          detail=f"statement {failed} failed: {results[failed].message[:300]!r}")
    for expected in case.get("expected_sources") or []:
        source = image.sources.get(expected["name"])
        if source is None:
            return CaseResult(**base, verdict=False, message=None,
                              detail=f"{expected['name']} missing")
        want = normalise_schema(expected.get("schema", ""))
        got = normalise_schema(source.schema_text())
        if want and want != got:
            return CaseResult(**base, verdict=False, message=None,
                              detail=f"{expected['name']}: schema {got!r} expected {want!r}")
        if expected.get("type") and expected["type"].upper() != source.kind.value:
            return CaseResult(**base, verdict=False, message=None, detail="kind differs")
        for key, actual in (("keyFormat", source.key_format), ("valueFormat", source.value_format)):
            wanted = expected.get(key)
            if isinstance(wanted, dict):
                wanted = wanted.get("format")
            if wanted and str(wanted).upper() != actual:
                return CaseResult(**base, verdict=False, message=None,
                                  detail=f"{key} {actual} expected {wanted}")
    runtime = next((r for r in run_script(script, config=config)[0] if not r.ok), None)
    return CaseResult(**base, verdict=True, message=None, runtime_refused=runtime is not None,
                      detail=runtime.message[:300] if runtime is not None else "")


def run(path: Path) -> Report:
    report = Report()
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                report.results.append(evaluate(json.loads(line)))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--failures", type=int, default=0, help="print up to N failing cases")
    parser.add_argument("--kind", choices=["error", "schema"], default=None)
    parser.add_argument("--pure", action="store_true", help="only pure-DDL cases")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    load_test_functions()
    report = run(args.path)
    summary = report.summary()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for key, (passed, total) in summary.items():
            print(f"{key:<40} {passed:>4}/{total:<4} {100 * passed / max(total, 1):5.1f}%")
    shown = 0
    for result in report.results:
        if shown >= args.failures:
            break
        if (args.kind and result.kind != args.kind) or (args.pure and not result.pure_ddl):
            continue
        if not result.verdict or result.message is False:
            print(f"- {result.case_id}: {result.detail}", file=sys.stderr)
            shown += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
