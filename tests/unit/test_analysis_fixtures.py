"""Data-driven tests of ksqlDB's semantic rules: one file per rule family in tests/data/analysis.

A data file is a script. Statements before its first directive set up the catalog; each
directive line applies to the statement after it, which runs against the set-up catalog alone:

- ``-- error: TEXT``: the statement is refused with a message containing TEXT;
- ``-- schema: NAME COLUMNS``: it is accepted and source NAME has exactly these columns, rendered
  as DESCRIBE lists them (``K INTEGER KEY, V STRING``);
- ``-- ok``: it is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from metastore.testing.check import run_script

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "analysis"


@dataclass(frozen=True)
class Case:
    family: str
    line: int
    directive: str
    expectation: str
    setup: str
    statement: str

    @property
    def id(self) -> str:
        return f"{self.family}:{self.line}"


def load(path: Path) -> list[Case]:
    setup: list[str] = []
    found: list[Case] = []
    pending: tuple[int, str, str] | None = None
    body: list[str] = []

    def close() -> None:
        nonlocal pending, body
        if pending is not None:
            found.append(Case(path.stem, pending[0], pending[1], pending[2], "\n".join(setup),
                              "\n".join(body).strip()))
        pending, body = None, []

    for number, line in enumerate(path.read_text().splitlines(), start=1):
        directive = next((d for d in ("error", "schema", "ok") if line.startswith(f"-- {d}")), None)
        if directive is not None:
            close()
            pending = (number, directive, line.split(":", 1)[1].strip() if ":" in line else "")
        elif line.startswith("--") or not line.strip():
            continue
        elif pending is None:
            setup.append(line)
        else:
            body.append(line)
    close()
    return found


CASES = [case for path in sorted(FIXTURES.glob("*.sql")) for case in load(path)]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_rule(case: Case) -> None:
    results, image = run_script(f"{case.setup}\n{case.statement}", runtime_check=False)
    setup_failure = next((r for r in results[:-1] if not r.ok), None)
    assert setup_failure is None, f"setup failed: {setup_failure.message}"
    last = results[-1]
    if case.directive == "error":
        assert not last.ok, f"accepted, expected: {case.expectation}"
        assert case.expectation in last.message
        return
    assert last.ok, last.message
    if case.directive == "schema":
        name, _, columns = case.expectation.partition(" ")
        source = image.sources[name.strip("`")]
        assert source.schema_text() == columns.strip()


def test_every_family_has_cases() -> None:
    assert CASES, "no data files found"
    for path in FIXTURES.glob("*.sql"):
        assert load(path), f"{path.name} holds no case"
