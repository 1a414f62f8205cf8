"""The Kafka access a statement needs, as ksqlDB's topic access validator asks for it.

- a query (CSAS, CTAS, INSERT INTO ... SELECT): Read on the topic of each source it reads, and
  Write on its sink's topic;
- CREATE STREAM / TABLE over a topic: Read on it;
- INSERT VALUES: Write on its target's topic;
- a pull or push SELECT: Read on the topic of each source it reads; PRINT: Read on its topic;
- beyond ksqlDB's validator, which leaves them to Kafka's own check of the server's principal:
  Create on each topic a statement creates, Delete on each topic ``DROP ... DELETE TOPIC``
  deletes.

Statements that touch no topic (SHOW, DESCRIBE, TERMINATE, types, variables) need nothing.
The needs are worked out from what validation resolved (:class:`~metastore.engine.validation.
Write`), so they name the topics the statement really touches.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from metastore.catalog import commands as cmd
from metastore.catalog.image import Image
from metastore.engine.validation import Write
from metastore.sql.statements import PrintTopic, Query

READ, WRITE, CREATE, DELETE = "Read", "Write", "Create", "Delete"
OPERATIONS = (READ, WRITE, CREATE, DELETE)


@dataclass(frozen=True)
class Need:
    operation: str
    topic: str


def of_write(write: Write, image: Image) -> list[Need]:
    """What a statement that writes the command log needs, on ``image`` (the catalog it was
    validated on, which knows the sources it reads)."""
    command = write.command
    needs = [Need(CREATE, topic.name) for topic in write.topics_to_create]
    if isinstance(command, cmd.CreateSourceCommand):
        needs.append(Need(READ, command.source.topic))
    elif isinstance(command, cmd.CreateAsSelectCommand | cmd.InsertQueryCommand):
        needs += [Need(READ, topic) for topic in _topics(image, command.query_sources)]
        sink = command.source.topic if isinstance(command, cmd.CreateAsSelectCommand) else \
            _topics(image, (command.sink,))
        needs += [Need(WRITE, topic) for topic in ([sink] if isinstance(sink, str) else sink)]
    needs += [Need(DELETE, topic) for topic in write.topics_to_delete]
    return needs


def of_query(query: Query, image: Image) -> list[Need]:
    """What a pull or push SELECT needs: Read on each source of its FROM and JOINs."""
    select = query.select
    from_ = select.args.get("from_") or select.args.get("from")
    tables = [from_.this if from_ is not None else None,
              *(join.this for join in select.args.get("joins") or [])]
    names = tuple(table.name for table in tables if isinstance(table, exp.Table))
    return [Need(READ, topic) for topic in _topics(image, names)]


def of_print(statement: PrintTopic) -> list[Need]:
    return [Need(READ, statement.topic)]


def of_insert(target: str, image: Image) -> list[Need]:
    """What INSERT VALUES into ``target`` needs."""
    return [Need(WRITE, topic) for topic in _topics(image, (target,))]


def _topics(image: Image, names: tuple[str, ...]) -> list[str]:
    found = (image.source(name) for name in names)
    return [source.topic for source in found if source is not None]


__all__ = ["CREATE", "DELETE", "OPERATIONS", "READ", "WRITE", "Need", "of_insert", "of_print",
           "of_query", "of_write"]
