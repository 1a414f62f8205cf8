"""Whether the node's Spark driver JVM is alive and answering.

A :class:`SparkLiveness` thread asks the running session a trivial question (is the
SparkContext stopped?) every ``interval`` seconds, from a probe thread of its own, and waits at
most ``timeout`` seconds for the answer. Spark is *lost* when the call fails (the JVM died: a
SIGKILL, an OutOfMemoryError that ended it), when the context says it stopped, or when no answer
comes in time (a JVM stuck in garbage collection): that one is killed first, so that every
thread waiting on it is released at once. ``on_lost`` is then called once, with the reason, on
the liveness thread, after the driver is killed (what is left of a driver that failed a probe
must not write once other nodes own its queries); what the node does about it (leave the query
group, restart Spark) is the caller's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as ProbeTimeout
from typing import TYPE_CHECKING

from metastore.spark.exceptions import first_line
from metastore.spark.session import kill_driver

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

PROBE_INTERVAL_SECONDS = 1.0
PROBE_TIMEOUT_SECONDS = 20.0
"""Longer than a full garbage collection of the driver's heap takes."""


def probe(spark: SparkSession) -> str | None:
    """Why ``spark`` cannot answer (None when it can); blocks while its JVM does not answer."""
    try:
        stopped = bool(spark.sparkContext._jsc.sc().isStopped())
    except Exception as error:  # py4j: the JVM is gone, or its gateway
        return f"the Spark driver JVM does not answer ({first_line(error)})"
    return "the SparkContext stopped" if stopped else None


class SparkLiveness:
    """Watches the session ``session()`` returns (None: nothing to watch now)."""

    def __init__(self, session: Callable[[], SparkSession | None],
                 on_lost: Callable[[str], None], interval: float = PROBE_INTERVAL_SECONDS,
                 timeout: float = PROBE_TIMEOUT_SECONDS) -> None:
        self._session = session
        self._on_lost = on_lost
        self._interval = interval
        self._timeout = timeout
        self._stop = threading.Event()
        self._prober = ThreadPoolExecutor(1, thread_name_prefix="spark-probe")
        self._thread = threading.Thread(target=self._run, name="spark-liveness", daemon=True)
        self.losses = 0
        """Times Spark was found lost."""
        self._lost: object | None = None
        """The session last found lost: reported once."""

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self._timeout + 5)
        self._prober.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._watch()
            except Exception:  # the watch never ends but with the node
                log.exception("watching Spark failed; watching on")

    def _watch(self) -> None:
        """One probe of the session, and what a loss calls for."""
        spark = self._session()
        if spark is None or spark is self._lost:
            return
        reason = self._check(spark)
        if reason is not None and not self._stop.is_set() and spark is self._session():
            self._lost = spark
            self.losses += 1
            log.error("Spark is lost: %s", reason)
            try:
                kill_driver()  # whatever is left of it writes nothing once others own
                self._on_lost(reason)  # its queries
            except Exception:  # the next probe finds what is still wrong
                log.exception("handling the loss of Spark failed")

    def halt(self) -> None:
        """Watch no more, without waiting (the node is stopping: its Spark may stop first)."""
        self._stop.set()

    def _check(self, spark: SparkSession) -> str | None:
        try:
            answer = self._prober.submit(probe, spark)
            return answer.result(self._timeout)
        except ProbeTimeout:
            self._prober.shutdown(wait=False)  # its thread waits on the JVM killed below
            self._prober = ThreadPoolExecutor(1, thread_name_prefix="spark-probe")
            return f"the Spark driver JVM did not answer within {self._timeout:g} s; killed"
        except Exception as error:  # the probe itself could not run
            return f"the Spark driver JVM could not be probed ({first_line(error)})"


__all__ = ["SparkLiveness", "probe"]
