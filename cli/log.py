"""`metastore log dump|verify`: read the command log straight from Kafka."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.output import print_json, print_table
from metastore.catalog.image import EMPTY_IMAGE, Image
from metastore.checkpoint.exceptions import CheckpointError
from metastore.checkpoint.store import Checkpoint, CheckpointStore, Incarnation, parse, record_digest
from metastore.kafka.admin import Admin
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
           checkpoint: Annotated[Path | None, typer.Option(
               help="A node's data directory (its newest checkpoint) or a checkpoint file, "
                    "which must agree with the replay at its offset.")] = None,
           json_output: Json = False) -> None:
    """Replay the log offline; report the fingerprint, any bad record, a node's and a
    checkpoint's agreement."""
    records = read_log(bootstrap_servers, service_id, topic)
    checked = _load_checkpoint(checkpoint) if checkpoint is not None else None
    at_checkpoint: Image | None = None
    if isinstance(checked, _Located):
        split = checked.checkpoint.header.offset
        prefix = replay_encoded(EMPTY_IMAGE, ((r.offset, r.value) for r in records
                                              if r.offset <= split))
        at_checkpoint = prefix.image
        replayed = prefix if prefix.error is not None else replay_encoded(
            prefix.image, ((r.offset, r.value) for r in records if r.offset > split))
    else:
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
    checkpoint_agrees = True
    if checkpoint is not None:
        assert checked is not None and bootstrap_servers is not None
        name = topic or command_topic_name(service_id)
        result["checkpoint"] = _check_checkpoint(checked, at_checkpoint, records, service_id,
                                                 name, bootstrap_servers)
        checkpoint_agrees = result["checkpoint"]["agrees"]
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
        if checkpoint is not None:
            found = result["checkpoint"]
            typer.echo(f"checkpoint {found['path']}: "
                       + ("agrees" if checkpoint_agrees else f"DISAGREES: {found['problem']}"))
    if problem or not agrees or not checkpoint_agrees:
        raise typer.Exit(1)


@dataclass(frozen=True)
class _Located:
    path: Path
    checkpoint: Checkpoint


def _load_checkpoint(path: Path) -> _Located | str:
    """The checkpoint at ``path`` (a file, or a data directory's newest), or why there is none."""
    if path.is_dir():
        directory = path / "checkpoints" if (path / "checkpoints").is_dir() else path
        newest = CheckpointStore(directory).paths()
        if not newest:
            return f"no checkpoint in {directory}"
        path = newest[0]
    try:
        loaded = parse(path.read_bytes())
    except (OSError, CheckpointError) as error:
        return f"{path}: {error}"
    return _Located(path, loaded)


def _check_checkpoint(checked: _Located | str, at_offset: Image | None, records: list[Record],
                      service_id: str, topic: str, bootstrap: str) -> dict[str, Any]:
    if isinstance(checked, str):
        return {"path": None, "agrees": False, "problem": checked}
    header = checked.checkpoint.header
    report: dict[str, Any] = {"path": str(checked.path), "offset": header.offset,
                              "nodeId": header.node_id, "agrees": False, "problem": None}
    held = next((r for r in records if r.offset == header.offset), None)
    try:
        topic_id = Admin(KafkaSettings(bootstrap)).topic_id(topic)
    except KafkaClientError as error:
        report["problem"] = f"cannot read the topic id: {error}"
        return report
    assert at_offset is not None
    if header.incarnation != Incarnation(service_id, topic, topic_id):
        report["problem"] = (f"it belongs to service {header.service_id}, topic {header.topic} "
                             f"(id {header.topic_id}), not to this log (id {topic_id})")
        return report
    if held is None or record_digest(held.key, held.value) != header.record_digest:
        report["problem"] = f"the log does not hold its record at offset {header.offset}"
        return report
    try:
        state = checked.checkpoint.state()
    except CheckpointError as error:
        report["problem"] = str(error)
        return report
    if state.image.fingerprint != at_offset.fingerprint:
        report["problem"] = (f"its image ({state.image.fingerprint[:12]}) differs from the "
                             f"replay at offset {header.offset} ({at_offset.fingerprint[:12]})")
    else:
        report["agrees"] = True
    report["fingerprint"] = state.image.fingerprint
    return report
