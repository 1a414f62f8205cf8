"""Client commands: exec, run-script, describe, list, query, status (and ``shell``, from
:mod:`cli.shell`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from cli.client import ClientError, KsqlClient, StatementFailedError, server_url
from cli.options import Json, Property, Server, User, basic_auth
from cli.output import print_json, print_table
from cli.render import render_entity
from cli.shell import main as shell_main
from cli.shell.script import ScriptError, read_script
from cli.stream import print_lines, print_rows

T = TypeVar("T")
shell = shell_main.shell
"""``metastore shell``, registered by :mod:`cli.main` with the commands here."""


@contextlib.contextmanager
def connected(server: str | None, user: str | None) -> Iterator[KsqlClient]:
    client = KsqlClient(server_url(server), auth=basic_auth(user))
    try:
        yield client
    finally:
        client.close()


def run_or_exit(action: Callable[[], T]) -> T:
    """Run a client action; statement errors exit 1, connection and usage errors exit 2."""
    try:
        return action()
    except StatementFailedError as error:
        typer.echo(f"Error {error.error_code}: {error.message}", err=True)
        raise typer.Exit(1) from error
    except ClientError as error:
        typer.echo(f"Error: {error}", err=True)
        raise typer.Exit(2) from error


def properties_of(given: list[str] | None) -> dict[str, str]:
    """``--property NAME=VALUE`` options as a request's ``streamsProperties``."""
    found: dict[str, str] = {}
    for item in given or []:
        name, equals, value = item.partition("=")
        if not equals or not name.strip():
            typer.echo(f"Error: --property takes NAME=VALUE, got {item!r}", err=True)
            raise typer.Exit(2)
        found[name.strip()] = value
    return found


def show(entities: Any, json_output: bool) -> None:
    if json_output:
        print_json(entities)
        return
    for entity in entities if isinstance(entities, list) else [entities]:
        render_entity(entity)


def exec_(sql: Annotated[str, typer.Argument(help="Statements, each ending in ';'.")],
          server: Server = None, json_output: Json = False, user: User = None,
          command_sequence_number: Annotated[int | None, typer.Option(
              "--command-sequence-number", help="Wait until this command is applied first.")] = None,
          prop: Property = None) -> None:
    """Run statements on a node."""
    properties = properties_of(prop)
    with connected(server, user) as client:
        show(run_or_exit(lambda: client.ksql(sql, command_sequence_number,
                                             properties=properties)), json_output)


def run_script(file: Annotated[Path, typer.Argument(help="A .sql file.")], server: Server = None,
               json_output: Json = False, user: User = None, prop: Property = None) -> None:
    """Run a file of statements on a node, as one atomic request."""
    properties = properties_of(prop)
    try:
        text = read_script(file)
    except ScriptError as error:
        typer.echo(f"Error: {error}", err=True)
        raise typer.Exit(2) from error
    with connected(server, user) as client:
        show(run_or_exit(lambda: client.ksql(text, properties=properties)), json_output)


def describe(name: Annotated[str, typer.Argument(help="Stream or table name.")],
             extended: Annotated[bool, typer.Option(help="Show runtime details.")] = False,
             server: Server = None, json_output: Json = False, user: User = None) -> None:
    """Describe a stream or table."""
    statement = f"DESCRIBE {name}{' EXTENDED' if extended else ''};"
    with connected(server, user) as client:
        show(run_or_exit(lambda: client.ksql(statement)), json_output)


def query(sql: Annotated[str, typer.Argument(help="One SELECT: a pull query, or a push query "
                                               "(EMIT CHANGES) printed until Ctrl-C; or one "
                                               "PRINT of a topic.")],
          server: Server = None, json_output: Json = False, user: User = None,
          prop: Property = None) -> None:
    """Run a SELECT on the node's Spark and print its rows as they arrive (JSON Lines with
    --json: the query's metadata, then one array per row); or PRINT a topic's records."""
    properties = properties_of(prop)
    with connected(server, user) as client:
        if query_kind(sql, {}) == "print":
            run_or_exit(lambda: print_lines(client.print_topic(sql, properties), json_output))
            return
        run_or_exit(lambda: print_rows(client.stream_query(sql, properties), json_output))


def query_kind(text: str, variables: dict[str, str]) -> str | None:
    """``"select"`` or ``"print"`` when ``text`` is one SELECT or PRINT; else None."""
    from metastore.core.exceptions import MetastoreError
    from metastore.sql import statements as st
    from metastore.sql.variables import parse_request

    try:
        statements = parse_request(text, variables)
    except MetastoreError:
        return None
    if len(statements) != 1:
        return None
    if isinstance(statements[0], st.PrintTopic):
        return "print"
    return "select" if isinstance(statements[0], st.SelectStatement) else None


LISTABLE = ("streams", "tables", "queries", "types", "topics")


def list_(what: Annotated[str, typer.Argument(help="streams, tables, queries, types or topics.")],
          server: Server = None, json_output: Json = False, user: User = None) -> None:
    """List streams, tables, queries, types or topics."""
    if what.lower() not in LISTABLE:
        typer.echo(f"Error: cannot list {what!r}; choose one of {', '.join(LISTABLE)}", err=True)
        raise typer.Exit(2)
    with connected(server, user) as client:
        show(run_or_exit(lambda: client.ksql(f"SHOW {what.upper()};")), json_output)


def status(server: Server = None, json_output: Json = False, user: User = None) -> None:
    """Show every node of the service (alive or not), this node's log position, and each
    persistent query: its state, where it runs, its lag, what it reads, the records it skipped
    and the rows it could not compute."""
    with connected(server, user) as client:
        cluster = run_or_exit(lambda: client.get("/clusterStatus"))
        node = run_or_exit(lambda: client.get("/v1/metastore"))
        queries = _queries_or_none(client)
    if json_output:
        print_json({"clusterStatus": cluster["clusterStatus"], "node": node, "queries": queries})
        return
    rows = [[info.get("nodeId"), host, "yes" if info["hostAlive"] else "NO", info.get("state"),
             info.get("appliedOffset")] for host, info in cluster["clusterStatus"].items()]
    print_table(["Node", "Address", "Alive", "State", "Applied offset"], rows)
    end, applied = node["endOffset"], node["appliedOffset"]
    if end is None:
        position = "end offset unknown"
    else:
        position = "caught up" if applied + 1 >= end else f"lag {end - applied - 1}"
    typer.echo(f"{node['nodeId']}: {node['state']}, applied through offset {applied} ({position}), "
               f"image {node['imageFingerprint'][:16]}")
    if queries is None:
        typer.echo("queries: the node did not list them (SHOW QUERIES failed)", err=True)
    elif queries:
        print_table(["Query", "State", "Node", "Lag", "Records/s", "Records read", "Skipped",
                     "Errors"],
                    [[q["id"], q.get("state"), q.get("ownerNode") or "-",
                      "-" if q.get("lag") is None else q["lag"], q.get("recordsPerSecond", 0),
                      q.get("recordsRead", 0), q.get("skippedRecords", 0),
                      q.get("processingErrors", 0)] for q in queries])


def _queries_or_none(client: KsqlClient) -> list[dict[str, Any]] | None:
    """SHOW QUERIES' entries, or None when the node refused it (the rest of the status
    stands without them)."""
    try:
        [listed] = client.ksql("SHOW QUERIES;")
    except (StatementFailedError, ClientError, ValueError):
        return None
    return list(listed.get("queries") or [])
