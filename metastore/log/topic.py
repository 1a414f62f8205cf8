"""The command topic: its name, the shape it must have, creating it and refusing a wrong one.

Exactly one partition (the log is totally ordered), infinite retention with
``cleanup.policy=delete`` (every command is needed to replay), no unclean leader election (an
acknowledged command must never be lost), and configurable replication / ``min.insync.replicas``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from metastore.kafka.admin import Admin
from metastore.kafka.exceptions import KafkaTopicError
from metastore.log.exceptions import CommandTopicError


def command_topic_name(service_id: str) -> str:
    return f"_metastore-{service_id}-command-log"


@dataclass(frozen=True)
class CommandTopicSpec:
    name: str
    replication: int | None = None
    min_insync_replicas: int | None = None

    def configs(self, replication: int) -> dict[str, str]:
        min_isr = self.min_insync_replicas or (2 if replication >= 3 else 1)
        return {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete",
                "unclean.leader.election.enable": "false", "min.insync.replicas": str(min_isr)}


REQUIRED = {"retention.ms": "-1", "cleanup.policy": "delete",
            "unclean.leader.election.enable": "false"}


def ensure_command_topic(admin: Admin, spec: CommandTopicSpec, broker_count: int,
                         visible_within: float = 30.0) -> None:
    """Create the topic if it is missing; refuse to go on if it exists with the wrong shape."""
    info = admin.describe(spec.name)
    if info is None:
        replication = spec.replication or min(3, max(broker_count, 1))
        try:
            admin.create(spec.name, partitions=1, replication=replication,
                         config=spec.configs(replication))
        except KafkaTopicError as error:
            raise CommandTopicError(spec.name, f"Cannot create the command topic {spec.name}: "
                                               f"{error}") from error
        deadline = time.monotonic() + visible_within
        info = admin.describe(spec.name)
        while info is None or info.partitions == 0:
            if time.monotonic() > deadline:
                raise CommandTopicError(spec.name, f"The command topic {spec.name} was created "
                                                   f"but is not visible after {visible_within:.0f}s")
            time.sleep(0.2)  # topic metadata reaches every broker shortly after creation
            info = admin.describe(spec.name)
    problems = []
    if info.partitions != 1:
        problems.append(f"it has {info.partitions} partitions, it must have exactly 1")
    config = _config_when_known(admin, spec.name, visible_within)
    for key, wanted in REQUIRED.items():
        if config.get(key) != wanted:
            problems.append(f"{key} is {config.get(key)!r}, it must be {wanted!r}")
    if problems:
        raise CommandTopicError(
            spec.name, f"The command topic {spec.name} has the wrong shape: "
                       + "; ".join(problems)
                       + ". Fix the topic or point the node at another service id.")


def _config_when_known(admin: Admin, topic: str, within: float) -> dict[str, str]:
    """The topic's configuration; a broker that has not heard of a new topic yet is asked again."""
    deadline = time.monotonic() + within
    while True:
        try:
            return admin.topic_config(topic)
        except KafkaTopicError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
