"""`metastore dev`: local infrastructure for development, tests and the demo."""

from __future__ import annotations

import signal
import sys
import uuid
from typing import Annotated, Any

import typer

from cli.output import fail, print_json, print_table
from metastore.dev import prefetch
from metastore.dev.exceptions import LocalInfraError
from metastore.dev.local_service import LocalService
from metastore.dev.schema_registry import is_built as schema_registry_built
from metastore.dev.secure import secure_kafka, start_secure
from metastore.dev.stack import (
    ensure_kafka,
    external_bootstrap,
    local_connect,
    local_kafka,
    local_nodes,
    local_postgres,
    local_schema_registry,
    local_spark,
    spark_node_args,
)

app = typer.Typer(help="Local Kafka and local clusters for development.", no_args_is_help=True)
kafka_app = typer.Typer(help="A real Apache Kafka (KRaft) on 127.0.0.1.", no_args_is_help=True)
app.add_typer(kafka_app, name="kafka")

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@app.command()
def fetch(
    everything: Annotated[bool, typer.Option(
        "--all", help="Also fetch the optional components ahead of time (the local Schema "
                      "Registry, the Kafka Connect worker), for offline use.")] = False,
) -> None:
    """Resolve the Kafka broker's and the Spark connector's jars from Maven Central and build
    the project's JVM classes (jvm/, in a checkout), once. The optional components are fetched the first time
    something needs them, or now with --all."""
    listed = prefetch.steps(None)
    try:
        optional = [prefetch.schema_registry_step(), prefetch.connect_step()] if everything else []
        prefetch.run([*listed, *optional], typer.echo)
    except LocalInfraError as error:
        fail(str(error), 2)
    if not everything and not schema_registry_built():
        typer.echo("the local Schema Registry: built the first time it is needed (dev up "
                   "--schema-registry, metastore test of a registry case); --all builds it now")


@kafka_app.command("start")
def kafka_start(
    brokers: Annotated[int, typer.Option(help="Number of brokers: 1 or 3.")] = 1,
    fresh: Annotated[bool, typer.Option(help="Delete the previous cluster's data first.")] = False,
) -> None:
    """Start local Kafka and print its bootstrap servers once it is ready."""
    external = external_bootstrap()
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
    external = external_bootstrap()
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



