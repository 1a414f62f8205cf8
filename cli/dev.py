"""`metastore dev`: local infrastructure for development, tests and the demo."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from cli.output import fail, print_json, print_table
from metastore.local import jars
from metastore.local.exceptions import LocalInfraError
from metastore.local.kafka_cluster import LocalKafkaCluster
from metastore.local.paths import dev_dir

app = typer.Typer(help="Local Kafka and local clusters for development.", no_args_is_help=True)
kafka_app = typer.Typer(help="A real Apache Kafka (KRaft) on 127.0.0.1.", no_args_is_help=True)
app.add_typer(kafka_app, name="kafka")

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _external_bootstrap() -> str | None:
    return os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or None


def local_kafka(brokers: int = 1) -> LocalKafkaCluster:
    return LocalKafkaCluster(dev_dir() / "kafka", brokers=brokers)


@app.command()
def fetch() -> None:
    """Resolve the Kafka broker and Spark connector jars from Maven Central (once)."""
    try:
        for jar_set in (jars.kafka_broker(), jars.spark_kafka_connector()):
            found = jars.resolve(jar_set)
            typer.echo(f"{jar_set.name}: {len(found)} jars")
    except LocalInfraError as error:
        fail(str(error), 2)


@kafka_app.command("start")
def kafka_start(
    brokers: Annotated[int, typer.Option(help="Number of brokers: 1 or 3.")] = 1,
    fresh: Annotated[bool, typer.Option(help="Delete the previous cluster's data first.")] = False,
) -> None:
    """Start local Kafka and print its bootstrap servers once it is ready."""
    external = _external_bootstrap()
    if external:
        typer.echo(external)
        typer.echo("KAFKA_BOOTSTRAP_SERVERS is set: using that cluster, nothing started.", err=True)
        return
    if brokers not in (1, 3):
        fail("--brokers must be 1 or 3", 2)
    cluster = local_kafka(brokers)
    existing = cluster.state()
    if existing is not None and len(existing.nodes) != brokers:
        if cluster.running_nodes():
            fail(f"a local Kafka with {len(existing.nodes)} broker(s) is running; "
                 "stop it first (metastore dev kafka stop)", 1)
        fresh = True
    try:
        if fresh:
            cluster.wipe()
        state = cluster.start()
    except LocalInfraError as error:
        fail(str(error), 1)
    typer.echo(state.bootstrap_servers)


@kafka_app.command("stop")
def kafka_stop() -> None:
    """Stop the local Kafka this command started (its data is kept for the next start)."""
    cluster = local_kafka()
    stopped = cluster.stop()
    typer.echo(f"Stopped {stopped} broker(s)." if stopped else "Local Kafka was not running.")


@kafka_app.command("status")
def kafka_status(json_output: JsonOption = False) -> None:
    """Show whether local Kafka runs; exit 0 when every broker runs, 3 otherwise."""
    cluster = local_kafka()
    state = cluster.state()
    running = {node.node_id for node in cluster.running_nodes()}
    nodes = [] if state is None else [
        {"nodeId": n.node_id, "address": n.address, "pid": n.pid, "running": n.node_id in running}
        for n in state.nodes]
    all_up = bool(nodes) and all(n["running"] for n in nodes)
    external = _external_bootstrap()
    if json_output:
        print_json({"external": external, "bootstrapServers":
                    external or (state.bootstrap_servers if state else None),
                    "running": all_up, "nodes": nodes})
    elif external:
        typer.echo(f"KAFKA_BOOTSTRAP_SERVERS is set: {external}")
    elif not nodes:
        typer.echo("Local Kafka has never been started here.")
    else:
        print_table(["node", "address", "pid", "running"],
                    [[n["nodeId"], n["address"], n["pid"], n["running"]] for n in nodes])
    if not (all_up or external):
        raise typer.Exit(3)
