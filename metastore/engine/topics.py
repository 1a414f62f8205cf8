"""Which Kafka topics a statement may read, write, create or delete.

- **Reserved** topics belong to the platform: every metastore service's own topics (command log,
  snapshots, heartbeats; ``_metastore-`` prefixed, whichever service) and Kafka's internal
  ``__`` topics. A statement may not name one at all: not as a source, a sink, nor for deletion.
- **Read-only** topics belong to other systems that share the cluster (ksqlDB's default list:
  Confluent's ``_confluent*`` topics, the schema registry's ``_schemas``, Kafka Connect's own
  topics). A statement may declare a source over one, but never write into it (no ``... AS
  SELECT``, ``INSERT INTO`` or ``DELETE TOPIC``).
- Every other topic is a user topic. A service may read and write it; ``DROP ... DELETE TOPIC``
  deletes it only when no other stream or table of the catalog uses it (ksqlDB's rule).

Names must also be legal Kafka topic names, so an invalid name is refused at validation, not
discovered while a transaction is open.
"""

from __future__ import annotations

import re

from metastore.catalog.exceptions import TopicError
from metastore.core.limits import MAX_TOPIC_NAME_LENGTH

METASTORE_PREFIX = "_metastore-"
RESERVED = re.compile(r"_metastore-.*|__.*")
READ_ONLY = re.compile(r"_confluent.*|_schemas|connect-configs|connect-offsets|connect-status"
                       r"|connect-statuses")
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def is_reserved(topic: str) -> bool:
    """Reserved, or colliding with a reserved name (Kafka refuses a topic whose name equals an
    existing one's once '.' is read as '_', so such a name could block a service's topics)."""
    return RESERVED.fullmatch(topic.replace(".", "_")) is not None


def is_hidden(topic: str) -> bool:
    """Hidden from ``SHOW TOPICS``: reserved and read-only topics, as ksqlDB hides its own."""
    return is_reserved(topic) or READ_ONLY.fullmatch(topic) is not None


def check_name(topic: str) -> None:
    """Refuse a name Kafka would refuse (only once a transaction is open, and with less clarity)."""
    if not topic or topic in (".", ".."):
        raise TopicError(f"Invalid topic name '{topic}': it must not be empty, '.' or '..'.",
                         topic)
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise TopicError(f"Invalid topic name '{topic[:60]}...': a topic name is at most "
                         f"{MAX_TOPIC_NAME_LENGTH} characters long.", topic)
    if _LEGAL.fullmatch(topic) is None:
        raise TopicError(f"Invalid topic name {_printable(topic)}: a topic name contains only "
                         "ASCII letters, digits, '.', '_' and '-'.", topic)


def check_readable(topic: str) -> None:
    """A source may be declared over ``topic``."""
    check_name(topic)
    if is_reserved(topic):
        raise TopicError(f"Cannot use topic {topic}: it is an internal topic of Kafka or of a "
                         "metastore service.", topic)


def check_writable(topic: str) -> None:
    """A statement may write into (or delete) ``topic``."""
    check_readable(topic)
    if READ_ONLY.fullmatch(topic) is not None:
        raise TopicError(f"Cannot write into read-only topic: {topic}", topic)


def _printable(topic: str) -> str:
    return repr(topic if len(topic) <= 60 else topic[:60] + "...")
