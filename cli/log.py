"""`metastore log dump|verify|repair|restore`: read the command log straight from Kafka, and
repair or restore it (metastore.log.repair)."""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from cli.options import Kafka, User, basic_auth, kafka_client
from cli.output import print_json, print_table
from metastore.catalog.image import EMPTY_IMAGE, Image
from metastore.checkpoint.exceptions import CheckpointError
from metastore.checkpoint.store import Checkpoint, CheckpointStore, Incarnation, parse, record_digest
from metastore.core.exceptions import MetastoreError
from metastore.kafka.admin import Admin
from metastore.kafka.consumer import Record
from metastore.kafka.exceptions import KafkaClientError
from metastore.kafka.settings import KafkaSettings
from metastore.log.dump import history_rows, read_committed
from metastore.log.exceptions import RewriteError
from metastore.log.repair import RepairOptions, RepairPlan, RestoreOptions, Rewritten
from metastore.log.repair import repair as repair_log
from metastore.log.repair import restore as restore_log
from metastore.log.replay import replay_encoded
from metastore.log.topic import command_topic_name

app = typer.Typer(help="Inspect, repair and restore the command log.", no_args_is_help=True)

Bootstrap = Annotated[str | None, typer.Option(envvar="KAFKA_BOOTSTRAP_SERVERS",
                                               help="Kafka bootstrap servers.")]
ServiceId = Annotated[str, typer.Option(envvar="METASTORE_SERVICE_ID", help="Service id.")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def read_log(settings: KafkaSettings, service_id: str, topic: str | None) -> list[Record]:
    """Every committed record of the service's command log, with its time."""
    name = topic or command_topic_name(service_id)
    try:
        return read_committed(settings, name, group_id=f"{service_id}-log-tool-{time.time_ns()}",
                              details=True)
    except KafkaClientError as error:
        typer.echo(f"Error: cannot read {name}: {error}", err=True)
        raise typer.Exit(2) from error


@app.command()
def dump(bootstrap_servers: Bootstrap = None, service_id: ServiceId = "default_",
         topic: Annotated[str | None, typer.Option(help="Command topic (default: derived "
                                                   "from the service id).")] = None,
         kafka: Kafka = None, json_output: Json = False) -> None:
    """Print every committed record of the command log: when, by whom (the authenticated
    user, when the node had authentication on) and from which node it was written."""
    rows = history_rows(read_log(_settings(bootstrap_servers, kafka), service_id, topic))
    if json_output:
        print_json(rows)
        return
    print_table(["Offset", "Time (UTC)", "Command id", "Submitter", "Node", "Statement"],
                [[r["offset"], _utc(r["timestamp"]), r["key"], r.get("submitter", ""),
                  r.get("originNode", ""), str(r.get("statement", r.get("error", "")))[:60]]
                 for r in rows])


def _utc(millis: int | None) -> str:
    if millis is None:
        return ""
    return datetime.datetime.fromtimestamp(millis / 1000, datetime.UTC).strftime(
        "%Y-%m-%d %H:%M:%S")


@app.command()
def verify(bootstrap_servers: Bootstrap = None, service_id: ServiceId = "default_",
           topic: Annotated[str | None, typer.Option(help="Command topic.")] = None,
           node: Annotated[str | None, typer.Option(help="A node URL whose image must agree.")] = None,
           checkpoint: Annotated[Path | None, typer.Option(
               help="A node's data directory (its newest checkpoint) or a checkpoint file, "
                    "which must agree with the replay at its offset.")] = None,
           kafka: Kafka = None, json_output: Json = False, user: User = None) -> None:
    """Replay the log offline; report the fingerprint, any bad record, a node's and a
    checkpoint's agreement."""
    records = read_log(_settings(bootstrap_servers, kafka), service_id, topic)
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

        client = KsqlClient(node.rstrip("/"), auth=basic_auth(user))
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


BackupFile = Annotated[Path, typer.Option("--backup", help="The backup file of every committed "
                                                           "record.")]
Yes = Annotated[bool, typer.Option("--yes", help="Really change the command topic.")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Report what would happen; change "
                                                        "nothing.")]


def _settings(bootstrap: str | None, kafka: list[str] | None) -> KafkaSettings:
    if not bootstrap:
        typer.echo("Error: pass --bootstrap-servers or set KAFKA_BOOTSTRAP_SERVERS", err=True)
        raise typer.Exit(2)
    return KafkaSettings(bootstrap, kafka_client(kafka))


def _progress(message: str) -> None:
    typer.echo(message, err=True)


def _fail(error: Exception) -> NoReturn:
    """Exit 1 for a refusal, 2 for Kafka (or a rewrite that Kafka broke off)."""
    typer.echo(f"Error: {error}", err=True)
    cause = error.__cause__ if isinstance(error, RewriteError) else error
    raise typer.Exit(2 if isinstance(cause, KafkaClientError) else 1) from error


