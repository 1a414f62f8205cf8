"""The clean-up of topics created for requests that were not written, with a fake admin and log:
what it deletes, and what it creates again when the log shows a use, or cannot show anything."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from metastore.engine.validation import TopicSpec
from metastore.kafka.admin import TopicInfo
from metastore.kafka.exceptions import KafkaUnavailableError
from metastore.log.unused_topics import UnusedTopics

SPEC = TopicSpec("t", 3, None, (("retention.ms", "1000"),))


class FakeAdmin:
    """Topics by name; a deletion takes ``lag`` describes to show."""

    def __init__(self, topics: set[str], lag: int = 0, refuse_delete: bool = False) -> None:
        self.topics = {name: 0 for name in topics}
        self.lag = lag
        self.refuse_delete = refuse_delete
        self.created: list[tuple[str, int, dict[str, str]]] = []

    def describe(self, name: str, timeout: float | None = None) -> TopicInfo | None:
        if name not in self.topics:
            return None
        if self.topics[name] < 0:  # being deleted
            self.topics[name] += 1
            if self.topics[name] == 0:
                del self.topics[name]
        return TopicInfo(name, 3, 1)

    def wait_until_gone(self, name: str, timeout: float) -> bool:
        return any(self.describe(name) is None for _ in range(10))

    def delete_until_gone(self, name: str, timeout: float) -> bool:
        if self.refuse_delete:
            raise KafkaUnavailableError("the controller did not answer")
        self.topics[name] = -self.lag
        if not self.lag:
            del self.topics[name]
        return not self.lag

    def create(self, name: str, partitions: int, replicas: int | None,
               config: dict[str, str], timeout: float | None = None) -> bool:
        if name in self.topics:
            return False
        self.topics[name] = 0
        self.created.append((name, partitions, config))
        return True


def image(sources: dict[str, str], requests: tuple[str, ...] = ()) -> Any:
    return SimpleNamespace(sources={name: SimpleNamespace(topic=topic)
                                    for name, topic in sources.items()},
                           requests=dict.fromkeys(requests))


def remover(admin: FakeAdmin, settles: list[bool], images: list[Any],
            hook: Any = None) -> UnusedTopics:
    return UnusedTopics(admin, lambda _patience: settles.pop(0),  # type: ignore[arg-type]
                        lambda: images.pop(0), hook)


def test_an_unused_topic_is_deleted_and_a_used_one_is_kept() -> None:
    admin = FakeAdmin({"t", "u"})
    gone = remover(admin, [True, True], [image({"S": "u"}), image({"S": "u"})]).remove(
        [("r1", {"t": SPEC, "u": TopicSpec("u", 1, None)})], patience=0.1)
    assert gone == ["t"] and set(admin.topics) == {"u"} and admin.created == []


def test_nothing_is_deleted_when_the_log_does_not_settle_or_the_request_was_written() -> None:
    admin = FakeAdmin({"t"})
    assert remover(admin, [False], []).remove([("r1", {"t": SPEC})], patience=0.1) == []
    assert remover(admin, [True], [image({}, ("r1",))]).remove(
        [("r1", {"t": SPEC})], patience=0.1) == []
    assert set(admin.topics) == {"t"}


def test_a_topic_a_source_uses_once_deleted_is_created_again_as_it_was() -> None:
    admin = FakeAdmin({"t"})
    gone = remover(admin, [True, True], [image({}), image({"OTHER": "t"})]).remove(
        [("r1", {"t": SPEC})], patience=0.1)
    assert gone == [] and admin.created == [("t", 3, {"retention.ms": "1000"})]


def test_every_deleted_topic_is_created_again_when_the_log_does_not_settle_after() -> None:
    admin = FakeAdmin({"t"})
    gone = remover(admin, [True, False], [image({})]).remove([("r1", {"t": SPEC})], patience=0.1)
    assert gone == [] and [name for name, _, _ in admin.created] == ["t"]


def test_a_deletion_kafka_has_not_finished_is_waited_for_before_the_topic_is_made_again() -> None:
    admin = FakeAdmin({"t"}, lag=3)
    remover(admin, [True, True], [image({}), image({"OTHER": "t"})]).remove(
        [("r1", {"t": SPEC})], patience=0.5)
    assert [name for name, _, _ in admin.created] == ["t"]


def test_a_deletion_kafka_refuses_leaves_the_topic_and_raises_nothing() -> None:
    admin = FakeAdmin({"t"}, refuse_delete=True)
    gone = remover(admin, [True, True], [image({}), image({})]).remove(
        [("r1", {"t": SPEC})], patience=0.1)
    assert gone == ["t"] and set(admin.topics) == {"t"}
