"""ksqlDB's types of a persistent query's errors (``QueryError.Type``): USER, SYSTEM, UNKNOWN.

An error is USER when ksqlDB's own classifiers say the cause is the user's to fix: a source
topic that does not exist, a permission Kafka or the registry refuses, a record too large for
its topic, a registry subject or schema that does not exist, a value the sink's format cannot
hold (or a registry refusing its schema); and here, the node's own errors that say so
(``user_error``: a real-time query its node has no task slots for, a source topic missing when
it starts). Else the operator's classifiers decide, ksqlDB's
``ksql.error.classifier.regex.<name>`` properties, each ``<TYPE> <REGEX>`` (``SYSTEM .*not
present in metadata.*``): a rule gives its type when its regex matches the
whole of a cause's class name or message (Java's ``Pattern.DOTALL``); the types are chained
as ksqlDB chains its classifiers, so rules that disagree with each other or with ksqlDB's own
give UNKNOWN. Else UNKNOWN: ksqlDB marks nothing SYSTEM by itself, and neither does this.

A query's error reaches here as Spark's whole text of its failure, a Java exception a line
(``Caused by: <class>: <message>``); each line is a cause.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from metastore.core.exceptions import PropertyValueError

USER, SYSTEM, UNKNOWN = "USER", "SYSTEM", "UNKNOWN"
TYPES = (USER, SYSTEM, UNKNOWN)
REGEX_PREFIX = "ksql.error.classifier.regex."

_USER_CAUSES = re.compile(
    r"MissingSourceTopic|AuthorizationException|[Nn]ot authorized|RecordTooLargeException"
    r"|[Ss]ubject[^\n]{0,200}not found|[Ss]chema[^\n]{0,200}not found|error code: 4010[12]"
    r"|SerializationException|cannot be (serialized|encoded)"
    r"|the Schema Registry answered 40[13] ")
REGISTRY_REFUSAL = re.compile(
    r"the Schema Registry answered (409|422) to POST \S*/subjects/([^/\s]+)/versions: "
    r"(?![^\n]*already exists)([^\n]*)")
"""The registry refusing a schema a query registers as it writes (``RegistryCalls``): its
status (incompatible, invalid), the subject, its answer. A 409 "already exists" is a
registration racing another, sent again, not a refusal."""
_MISSING_TOPIC = re.compile(
    r"[Tt]opics?:?\s+\[?'?([\w.-]+)'?\]?\s+(?:does not exist|not present)"
    r"|UnknownTopicOrPartitionException:[^\n]*?\b([\w.-]+)-\d+\b")
_CAUSE = re.compile(r"^\s*(?:Caused by:\s*)?([\w.$]+(?:Exception|Error))(?::\s*(.*))?$")


class ErrorClassifierSettingError(PropertyValueError):
    """A ``ksql.error.classifier.regex.*`` property that is no ``<TYPE> <REGEX>``."""

    code = "bad_error_classifier"


@dataclass(frozen=True)
class RegexClassifier:
    """One operator's rule: errors with a cause that ``pattern`` matches whole are ``type``."""

    name: str
    type: str
    pattern: re.Pattern[str]

    @classmethod
    def of(cls, name: str, value: str) -> RegexClassifier:
        kind, _, regex = value.strip().partition(" ")
        if kind.upper() not in TYPES or not regex.strip():
            raise ErrorClassifierSettingError(
                name, f"expected '<TYPE> <REGEX>' with a TYPE of {', '.join(TYPES)}, "
                      f"not {value!r}")
        try:
            pattern = re.compile(regex.strip(), re.DOTALL)
        except re.error as error:
            raise ErrorClassifierSettingError(name, f"not a regular expression: {error}") from None
        return cls(name, kind.upper(), pattern)

    def matches(self, text: str) -> bool:
        return any(self.pattern.fullmatch(part) for part in _causes(text))


@dataclass(frozen=True)
class ErrorClassifier:
    """ksqlDB's classifiers and the operator's (in the order of their names), chained as
    ksqlDB chains them: two types that differ, neither UNKNOWN, are UNKNOWN."""

    rules: tuple[RegexClassifier, ...] = ()

    @classmethod
    def of(cls, properties: Mapping[str, str]) -> ErrorClassifier:
        return cls(tuple(RegexClassifier.of(name, value)
                         for name, value in sorted(properties.items())
                         if name.startswith(REGEX_PREFIX)))

    def classify(self, text: str, source_topics: Iterable[str] = (), user: bool = False) -> str:
        """The type of an error whose text (with its causes) is ``text``, in a query that
        reads ``source_topics``; ``user``: the node's own error says it is the user's to fix
        (:attr:`metastore.core.exceptions.MetastoreError.user_error`)."""
        own = USER if (user or _USER_CAUSES.search(text) or REGISTRY_REFUSAL.search(text)
                       or _missing_source(text, source_topics)) else UNKNOWN
        if not self.rules:
            return own
        types = [rule.type if rule.matches(text) else UNKNOWN for rule in self.rules]
        configured = types[0]
        for kind in types[1:]:
            configured = _chained(configured, kind)
        return _chained(own, configured)


def _chained(first: str, second: str) -> str:
    if second in (first, UNKNOWN):
        return first
    return second if first == UNKNOWN else UNKNOWN


def _missing_source(text: str, source_topics: Iterable[str]) -> bool:
    """A topic the query reads is gone (ksqlDB's MissingTopicClassifier: a missing sink is no
    user error of its own): one the text names missing is one of ``source_topics``."""
    sources = set(source_topics)
    return any(name in sources for found in _MISSING_TOPIC.finditer(text)
               for name in found.groups() if name)


def _causes(text: str) -> Iterator[str]:
    """The whole text, then each cause's class name and message."""
    yield text
    for line in text.splitlines():
        found = _CAUSE.match(line)
        if found is not None:
            yield found.group(1)
            if found.group(2):
                yield found.group(2)
        elif line.strip():
            yield line.strip()
