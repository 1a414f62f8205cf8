"""A repair re-creates the command topic, then waits for a broker to describe the new topic:
its metadata may lag the controller's, describing the deleted topic, or none, for a moment."""

from __future__ import annotations

import pytest

from metastore.kafka.exceptions import KafkaTopicError
from metastore.log.exceptions import RepairError
from metastore.log.rewrite import new_topic_id


class _LaggingAdmin:
    """Describes the topic as the broker's metadata answers, one answer a call."""

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.calls = 0

    def topic_id(self, topic: str) -> str:
        self.calls += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if answer is None:
            raise KafkaTopicError(topic, f"topic {topic} does not exist")
        return answer


def test_the_new_id_is_awaited_past_the_deleted_topics_and_no_topic() -> None:
    admin = _LaggingAdmin("old", None, "old", "new")
    assert new_topic_id(admin, "log", "old", within=5, pause=0) == "new"  # type: ignore[arg-type]
    assert admin.calls == 4


@pytest.mark.parametrize(("answer", "message"), [
    ("old", "log kept its topic id old: it was not re-created"),
    (None, "log was not re-created")])
def test_a_topic_never_re_created_is_a_repair_error(answer: str | None, message: str) -> None:
    with pytest.raises(RepairError, match=message):
        new_topic_id(_LaggingAdmin(answer), "log", "old", within=0.05,  # type: ignore[arg-type]
                     pause=0.01)
