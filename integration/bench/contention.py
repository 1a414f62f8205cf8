"""`contention`: three nodes, 1/4/12 concurrent clients, this protocol against ksqlDB's.

Three modes of the same server, in the same run: ``reuse`` (the default: writes forwarded to the
node that wrote last, which keeps its transactional producer and writes queued requests in one
transaction), ``reuse_local`` (the same with ``--no-write-forwarding``: each node writes its own
requests, fencing the node that wrote before) and ``per_statement`` (a new producer and
``init_transactions()`` for every request, one request per transaction, each node writing its
own, as ksqlDB does). Non-conflicting statements measure throughput and latency;
conflicting ones (every client creating the same few names) show the cost of fencing and that no
request waits past its deadline.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import httpx

from integration.bench.common import kafka, node_processes, summary_ms
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings

REQUEST_TIMEOUT = 20.0


def run_clients(urls: list[str], clients: int, seconds: float, topic: str,
                conflicting: bool) -> dict[str, Any]:
    latencies: list[float] = []
    outcomes = {"ok": 0, "rejected": 0, "failed": 0}
    unexpected: list[str] = []  # the first answers a non-conflicting run should not get
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client(index: int) -> None:
        http = httpx.Client(base_url=urls[index % len(urls)], timeout=REQUEST_TIMEOUT + 10)
        count = 0
        while time.monotonic() < stop_at:
            name = f"HOT{count % 3}" if conflicting else f"C{index}_{count}_{uuid.uuid4().hex[:4]}"
            body = {"ksql": f"CREATE STREAM {name} (ID INT KEY, V STRING) WITH "
                            f"(KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');"}
            started = time.perf_counter()
            try:
                response = http.post("/ksql", json=body)
                status, text = response.status_code, response.text
            except httpx.TransportError as error:
                status, text = 599, str(error)
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)
                key = "ok" if status == 200 else "rejected" if status == 400 else "failed"
                outcomes[key] += 1
                if status != 200 and not conflicting and len(unexpected) < 5:
                    unexpected.append(f"{status} {text[:300]}")
            count += 1
        http.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"clients": clients, "statements_per_s": round(outcomes["ok"] / seconds, 1),
            **outcomes, "unexpected_answers": unexpected,
            "latency": summary_ms(latencies) if latencies else None,
            "max_ms": round(max(latencies) * 1000, 1) if latencies else None,
            "samples_ms": [round(x * 1000, 2) for x in latencies]}


MODES: dict[str, tuple[str, ...]] = {
    "reuse": ("--writer-mode", "reuse"),
    "reuse_local": ("--writer-mode", "reuse", "--no-write-forwarding"),
    "per_statement": ("--writer-mode", "per-statement", "--no-write-forwarding"),
}


def run_mode(bootstrap: str, mode: str, client_counts: list[int], seconds: float) -> dict[str, Any]:
    args = ("--spark-master", "none", *MODES[mode], "--request-timeout", str(REQUEST_TIMEOUT))
    with node_processes(bootstrap, 3, *args) as state:
        urls = [node.url for node in state.nodes]
        topic = f"{state.service_id}-data"
        Admin(KafkaSettings(bootstrap)).create(topic, 1)
        run_clients(urls, 3, 2, topic, conflicting=False)  # warm-up: producers, connections
        results = [run_clients(urls, n, seconds, topic, conflicting=False) for n in client_counts]
        conflicting = run_clients(urls, max(client_counts), seconds, topic, conflicting=True)
    return {"non_conflicting": results, "conflicting": conflicting}


def run(quick: bool) -> dict[str, Any]:
    seconds = 8.0 if quick else 30.0
    client_counts = [1, 4, 12]
    with kafka() as bootstrap:
        run_mode(bootstrap, "reuse_local", [1], 5)  # warm-up: a fresh broker answers slower
        results = {mode: run_mode(bootstrap, mode, client_counts, seconds) for mode in MODES}
    at_max = {mode: result["non_conflicting"][-1]["statements_per_s"]
              for mode, result in results.items()}
    ratio = at_max["reuse"] / at_max["per_statement"] if at_max["per_statement"] else None
    return {"seconds_per_point": seconds, **results,
            "throughput_ratio_at_12_clients": round(ratio, 1) if ratio else None}
