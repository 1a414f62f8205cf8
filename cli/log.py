"""`metastore log dump|verify`: read the command log straight from Kafka."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from cli.output import print_json, print_table
from metastore.catalog.image import EMPTY_IMAGE
from metastore.kafka.consumer import Record
from metastore.kafka.exceptions import KafkaClientError
from metastore.kafka.settings import KafkaSettings
from metastore.log.dump import read_committed
from metastore.log.record import RecordError, decode
from metastore.log.replay import replay_encoded
from metastore.log.topic import command_topic_name

app = typer.Typer(help="Inspect the command log.", no_args_is_help=True)

Bootstrap = Annotated[str | None, typer.Option(envvar="KAFKA_BOOTSTRAP_SERVERS",
                                               help="Kafka bootstrap servers.")]
ServiceId = Annotated[str, typer.Option(envvar="METASTORE_SERVICE_ID", help="Service id.")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def read_log(bootstrap: str | None, service_id: str, topic: str | None) -> list[Record]:
    if not bootstrap:
        typer.echo("Error: pass --bootstrap-servers or set KAFKA_BOOTSTRAP_SERVERS", err=True)
        raise typer.Exit(2)
    name = topic or command_topic_name(service_id)
    try:
        return read_committed(KafkaSettings(bootstrap), name,
                              group_id=f"{service_id}-log-tool-{time.time_ns()}")
    except KafkaClientError as error:
        typer.echo(f"Error: cannot read {name}: {error}", err=True)
        raise typer.Exit(2) from error


@app.command()
def dump(bootstrap_servers: Bootstrap = None, service_id: ServiceId = "default_",
         topic: Annotated[str | None, typer.Option(help="Command topic (default: derived "
                                                   "from the service id).")] = None,
         json_output: Json = False) -> None:
    """Print every committed record of the command log."""
    records = read_log(bootstrap_servers, service_id, topic)
    rows: list[dict[str, Any]] = []
    for record in records:
        try:
            data: dict[str, Any] = decode(record.value, record.offset).to_json()
        except RecordError as error:
            data = {"error": error.message}
        rows.append({"offset": record.offset,
                     "key": record.key.decode(errors="replace") if record.key else None, **data})
    if json_output:
        print_json(rows)
        return
    print_table(["Offset", "Command id", "Request", "Node", "Statement"],
                [[r["offset"], r["key"], str(r.get("requestId", ""))[:8], r.get("originNode", ""),
                  str(r.get("statement", r.get("error", "")))[:70]] for r in rows])


@app.command()
def verify(bootstrap_servers: Bootstrap = None, service_id: ServiceId = "default_",
           topic: Annotated[str | None, typer.Option(help="Command topic.")] = None,
           node: Annotated[str | None, typer.Option(help="A node URL whose image must agree.")] = None,
           json_output: Json = False) -> None:
    """Replay the log offline; report the fingerprint, any bad record, and a node's agreement."""
    records = read_log(bootstrap_servers, service_id, topic)
    replayed = replay_encoded(EMPTY_IMAGE, ((r.offset, r.value) for r in records))
    image = replayed.image
    problem = None if replayed.error is None else {
        "offset": replayed.error.offset, "kind": type(replayed.error).__name__,
        "message": replayed.error.message}
    result: dict[str, Any] = {"records": len(records), "lastOffset": image.offset,
                              "fingerprint": image.fingerprint, "badRecord": problem,
                              "sources": len(image.sources), "queries": len(image.queries)}
    agrees = True
    if node is not None:
        from cli.client import ClientError, KsqlClient

        client = KsqlClient(node.rstrip("/"))
        try:
            status = client.get("/v1/metastore")
        except ClientError as error:
            typer.echo(f"Error: {error}", err=True)
            raise typer.Exit(2) from error
        finally:
            client.close()
        agrees = status.get("imageFingerprint") == image.fingerprint
        result["node"] = {"url": node, "fingerprint": status.get("imageFingerprint"),
                          "appliedOffset": status.get("appliedOffset"), "agrees": agrees}
    if json_output:
        print_json(result)
    else:
        typer.echo(f"{result['records']} records, last offset {result['lastOffset']}, "
                   f"{result['sources']} sources, {result['queries']} queries")
        typer.echo(f"fingerprint {image.fingerprint}")
        if problem:
            typer.echo(f"BAD RECORD at offset {problem['offset']}: {problem['message']}")
        if node is not None:
            typer.echo(f"node {node}: {'agrees' if agrees else 'DISAGREES'}")
    if problem or not agrees:
        raise typer.Exit(1)
