"""Every saved planner version's plans run on this release: the cases of each version that
cover every plan shape and format (``integration.plans.shape_sample``; a case two versions
planned alike once), each run from its stored plans by ``metastore test``'s runner on the real
broker, Spark and Schema Registry, must give the records ksqlDB's case expects; ``python -m
integration.plans replay`` runs all of them (CI does, after the suite). A stored plan, not the
SQL, is what runs: a plan this release cannot read is the case's error."""

from __future__ import annotations

import dataclasses

import pytest

from integration.plans import as_tests, run_cases, saved_cases, saved_versions, shape_sample
from metastore.dev.schema_registry import SchemaRegistryState
from metastore.testing.runner import ERROR, PASSED

# The runs start a SparkSession of their own in this process and register subjects in the
# registry: they share the registry's worker with the tests that count what runs leave there.
pytestmark = [pytest.mark.usefixtures("own_spark"), pytest.mark.xdist_group("schema-registry")]


def test_every_saved_versions_plans_replay_to_the_records_they_were_saved_with(
        kafka_bootstrap: str, registry: SchemaRegistryState) -> None:
    samples = {version: as_tests(shape_sample(saved_cases(version)))
               for version in saved_versions()}
    [first, *_] = samples[saved_versions()[0]]
    # a case a later version planned as an earlier one did runs once
    distinct = {(test.test_id, test.plans): test for version in saved_versions()
                for test in samples[version]}
    assert first.plans is not None
    newer = dataclasses.replace(first, test_id="newer", plans=tuple(
        text.replace('"Step":1', '"Step":99') for text in first.plans))
    fewer = dataclasses.replace(first, test_id="fewer", plans=())
    tests = list(distinct.values())
    results = run_cases([*tests, newer, fewer], bootstrap=kafka_bootstrap,
                        registry_url=registry.url)
    failing = [(r.test_id, r.status, r.reason[:300]) for r in results[:len(tests)]
               if r.status != PASSED]
    assert failing == []
    assert all(len(sample) >= 15 for sample in samples.values())
    assert [(r.status, r.reason) for r in results[len(tests):]] == [
        (ERROR, "UnknownPlanVersionError: The query's stored plan uses Step v99, which this "
         "node does not know (it reads plan format 1); run it on a node of the release that "
         "wrote it, or a newer one."),
        (ERROR, f"StoredPlansError: the test keeps 0 plans; its statements create "
         f"{len(first.plans)} queries")]
