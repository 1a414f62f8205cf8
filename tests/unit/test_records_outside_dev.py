"""The cases of ksqlDB's test files that the dev records file lacks: what the held-out-style
measurement runs (integration.conformance.records_outside_dev)."""

from __future__ import annotations

from integration.conformance.records_outside_dev import outside


def test_only_unseen_tests_and_format_variants_are_kept() -> None:
    document = {"tests": [
        {"name": "seen", "inputs": [], "outputs": []},
        {"name": "unseen", "inputs": [], "outputs": []},
        {"name": "formats", "format": ["JSON", "AVRO"], "inputs": [], "outputs": []},
        {"name": "throws", "inputs": [], "outputs": [], "expectedException": {}},
        {"name": "statements only", "statements": []},
    ]}
    seen = {("f.json", "seen"), ("f.json", "formats - JSON"), ("g.json", "unseen")}
    kept = outside(document, "f.json", seen)
    assert [(t["name"], t.get("format")) for t in kept] == [("unseen", None),
                                                            ("formats", ["AVRO"])]
