"""`metastore server` starts the node while it loads the HTTP stack
(metastore.server.build._while_the_node_starts): the two overlap, and a failure of either stops what
the other started."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from metastore.server.build import NodeServices, _while_the_node_starts


class FakeServices:
    def __init__(self, start_error: Exception | None = None) -> None:
        self.start_error = start_error
        self.loading = threading.Event()
        self.started = self.stopped = False
        self.told_to_stop = threading.Event()

    def start(self) -> None:
        assert self.loading.wait(10), "the node starts while the stack loads"
        if self.start_error is not None:
            raise self.start_error
        self.started = True

    def stopping(self) -> None:
        self.told_to_stop.set()

    def stop(self) -> None:
        assert self.told_to_stop.is_set(), "its waits are told before the start is joined"
        self.stopped = True


def services(fake: FakeServices) -> NodeServices:
    return cast(NodeServices, fake)


def test_the_node_starts_while_the_http_stack_loads() -> None:
    fake = FakeServices()

    def load() -> str:
        fake.loading.set()  # a start that waited for the load to finish would never see this
        return "app"

    assert _while_the_node_starts(services(fake), load) == "app"
    assert fake.started and not fake.stopped


def test_a_failed_start_is_raised_after_the_load_and_what_started_is_stopped() -> None:
    fake = FakeServices(start_error=RuntimeError("Kafka is unreachable"))

    def load() -> Any:
        fake.loading.set()
        return "app"

    with pytest.raises(RuntimeError, match="Kafka is unreachable"):
        _while_the_node_starts(services(fake), load)
    assert fake.stopped


def test_an_interrupted_start_waits_for_the_start_then_stops_the_node() -> None:
    fake = FakeServices()

    def load() -> Any:
        fake.loading.set()
        raise KeyboardInterrupt  # SIGINT while the stack loads

    with pytest.raises(KeyboardInterrupt):
        _while_the_node_starts(services(fake), load)
    assert fake.started and fake.stopped


def test_an_interrupted_start_tells_a_start_waiting_for_ready_to_give_up() -> None:
    fake = FakeServices()

    def wait_for_ready() -> None:  # as a headless start waits for READY before its file
        assert fake.told_to_stop.wait(10), "never told: the interrupt would wait for READY"
        fake.started = True

    fake.start = wait_for_ready  # type: ignore[method-assign]

    def load() -> Any:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _while_the_node_starts(services(fake), load)
    assert fake.started and fake.stopped


def test_a_started_node_is_stopped_when_the_stack_fails_to_load() -> None:
    fake = FakeServices()

    def load() -> Any:
        fake.loading.set()
        raise ImportError("no hypercorn")

    with pytest.raises(ImportError):
        _while_the_node_starts(services(fake), load)
    assert fake.started and fake.stopped