@app.command()
def up(
    nodes: Annotated[int, typer.Option(help="Number of nodes (ports 8088, 8089, ...).")] = 3,
    port: Annotated[int, typer.Option(help="The first node's port; the others follow.")] = 8088,
    brokers: Annotated[int, typer.Option(help="Kafka brokers to start: 1 or 3.")] = 1,
    service_id: Annotated[str, typer.Option(help="The service id the nodes share.")] = "demo",
    no_spark: Annotated[bool, typer.Option("--no-spark", help="Run the nodes without Spark.")] = False,
    spark_workers: Annotated[int, typer.Option(
        help="Start a local Spark standalone cluster of this many workers and run the nodes' "
             "queries on it (0: each node runs Spark in local mode).")] = 0,
    function_module: Annotated[list[str] | None, typer.Option(
        "--function-module", help="A Python module of user-defined functions every node "
        "loads; repeatable.")] = None,
    schema_registry: Annotated[bool, typer.Option(
        "--schema-registry", help="Start a local Schema Registry (Apicurio, in memory; built "
        "from Maven Central on first use) and point the nodes at it.")] = False,
    connect: Annotated[bool, typer.Option(
        "--connect", help="Start a local Kafka Connect worker (Apache Kafka's, distributed "
        "mode, with the FileStream and Debezium PostgreSQL plugins) and point the nodes at "
        "it.")] = False,
    postgres: Annotated[bool, typer.Option(
        "--postgres", help="Start a local PostgreSQL (the machine's, with logical decoding on) "
        "for the change-data-capture walkthrough (metastore dev cdc).")] = False,
    secure: Annotated[bool, typer.Option(
        "--secure", help="Secure everything: Kafka over SASL_SSL with ACLs (a broker of its "
        "own), nodes serving HTTPS to the users admin and reader, each statement checked "
        "against the user's Kafka ACLs. Prints the file to source for the CLI.")] = False,
) -> None:
    """Start local Kafka (if needed) and N nodes of one service; wait until all are READY."""
    if spark_workers and no_spark:
        fail("--spark-workers and --no-spark exclude each other", 2)
    if not 0 <= spark_workers <= 8:
        fail("--spark-workers must be between 0 and 8", 2)
    if not 1024 <= port <= 65535 - nodes:
        fail("--port must leave room for every node between 1024 and 65535", 2)
    if secure and (schema_registry or connect or brokers != 1 or external_bootstrap()):
        fail("--secure starts a 1-broker Kafka of its own and secures the nodes; the local "
             "Schema Registry and Connect worker are not secured (and KAFKA_BOOTSTRAP_SERVERS "
             "must be unset)", 2)
    try:
        deployment = start_secure(sys.stderr) if secure else None
        bootstrap = (ensure_kafka(brokers) if deployment is None
                     else deployment.kafka.bootstrap_servers)
        extra: tuple[str, ...] = ("--spark-master", "none") if no_spark else ()
        if deployment is not None:
            extra += deployment.node_args()
        if spark_workers:
            running = local_nodes().state()
            if running is not None and any(local_nodes().is_running(n) for n in running.nodes):
                fail("a local cluster is already running here; run 'metastore dev down' first", 1)
            extra += spark_node_args(local_spark(spark_workers, nodes).start())
        for module in function_module or ():  # every node of the service loads the same
            extra += ("--function-module", module)
        if schema_registry:
            registry = local_schema_registry().start()
            extra += ("--schema-registry-url", registry.url)
        if connect:
            extra += ("--connect-url", local_connect().start(bootstrap).url)
        if postgres:
            local_postgres().start()
        typer.echo(f"Starting {nodes} node(s) of service '{service_id}'...", err=True)
        state = local_nodes().up(nodes, service_id, bootstrap, extra,
                                 ports=[port + i for i in range(nodes)],
                                 ca_file=None if deployment is None else deployment.ca)
    except LocalInfraError as error:
        fail(str(error), 1)
    for node in state.nodes:
        typer.echo(f"{node.name}: {node.url}")
    typer.echo(f"console: {state.nodes[0].url}/console/")
    if deployment is not None:
        typer.echo(f"Users admin and reader, over HTTPS; for the CLI: source "
                   f"{deployment.root / 'env.sh'}")


@app.command("status")
def nodes_status(json_output: JsonOption = False) -> None:
    """Show the local nodes and the local Spark cluster, and whether each process runs."""
    cluster = local_nodes()
    state = cluster.state()
    rows = [] if state is None else [
        {"node": n.name, "url": n.url, "pid": n.pid, "running": cluster.is_running(n)}
        for n in state.nodes]
    spark = local_spark()
    spark_state = spark.state()
    daemons = [] if spark_state is None else [
        {"daemon": d.name, "ui": d.web_url, "pid": d.pid, "running": spark.is_alive(d)}
        for d in (spark_state.master, *spark_state.workers)]
    registry = local_schema_registry()
    registry_state = registry.state()
    registry_row = None if registry_state is None else {
        "url": registry_state.url, "pid": registry_state.pid, "running": registry.is_running()}
    services: dict[str, LocalService[Any]] = {"connect": local_connect(),
                                              "postgres": local_postgres()}
    service_rows = {name: {"url": state.url, "pid": state.pid, "running": service.is_running()}
                    for name, service in services.items()
                    if (state := service.state()) is not None}
    if json_output:
        print_json({"serviceId": state.service_id if state else None, "nodes": rows,
                    "spark": None if spark_state is None else {
                        "masterUrl": spark_state.master_url, "daemons": daemons},
                    "schemaRegistry": registry_row, "connect": service_rows.get("connect"),
                    "postgres": service_rows.get("postgres")})
        return
    if not rows:
        typer.echo("No local cluster; start one with: metastore dev up")
    else:
        print_table(["node", "url", "pid", "running"],
                    [[r["node"], r["url"], r["pid"], r["running"]] for r in rows])
    if spark_state is not None:
        typer.echo(f"\nSpark master {spark_state.master_url}")
        print_table(["daemon", "ui", "pid", "running"],
                    [[d["daemon"], d["ui"], d["pid"], d["running"]] for d in daemons])
    if registry_row is not None:
        typer.echo("")
        print_table(["schema registry", "pid", "running"],
                    [[registry_row["url"], registry_row["pid"], registry_row["running"]]])
    for name, row in service_rows.items():
        typer.echo("")
        print_table([{"connect": "kafka connect", "postgres": "postgresql"}[name], "pid",
                     "running"], [[row["url"], row["pid"], row["running"]]])


