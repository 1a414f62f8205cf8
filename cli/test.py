"""`metastore test`: run ksqlDB query tests (inputs in, expected outputs out) on Kafka and Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.options import Kafka, kafka_client
from cli.output import FUNCTION_MODULE_HELP, load_function_modules, print_json, print_table
from metastore.core.exceptions import MetastoreError
from metastore.testing import cases
from metastore.testing.runner import CaseResult
from metastore.testing.session import kafka_bootstrap, run_tests, schema_registry_url


def test(
    files: Annotated[list[Path] | None, typer.Argument(
        help="ksqlDB test files ({\"tests\": [...]}) or JSON Lines, one test a line.")] = None,
    sql_file: Annotated[Path | None, typer.Option(
        "--sql-file", help="ksql-test-runner: the statements.")] = None,
    input_file: Annotated[Path | None, typer.Option(
        "--input-file", help="ksql-test-runner: {\"inputs\": [...]}.")] = None,
    output_file: Annotated[Path | None, typer.Option(
        "--output-file", help="ksql-test-runner: {\"outputs\": [...]}.")] = None,
    select: Annotated[list[str] | None, typer.Option(
        "--select", "-k", help="Only tests whose id contains this text (repeatable).")] = None,
    bootstrap_servers: Annotated[str | None, typer.Option(
        "--bootstrap-servers", help="Kafka (default: $KAFKA_BOOTSTRAP_SERVERS, else the local "
        "broker of `metastore dev kafka start`, started if needed).")] = None,
    registry_url: Annotated[str | None, typer.Option(
        "--schema-registry-url", help="A Confluent-compatible Schema Registry for the AVRO, "
        "PROTOBUF and JSON_SR tests (default: $METASTORE_SCHEMA_REGISTRY_URL, else the local "
        "one, started if a test needs it).")] = None,
    query_timeout: Annotated[float, typer.Option(
        "--query-timeout", help="Seconds a query may take to process a test's inputs.")] = 120.0,
    parallel: Annotated[int, typer.Option(
        "--parallel", help="Tests run at once, on the one SparkSession (each on topics of its "
        "own).", min=1, max=8)] = 1,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    function_module: Annotated[list[str] | None, typer.Option(
        "--function-module", help=FUNCTION_MODULE_HELP)] = None,
    kafka: Kafka = None,
) -> None:
    """Run query tests on real Kafka and Spark; exit 0 only when every test passes."""
    load_function_modules(function_module)
    if query_timeout < 1:
        typer.echo("Error: --query-timeout must be at least 1 second.", err=True)
        raise typer.Exit(2)
    try:
        if sql_file is not None:
            tests = [cases.load_runner_files(sql_file, input_file, output_file)]
        elif files:
            tests = cases.load(files)
        else:
            typer.echo("Error: give test files, or --sql-file with --input-file and "
                       "--output-file.", err=True)
            raise typer.Exit(2)
    except cases.CaseFileError as error:
        typer.echo(f"Error: {error}", err=True)
        raise typer.Exit(2) from error
    if select:
        tests = [t for t in tests if any(s in t.test_id for s in select)]
    if not tests:
        typer.echo("Error: no tests to run.", err=True)
        raise typer.Exit(2)

    def progress(index: int, total: int, result: CaseResult) -> None:
        typer.echo(f"[{index}/{total}] {result.status:<7} {result.seconds:5.1f}s "
                   f"{result.test_id}", err=True)

    try:
        report = run_tests(tests, kafka_bootstrap(bootstrap_servers), progress,
                           query_timeout=query_timeout, parallel=parallel,
                           registry_url=schema_registry_url(registry_url, tests),
                           kafka_client=kafka_client(kafka))
    except MetastoreError as error:
        typer.echo(f"Error: {error}", err=True)
        raise typer.Exit(2) from error
    if json_output:
        print_json(report.to_json())
    else:
        failing = [r for r in report.results if r.status != "passed"]
        if failing:
            print_table(["STATUS", "TEST", "REASON"],
                        [[r.status, r.test_id, r.reason.splitlines()[0][:160] if r.reason else ""]
                         for r in failing])
        typer.echo(f"{report.passed}/{len(report.results)} passed")
    raise typer.Exit(0 if report.passed == len(report.results) else 1)
