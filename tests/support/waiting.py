"""Waiting for something to become true: the one polling loop the tests use instead of
hand-written deadline loops."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar, cast

T = TypeVar("T")


def eventually(predicate: Callable[[], T | bool | None], timeout: float,
               what: str | Callable[[], str], interval: float = 0.2) -> T:
    """Call `predicate` every `interval` seconds until it returns a truthy value, and return
    that value. After `timeout` seconds raise AssertionError naming `what` (a callable `what` is
    called then, to describe the state at the deadline) and the last value the predicate
    returned, when that says more than None or False. Exceptions of the predicate propagate."""
    deadline = time.monotonic() + timeout
    while True:
        last = predicate()
        if last:
            return cast("T", last)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        time.sleep(min(interval, remaining))
    described = what() if callable(what) else what
    seen = f"; last seen: {last!r}" if last is not None and not isinstance(last, bool) else ""
    raise AssertionError(f"timed out after {timeout:g}s waiting for {described}{seen}")
