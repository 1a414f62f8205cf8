"""`metastore check FILE.sql`: validate a script offline, as a node would, without Kafka."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from cli.output import FUNCTION_MODULE_HELP, load_function_modules, print_json
from metastore.testing.check import catalog_json, run_script


def check(
    file: Annotated[Path, typer.Argument(help="A .sql file of ksqlDB statements ('-' for stdin).")],
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    catalog: Annotated[bool, typer.Option("--catalog", help="Also print the final catalog.")] = False,
    function_module: Annotated[list[str] | None, typer.Option(
        "--function-module", help=FUNCTION_MODULE_HELP)] = None,
) -> None:
    """Run a script's statements against an empty catalog; exit 1 at the first failure."""
    load_function_modules(function_module)
    try:
        text = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        typer.echo(f"Error: cannot read {file}: {error}", err=True)
        raise typer.Exit(2) from error
    results, image = run_script(text)
    ok = all(r.ok for r in results)
    if json_output:
        output: list[dict[str, object]] = [r.to_json() for r in results]
        if catalog:
            output.append(catalog_json(image))
        print_json(output)
    else:
        for result in results:
            first_line = result.statement.splitlines()[0] if result.statement else ""
            mark = "ok  " if result.ok else "FAIL"
            typer.echo(f"{mark} {first_line[:100]}")
            if not result.ok:
                typer.echo(f"     {result.error_code}: {result.message}")
        if catalog:
            for source in catalog_json(image)["catalog"]["sources"]:
                typer.echo(f"{source['type']:<6} {source['name']}: {source['schema']}")
        typer.echo(f"{sum(r.ok for r in results)} ok, {sum(not r.ok for r in results)} failed")
    raise typer.Exit(0 if ok else 1)
