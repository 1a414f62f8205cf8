"""The Kafka access a statement needs, as ksqlDB's topic access validator asks for it.

- a query (CSAS, CTAS, INSERT INTO ... SELECT): Read on the topic of each source it reads, and
  Write on its sink's topic;
- CREATE STREAM / TABLE over a topic: Read on it;
- INSERT VALUES: Write on its target's topic;
- beyond ksqlDB's validator, so that a user who may read only changes nothing: DROP and ALTER of
  a stream or table need Write on its topic, TERMINATE, PAUSE and RESUME Write on the sink of
  each query they stop or start;
- a pull or push SELECT: Read on the topic of each source it reads; PRINT: Read on its topic;
- beyond ksqlDB's validator, which leaves them to Kafka's own check of the server's principal:
  Create on each topic a statement creates, Delete on each topic ``DROP ... DELETE TOPIC``
  deletes.

CREATE and DROP CONNECTOR need Connect on the connector's name: a connector reads and writes
topics with the Connect worker's own credentials, whatever its user may touch.

Statements that touch no topic (SHOW, DESCRIBE, TERMINATE, types, variables) need nothing.
The needs are worked out from what validation resolved (:class:`~metastore.engine.validation.
Write`), so they name the topics the statement really touches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from metastore.catalog import commands as cmd
from metastore.catalog.exceptions import ConnectorAuthorizationError, TopicAuthorizationError
from metastore.catalog.image import Image
from metastore.catalog.model import PersistentQuery
from metastore.engine.validation import Write
from metastore.sql.statements import (
    ConnectorStatement,
    CreateConnector,
    DropConnector,
    PrintTopic,
    Query,
    Statement,
    Terminate,
)

READ, WRITE, CREATE, DELETE, CONNECT = "Read", "Write", "Create", "Delete", "Connect"
OPERATIONS = (READ, WRITE, CREATE, DELETE, CONNECT)


@dataclass(frozen=True)
class Need:
    operation: str
    topic: str
    """The topic's name; for :data:`CONNECT`, the connector's."""


class AccessCheck(Protocol):
    """Who may do what: the role file, the Kafka ACL validator."""

    def check(self, user: str, needs: Iterable[Need]) -> None:
        """Refuse (:func:`refuse`) the needs ``user`` does not have."""


def refuse(denied: list[Need]) -> None:
    """Refuse a request whose user lacks ``denied`` (none: allow), naming the first operation
    and every topic (or connector) of it: ksqlDB's KsqlTopicAuthorizationException."""
    if not denied:
        return
    operation = denied[0].operation
    names = sorted({need.topic for need in denied if need.operation == operation})
    if operation == CONNECT:
        raise ConnectorAuthorizationError(names)
    raise TopicAuthorizationError(operation, names)


def queries_before(statement: Statement, image: Image) -> Mapping[str, PersistentQuery] | None:
    """The queries a TERMINATE stops, as they were before it (its validation removes them
    from the request's catalog): for :func:`of_write`."""
    return dict(image.queries) if isinstance(statement, Terminate) else None


def of_write(write: Write, image: Image,
             queries: Mapping[str, PersistentQuery] | None = None) -> list[Need]:
    """What a statement that writes the command log needs, on ``image`` (the catalog it was
    validated into); ``queries``: for a TERMINATE, :func:`queries_before` it."""
    command = write.command
    needs = [Need(CREATE, topic.name) for topic in write.topics_to_create]
    needs += [Need(DELETE, topic) for topic in write.topics_to_delete]
    if isinstance(command, cmd.CreateSourceCommand):
        needs.append(Need(READ, command.source.topic))
    elif isinstance(command, cmd.CreateAsSelectCommand):
        needs += [Need(READ, topic) for topic in _topics(image, command.query_sources)]
        needs.append(Need(WRITE, command.source.topic))
    elif isinstance(command, cmd.InsertQueryCommand):
        needs += [Need(READ, topic) for topic in _topics(image, command.query_sources)]
        needs += [Need(WRITE, topic) for topic in _topics(image, (command.sink,))]
    elif isinstance(command, cmd.DropSourceCommand):
        needs.append(Need(WRITE, command.topic))
    elif isinstance(command, cmd.AlterSourceCommand):
        needs += [Need(WRITE, topic) for topic in _topics(image, (command.name,))]
    elif isinstance(command, cmd.TerminateCommand | cmd.PauseResumeCommand):
        known = image.queries if queries is None else queries
        sinks = tuple(known[q].sink for q in command.query_ids if q in known)
        needs += [Need(WRITE, topic) for topic in _topics(image, sinks)]
    return needs


def of_query(query: Query, image: Image) -> list[Need]:
    """What a pull or push SELECT needs: Read on each source of its FROM and JOINs."""
    names = tuple(table.name for table in query.read_tables)
    return [Need(READ, topic) for topic in _topics(image, names)]


def of_print(statement: PrintTopic) -> list[Need]:
    return [Need(READ, statement.topic)]


def of_connector(statement: ConnectorStatement) -> list[Need]:
    """What a connector statement needs: Connect on the name it creates or drops."""
    if isinstance(statement, CreateConnector | DropConnector):
        return [Need(CONNECT, statement.name)]
    return []


def of_insert(target: str, image: Image) -> list[Need]:
    """What INSERT VALUES into ``target`` needs."""
    return [Need(WRITE, topic) for topic in _topics(image, (target,))]


def _topics(image: Image, names: tuple[str, ...]) -> list[str]:
    found = (image.source(name) for name in names)
    return [source.topic for source in found if source is not None]


__all__ = ["CONNECT", "CREATE", "DELETE", "OPERATIONS", "READ", "WRITE", "AccessCheck", "Need",
           "of_connector", "of_insert", "of_print", "of_query", "of_write", "refuse"]
