"""`abuse`: what hostile or unlucky clients cost a node, the figures docs/security.md keeps.

- ``substitution``: the peak memory of parsing a small body whose variables expand (a DEFINE of
  a kilobyte, a DEFINE of a hundred references to it, INSERTs of the second), in a fresh process;
- ``health_under_waits``: ``/healthcheck`` latency while requests wait on a far
  ``commandSequenceNumber`` on a node without Spark;
- ``fencing_clients``: librdkafka clients in each of two nodes that fence each other on every
  write (forwarding off), after the writes;
- ``unread_push_queries``: a node's memory (RSS of its process) while four push-query clients
  stop reading a stream of 1 KB rows (60,000; 15,000 with ``--quick``), at its peak and after
  they close;
- ``misbehaving_registry``: how long a registry call takes, and what it answers, against a
  registry that drips its body or its headers, answers garbage or too much (the client's
  deadline: 5 s).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer

from integration.bench.common import kafka, node_processes, rss_mib
from integration.misbehaving_registry import MODES, misbehaving_registry
from metastore.schema_registry.client import SchemaRegistryClient
from metastore.schema_registry.exceptions import SchemaRegistryError
from metastore.server.http.error_codes import classify

_SUBSTITUTION = """
import resource, sys
from metastore.sql.variables import parse_request
kilobyte = "x" * 1000
sql = (f"DEFINE a = '{kilobyte}'; DEFINE b = '" + "${a}" * 120 + "'; "
       + " ".join("INSERT INTO S (V) VALUES ('${b}');" for _ in range(int(sys.argv[1]))))
try:
    outcome = f"{len(parse_request(sql))} statements parsed"
except Exception as error:
    outcome = f"refused: {type(error).__name__}"
print(len(sql), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, outcome)
"""


def substitution(statements: int = 1000) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", _SUBSTITUTION, str(statements)], check=True,
                         capture_output=True, text=True).stdout.split(maxsplit=2)
    return {"body_bytes": int(out[0]), "peak_mib": int(out[1]), "outcome": out[2].strip()}


def health_under_waits(bootstrap: str, waiting: int) -> dict[str, Any]:
    far = {"ksql": "SHOW STREAMS;", "commandSequenceNumber": 10**9}
    with node_processes(bootstrap, 1, "--spark-master", "none") as state, \
            concurrent.futures.ThreadPoolExecutor(waiting) as pool:
        url = state.nodes[0].url
        for _ in range(waiting):
            pool.submit(httpx.post, f"{url}/ksql", json=far, timeout=120)
        time.sleep(3)
        samples = []
        for _ in range(12):
            started = time.monotonic()
            httpx.get(f"{url}/healthcheck", timeout=120)
            samples.append(time.monotonic() - started)
            time.sleep(0.2)
        return {"waiting": waiting, "median_ms": round(statistics.median(samples) * 1000),
                "max_ms": round(max(samples) * 1000)}


def _librdkafka_clients(pid: int) -> int:
    names = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:
            continue
    return names.count("rdk:main")


def fencing_clients(bootstrap: str, writes: int) -> dict[str, Any]:
    topic = f"fence-{uuid.uuid4().hex[:6]}"
    with node_processes(bootstrap, 2, "--spark-master", "none", "--no-write-forwarding") as state:
        urls = [node.url for node in state.nodes]
        before = [_librdkafka_clients(node.pid or 0) for node in state.nodes]
        for index in range(writes):
            httpx.post(f"{urls[index % 2]}/ksql", timeout=60, json={
                "ksql": f"CREATE STREAM F{index} (ID INT) WITH (KAFKA_TOPIC='{topic}', "
                        "PARTITIONS=1, VALUE_FORMAT='JSON');"}).raise_for_status()
        after = [_librdkafka_clients(node.pid or 0) for node in state.nodes]
    return {"writes": writes, "clients_before": before, "clients_after": after}


def registry_calls() -> dict[str, Any]:
    figures = {}
    with misbehaving_registry() as url:
        for mode in MODES:
            client = SchemaRegistryClient(f"{url}/{mode}")
            started = time.monotonic()
            try:
                client.latest("orders-value")
                answer = "an answer"
            except SchemaRegistryError as error:
                answer = f"{classify(error).http_status} {classify(error).code}"
            finally:
                client.close()
            figures[mode] = {"seconds": round(time.monotonic() - started, 2), "answer": answer}
    return figures


def _fill(bootstrap: str, topic: str, rows: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    value = json.dumps({"V": "x" * 1000}).encode()
    for index in range(rows):
        producer.produce(topic, key=str(index).encode(), value=value)
        if index % 1000 == 0:
            producer.poll(0)
    producer.flush(60)


def unread_push_queries(bootstrap: str, rows: int, clients: int = 4) -> dict[str, Any]:
    topic = f"unread-{uuid.uuid4().hex[:6]}"
    with node_processes(bootstrap, 1) as state:
        node, url = state.nodes[0], state.nodes[0].url
        httpx.post(f"{url}/ksql", timeout=60, json={
            "ksql": f"CREATE STREAM U (V STRING) WITH (KAFKA_TOPIC='{topic}', PARTITIONS=1, "
                    "VALUE_FORMAT='JSON');"}).raise_for_status()
        _fill(bootstrap, topic, rows)
        before = rss_mib(node.pid or 0)
        query = {"sql": "SELECT * FROM U EMIT CHANGES;",
                 "properties": {"auto.offset.reset": "earliest"}}
        with contextlib.ExitStack() as open_streams:
            for _ in range(clients):
                client = open_streams.enter_context(httpx.Client(base_url=url, timeout=120))
                response = open_streams.enter_context(
                    client.stream("POST", "/query-stream", json=query))
                next(response.iter_bytes())  # the header, then nothing more is read
            peak = before
            for _ in range(60):
                peak = max(peak, rss_mib(node.pid or 0))
                time.sleep(0.5)
        time.sleep(10)
        return {"rows": rows, "clients": clients, "rss_before_mib": before, "rss_peak_mib": peak,
                "rss_after_close_mib": rss_mib(node.pid or 0)}


def run(quick: bool) -> dict[str, Any]:
    with kafka() as bootstrap:
        return {
            "substitution": substitution(),
            "misbehaving_registry": registry_calls(),
            "health_under_waits": health_under_waits(bootstrap, 20 if quick else 60),
            "fencing_clients": fencing_clients(bootstrap, 20 if quick else 60),
            "unread_push_queries": unread_push_queries(bootstrap, 15_000 if quick else 60_000),
        }