def _signal_node(node: str, sig: signal.Signals, verb: str) -> None:
    try:
        stopped = local_nodes().stop_node(node, sig)
    except LocalInfraError as error:
        fail(str(error), 2)
    typer.echo(f"{verb} {node}." if stopped else f"{node} was not running.")


@app.command()
def kill(node: Annotated[str, typer.Argument(help="Node name, e.g. node-2.")]) -> None:
    """SIGKILL one node (a crash)."""
    _signal_node(node, signal.SIGKILL, "Killed")


@app.command()
def stop(node: Annotated[str, typer.Argument(help="Node name, e.g. node-2.")]) -> None:
    """SIGTERM one node (a clean stop)."""
    _signal_node(node, signal.SIGTERM, "Stopped")


@app.command()
def start(node: Annotated[str, typer.Argument(help="Node name, e.g. node-2.")]) -> None:
    """Start a stopped node again and wait until it is READY."""
    try:
        state = local_nodes().start_node(node)
    except LocalInfraError as error:
        fail(str(error), 1)
    typer.echo(f"{node}: {state.node(node).url}")


@app.command()
def down() -> None:
    """Stop every node, the local Spark cluster, the local Schema Registry, the local Kafka
    Connect worker, the local PostgreSQL and the local Kafka this tool started (nothing
    else)."""
    stopped = local_nodes().down()
    spark = local_spark().stop()
    registry = local_schema_registry().stop()
    connect = local_connect().stop()
    postgres = local_postgres().stop()
    brokers = local_kafka().stop() + secure_kafka().stop()
    typer.echo(f"Stopped {stopped} node(s), {spark} Spark daemon(s), {registry} Schema "
               f"Registry, {connect} Kafka Connect worker, {postgres} PostgreSQL and "
               f"{brokers} broker(s).")


@app.command()
def cdc() -> None:
    """The change-data-capture walkthrough on the local cluster (metastore dev up --connect
    --postgres): a PostgreSQL table streamed by Debezium, a table over its changes, a CTAS
    counting it and pull queries following inserts, updates and deletes."""
    from metastore.dev.cdc import Walkthrough

    nodes = local_nodes().state()
    postgres = local_postgres().state()
    if nodes is None or not nodes.nodes or postgres is None or not (
            local_connect().is_running() and local_postgres().is_running()):
        fail("the walkthrough needs the local cluster with Kafka Connect and PostgreSQL: run "
             "'metastore dev up --connect --postgres' first", 3)
        return
    url = nodes.nodes[0].url
    walkthrough = Walkthrough(postgres, url, url, prefix=f"cdc-{uuid.uuid4().hex[:6]}",
                              say=typer.echo)
    try:
        walkthrough.run()
    except (LocalInfraError, RuntimeError, TimeoutError) as error:
        fail(str(error), 1)
    names = walkthrough.variables
    typer.echo(f"The counts followed every change in PostgreSQL. Ask them again with: SELECT * "
               f"FROM {names['counts']}; stop Debezium with: DROP CONNECTOR "
               f"{names['connector']};")


@app.command()
def demo(
    keep: Annotated[bool, typer.Option(help="Leave the cluster running afterwards.")] = False,
    spark_workers: Annotated[int, typer.Option(
        help="Run the nodes' Spark on a local standalone cluster of this many workers.")] = 0,
    secure: Annotated[bool, typer.Option(
        "--secure", help="Run it on the deployment of 'metastore dev up --secure': Kafka over "
        "SASL_SSL with ACLs, the nodes over HTTPS.")] = False,
) -> None:
    """The main job: a local 3-node cluster, the examples, agreement, a crash and recovery."""
    from metastore.dev.demo import run_demo

    if not 0 <= spark_workers <= 8:
        fail("--spark-workers must be between 0 and 8", 2)
    if secure and external_bootstrap():
        fail("--secure starts a Kafka of its own: unset KAFKA_BOOTSTRAP_SERVERS", 2)
    raise typer.Exit(run_demo(keep=keep, spark_workers=spark_workers, secure=secure))
