"""`one-query`: what one query or one client can do to a node, the figures docs/security.md keeps.

Each probe runs a fresh node process (with Spark where it needs one) on the benchmark's broker:

- ``killer_pulls``: ``SELECT EXPLODE(GENERATE_SERIES(1, 30000000))`` and
  ``LEN(LPAD(V, 1500000000, 'y'))`` on a one-row stream: each answer's status, time and
  message, whether the node's Spark driver is the same process after them, and its health;
- ``huge_answer``: ``SELECT * FROM S LIMIT 1000000`` over 2,000 records of 10 KB: the status,
  the bytes answered, and the node's and its Spark JVM's peak memory (RSS) meanwhile;
- ``spark_killed``: the node's Spark driver JVM SIGKILLed: how long until ``/healthcheck``
  says so (503), what ``/metrics`` answers meanwhile, and how long until it is healthy again
  with a new JVM;
- ``idle_inserts_streams``: 1,000 inserts streams opened from one address that never send a
  row: how many the node holds, and how long ``/info``, ``SHOW STREAMS`` and ``/healthcheck``
  take meanwhile;
- ``locked_logins``: ten wrong passwords for one user, then another user's login from the same
  address: its status.

The probes find the Spark JVM among the node's child processes, so they measure an older
release as well (``git worktree add``, then run this file from there).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from confluent_kafka import Producer

from integration.bench.common import jvm_of, kafka, node_processes, rss_mib

KILLERS = ("SELECT EXPLODE(GENERATE_SERIES(1, 30000000)) FROM {s};",
           "SELECT LEN(LPAD(V, 1500000000, 'y')) FROM {s};")


def _stream(url: str, rows: int = 0, value: str = "x") -> str:
    name = f"P_{uuid.uuid4().hex[:8]}".upper()
    httpx.post(f"{url}/ksql", timeout=60, json={
        "ksql": f"CREATE STREAM {name} (K INT KEY, V STRING) WITH (KAFKA_TOPIC='{name}', "
                "PARTITIONS=1, VALUE_FORMAT='JSON');"}).raise_for_status()
    if rows:
        httpx.post(f"{url}/ksql", timeout=60, json={
            "ksql": f"INSERT INTO {name} (K, V) VALUES (1, '{value}');"}).raise_for_status()
    return name


@contextlib.contextmanager
def _spark_node(bootstrap: str) -> Iterator[tuple[str, int]]:
    with node_processes(bootstrap, 1, "--spark-master", "local[1]",
                        "--spark-catalog", "in-memory") as state:
        node = state.nodes[0]
        deadline = time.monotonic() + 180
        while jvm_of(node.pid or 0) is None or not _in_sync(node.url):
            if time.monotonic() > deadline:
                raise RuntimeError("the node's Spark did not start")
            time.sleep(0.5)
        yield node.url, node.pid or 0


def _in_sync(url: str) -> bool:
    try:
        return bool(httpx.get(f"{url}/v1/metastore", timeout=10).json().get("sparkInSync"))
    except (httpx.HTTPError, ValueError):
        return False


def _health(url: str) -> int | str:
    try:
        return httpx.get(f"{url}/healthcheck", timeout=10).status_code
    except httpx.HTTPError as error:
        return type(error).__name__


def killer_pulls(bootstrap: str) -> dict[str, Any]:
    with _spark_node(bootstrap) as (url, pid):
        stream = _stream(url, rows=1)
        jvm = jvm_of(pid)
        answers = []
        for query in KILLERS:
            started = time.monotonic()
            try:
                response = httpx.post(f"{url}/query", json={"ksql": query.format(s=stream)},
                                      timeout=300)
                status: int | str = response.status_code
                message = str(response.json().get("message", ""))[:160] \
                    if response.status_code != 200 else f"{len(response.content)} bytes"
            except httpx.HTTPError as error:
                status, message = type(error).__name__, str(error)[:160]
            answers.append({"query": query.format(s="S"), "status": status,
                            "seconds": round(time.monotonic() - started, 2),
                            "message": message})
        time.sleep(3)  # a JVM that died is noticed within this
        after = httpx.post(f"{url}/query", json={"ksql": f"SELECT * FROM {stream};"},
                           timeout=120)
        return {"answers": answers, "same_spark_driver": jvm_of(pid) == jvm,
                "next_pull_status": after.status_code, "health_after": _health(url)}


def _fill(bootstrap: str, topic: str, rows: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    value = json.dumps({"V": "v" * size}).encode()
    for index in range(rows):
        producer.produce(topic, key=index.to_bytes(4, "big"), value=value)
        producer.poll(0)
    producer.flush(60)


def huge_answer(bootstrap: str, rows: int = 2_000, size: int = 10_000) -> dict[str, Any]:
    with _spark_node(bootstrap) as (url, pid):
        stream = _stream(url)
        _fill(bootstrap, stream, rows, size)
        jvm = jvm_of(pid) or 0
        before = {"node_mib": rss_mib(pid), "jvm_mib": rss_mib(jvm)}
        peak = dict(before)
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.05):
                peak["node_mib"] = max(peak["node_mib"], rss_mib(pid))
                peak["jvm_mib"] = max(peak["jvm_mib"], rss_mib(jvm))

        sampler = threading.Thread(target=sample)
        sampler.start()
        started = time.monotonic()
        try:
            response = httpx.post(f"{url}/query", timeout=300, json={
                "ksql": f"SELECT * FROM {stream} LIMIT 1000000;"})
        finally:
            done.set()
            sampler.join()
        return {"rows": rows, "row_bytes": size, "status": response.status_code,
                "answer_bytes": len(response.content),
                "seconds": round(time.monotonic() - started, 2),
                "message": str(response.json().get("message", ""))[:160]
                if response.status_code != 200 else None,
                "rss_before": before, "rss_peak": peak}


def spark_killed(bootstrap: str) -> dict[str, Any]:
    with _spark_node(bootstrap) as (url, pid):
        jvm = jvm_of(pid)
        assert jvm is not None
        os.kill(jvm, signal.SIGKILL)
        killed = time.monotonic()
        unhealthy_after = metrics_status = None
        while time.monotonic() - killed < 60 and unhealthy_after is None:
            if _health(url) == 503:
                unhealthy_after = round(time.monotonic() - killed, 2)
            time.sleep(0.1)
        with contextlib.suppress(httpx.HTTPError):
            metrics_status = httpx.get(f"{url}/metrics", timeout=10).status_code
        healthy_after = None
        while time.monotonic() - killed < 240 and healthy_after is None:
            new = jvm_of(pid)
            if _health(url) == 200 and new not in (None, jvm) and _in_sync(url):
                healthy_after = round(time.monotonic() - killed, 2)
            time.sleep(0.5)
        return {"unhealthy_after_seconds": unhealthy_after, "metrics_status": metrics_status,
                "healthy_again_after_seconds": healthy_after}


def _idle_stream(url: str, target: str) -> socket.socket:
    address = urlsplit(url)
    sock = socket.create_connection((address.hostname or "", address.port or 0), timeout=30)
    arguments = f'{{"target":"{target}"}}\n'.encode()
    sock.sendall(b"POST /inserts-stream HTTP/1.1\r\nHost: bench\r\nTransfer-Encoding: chunked"
                 b"\r\n\r\n" + f"{len(arguments):x}\r\n".encode() + arguments + b"\r\n")
    return sock


def idle_inserts_streams(bootstrap: str, streams: int = 1_000) -> dict[str, Any]:
    with node_processes(bootstrap, 1, "--spark-master", "none") as state:
        url = state.nodes[0].url
        target = _stream(url)
        with contextlib.ExitStack() as held:
            for _ in range(streams):
                held.callback(_idle_stream(url, target).close)
            time.sleep(3)
            latencies: dict[str, list[float]] = {"info": [], "show_streams": [], "health": []}
            statuses: dict[str, set[int]] = {name: set() for name in latencies}
            calls: dict[str, Callable[[], httpx.Response]] = {
                "info": lambda: httpx.get(f"{url}/info", timeout=60),
                "show_streams": lambda: httpx.post(f"{url}/ksql", timeout=60,
                                                   json={"ksql": "SHOW STREAMS;"}),
                "health": lambda: httpx.get(f"{url}/healthcheck", timeout=60)}
            for _ in range(10):
                for name, call in calls.items():
                    started = time.monotonic()
                    statuses[name].add(call().status_code)
                    latencies[name].append(time.monotonic() - started)
            held_by_node = int(_gauge(url, "metastore_http_inserts_in_flight")
                               or _gauge(url, "metastore_http_statements_in_flight"))
        return {"streams": streams, "held_by_the_node": held_by_node,
                **{f"{name}_median_ms": round(statistics.median(values) * 1000)
                   for name, values in latencies.items()},
                **{f"{name}_statuses": sorted(codes) for name, codes in statuses.items()}}


def _gauge(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=30).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def locked_logins(bootstrap: str) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        directory = Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="metastore-bench-logins-")))
        (directory / "users").write_text("alice:a\nbob:b\n")
        state = stack.enter_context(node_processes(
            bootstrap, 1, "--spark-master", "none", "--auth-file", str(directory / "users")))
        url = state.nodes[0].url
        for _ in range(10):
            httpx.get(f"{url}/info", auth=("alice", "wrong"), timeout=10)
        token = base64.b64encode(b"bob:b").decode()
        other = httpx.get(f"{url}/info", headers={"Authorization": f"Basic {token}"},
                          timeout=10)
        locked = httpx.get(f"{url}/info", auth=("alice", "a"), timeout=10)
        return {"other_user_status": other.status_code, "locked_user_status": locked.status_code}


def run(quick: bool) -> dict[str, Any]:
    with kafka() as bootstrap:
        return {
            "killer_pulls": killer_pulls(bootstrap),
            "huge_answer": huge_answer(bootstrap),
            "spark_killed": spark_killed(bootstrap),
            "idle_inserts_streams": idle_inserts_streams(bootstrap, 300 if quick else 1_000),
            "locked_logins": locked_logins(bootstrap),
        }