@app.command()
def repair(backup: BackupFile, bootstrap_servers: Bootstrap = None,
           service_id: ServiceId = "default_", kafka: Kafka = None,
           skip_offset: Annotated[list[int] | None, typer.Option(
               "--skip-offset", help="Leave out the record at this offset; repeatable.")] = None,
           skip_unappliable: Annotated[bool, typer.Option(
               "--skip-unappliable", help="Leave out every record that fails to replay.")] = False,
           dry_run: DryRun = False, yes: Yes = False,
           json_output: Json = False) -> None:
    """Leave records that cannot be replayed out of the command log (stop every node first).

    Backs up every record to --backup, then re-creates the topic with the kept records at their
    offsets. See docs/recovery.md."""
    settings = _settings(bootstrap_servers, kafka)
    options = RepairOptions(frozenset(skip_offset or ()), skip_unappliable, dry_run, yes)
    try:
        report = repair_log(settings, service_id, backup, options, _progress)
    except MetastoreError as error:
        _fail(error)
    plan, done = report.plan, report.rewritten
    if json_output:
        print_json({**report.to_json(), "dryRun": dry_run})
    else:
        _print_plan(plan)
        if done is not None:
            typer.echo(f"Backed up {len(plan.records)} records to {done.backup}.")
            _print_rewritten(done, plan.service_id)
            typer.echo(f"To undo: metastore log restore --backup {done.backup} "
                       f"--service-id {plan.service_id} --yes")
        elif plan.refusal is None and not dry_run:
            typer.echo(f"Nothing was changed. To repair: stop every node of service "
                       f"{service_id}, then run this again with --yes. It first backs up every "
                       f"record to {backup}.")
        elif plan.refusal is None:
            typer.echo("Dry run: nothing was changed.")
    _conclude(plan.refusal, done is not None, dry_run)


@app.command()
def restore(backup: BackupFile, bootstrap_servers: Bootstrap = None,
            service_id: ServiceId = "default_", kafka: Kafka = None,
            discard_newer: Annotated[bool, typer.Option(
                "--discard-newer", help="Go on although the current log holds records the "
                                        "backup does not; they are lost.")] = False,
            dry_run: DryRun = False, yes: Yes = False, json_output: Json = False) -> None:
    """Write a backup taken by `log repair` back as the command log (stop every node first)."""
    settings = _settings(bootstrap_servers, kafka)
    options = RestoreOptions(dry_run, yes, discard_newer)
    try:
        report = restore_log(settings, service_id, backup, options, _progress)
    except MetastoreError as error:
        _fail(error)
    done = report.rewritten
    if json_output:
        print_json({**report.to_json(), "dryRun": dry_run})
    else:
        typer.echo(f"{backup}: {len(report.backup.records)} records of {report.backup.topic} "
                   f"(taken {report.backup.taken_at or 'at an unknown time'}); the topic now "
                   f"holds {report.current} committed records, {len(report.discarded)} of them "
                   "not in the backup")
        if done is not None:
            _print_rewritten(done, service_id)
        elif report.refusal is None and not dry_run:
            typer.echo(f"Nothing was changed. To restore: stop every node of service "
                       f"{service_id}, then run this again with --yes.")
        elif report.refusal is None:
            typer.echo("Dry run: nothing was changed.")
    _conclude(report.refusal, done is not None, dry_run)


def _conclude(refusal: str | None, rewritten: bool, dry_run: bool) -> None:
    """Exit 1 when refused, or when nothing was rewritten without being a dry run."""
    if refusal is not None:
        typer.echo(f"Refused: {refusal}", err=True)
        raise typer.Exit(1)
    if not rewritten and not dry_run:
        raise typer.Exit(1)


def _print_plan(plan: RepairPlan) -> None:
    end = plan.records[-1].offset + 1 if plan.records else 0
    typer.echo(f"{plan.topic}: {len(plan.records)} committed records below offset {end}")
    listed = sorted([(s, "skip") for s in plan.skipped] + [(s, "KEEP (fails)") for s in plan.left_in],
                    key=lambda pair: pair[0].offset)
    if listed:
        print_table(["Offset", "Action", "Kind", "Key", "Reason"],
                    [[s.offset, action, s.kind, s.key or "", s.reason[:70]] for s, action in listed])
    image = f"{plan.image.fingerprint} ({len(plan.image.sources)} sources, " \
            f"{len(plan.image.queries)} queries)"
    if plan.left_in:
        typer.echo(f"Without the records that fail, the other "
                   f"{len(plan.records) - len(plan.left_in)} would replay to fingerprint {image}.")
    else:
        typer.echo(f"Keeping {len(plan.records) - len(plan.skipped)} records at their offsets; "
                   f"they replay to fingerprint {image}.")


def _print_rewritten(done: Rewritten, service_id: str) -> None:
    topic = command_topic_name(service_id)
    checkpoints = done.to_json(service_id, topic)["queryCheckpoints"]
    if done.old_topic_id is None:
        typer.echo(f"Created {topic}: topic id {done.new_topic_id}.")
    else:
        typer.echo(f"Re-created {topic}: topic id {done.old_topic_id} -> {done.new_topic_id}.")
    typer.echo(f"The log replays to fingerprint {done.image.fingerprint} "
               f"({len(done.image.sources)} sources, {len(done.image.queries)} queries).")
    if done.bad_record is not None:
        typer.echo(f"BAD RECORD at offset {done.bad_record.offset}: {done.bad_record.reason}")
    typer.echo("Start the nodes: their checkpoints and snapshots belong to the old topic and are "
               "ignored; each replays the log from offset 0.")
    previous = (f" (the old ones stay under <root>/{checkpoints['old']})"
                if checkpoints["old"] else "")
    typer.echo(f"Persistent queries keep their checkpoints under <query checkpoint root>/"
               f"{checkpoints['new']}{previous}; see docs/recovery.md.")
