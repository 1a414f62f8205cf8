"""`interactive`: what a ksqlDB user waits for at the prompt, on one node process with Spark.

- **Pull queries**: key lookups (``SELECT * FROM T WHERE ID = k``) over ``POST /query`` on a
  table of 100,000 keys (10,000 with ``--quick``), answered from the table kept materialized on
  the node, against the same lookups answered by Spark (a projection with an expression, which
  the store leaves to Spark: it reads the whole topic).
- **Push queries**: the first-row latency of ``SELECT ... EMIT CHANGES`` over ``/query-stream``:
  from sending the query to the first row, a record being produced once the query answered its
  header (the Spark streaming query's start is part of it).
"""

from __future__ import annotations

import json
import random
import struct
import threading
import time
from typing import Any

import httpx
from confluent_kafka import Producer

from integration.bench.common import kafka, node_processes, summary_ms


def run(quick: bool) -> dict[str, Any]:
    keys = 10_000 if quick else 100_000
    with kafka() as bootstrap, node_processes(bootstrap, 1) as state:
        [node] = state.nodes
        with httpx.Client(base_url=node.url, timeout=120) as client:
            wait_for_spark(client)
            table = create_table(client, bootstrap, state.service_id, keys)
            store = lookups(client, table, keys, 200 if quick else 1000, "*")
            spark = lookups(client, table, keys, 5 if quick else 20, "ID, UCASE(NAME) AS U")
            push = first_rows(client, bootstrap, state.service_id, 3 if quick else 10)
            from_stores = gauge(client, "metastore_pull_queries_from_stores_total")
    return {"table_keys": keys, "pull_lookup_from_store": store, "pull_lookup_by_spark": spark,
            "pull_answers_from_store": from_stores, "push_first_row": push}


def gauge(client: httpx.Client, name: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return -1.0


def wait_for_spark(client: httpx.Client) -> None:
    deadline = time.monotonic() + 300
    while gauge(client, "metastore_spark_streaming_queries") < 0:
        if time.monotonic() > deadline:
            raise RuntimeError("Spark did not start")
        time.sleep(1)


def ksql(client: httpx.Client, text: str) -> None:
    response = client.post("/ksql", json={"ksql": text})
    assert response.status_code == 200, response.text


def create_table(client: httpx.Client, bootstrap: str, service: str, keys: int) -> str:
    topic = f"{service}-lookups"
    ksql(client, f"CREATE SOURCE TABLE LOOKUPS (ID INT PRIMARY KEY, NAME STRING, N BIGINT) WITH "
                 f"(KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=4);")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.num.messages": 10000})
    for key in range(keys):
        value = json.dumps({"NAME": f"name-{key}", "N": key}).encode()
        while True:
            try:
                producer.produce(topic, key=struct.pack(">i", key), value=value)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0
    deadline = time.monotonic() + 600  # the store fills from the topic (the first answers: Spark)
    while gauge(client, "metastore_pull_queries_from_stores_total") < 1:
        if time.monotonic() > deadline:
            raise RuntimeError("the table's store did not catch up")
        lookup(client, "LOOKUPS", "*", keys - 1)
        time.sleep(1)
    return "LOOKUPS"


def lookup(client: httpx.Client, table: str, projection: str, key: int) -> float:
    started = time.perf_counter()
    response = client.post("/query", json={"ksql": f"SELECT {projection} FROM {table} WHERE "
                                                   f"ID = {key};"})
    elapsed = time.perf_counter() - started
    assert response.status_code == 200, response.text
    assert len(response.json()) == 2, response.text
    return elapsed


def lookups(client: httpx.Client, table: str, keys: int, count: int,
            projection: str) -> dict[str, Any]:
    chooser = random.Random(7)
    samples = [lookup(client, table, projection, chooser.randrange(keys)) for _ in range(count)]
    return summary_ms(samples)


def first_rows(client: httpx.Client, bootstrap: str, service: str, count: int) -> dict[str, Any]:
    topic = f"{service}-push"
    ksql(client, f"CREATE STREAM PUSHED (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{topic}', "
                 "VALUE_FORMAT='JSON', PARTITIONS=1);")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    samples = []
    for index in range(count):
        body = {"sql": f"SELECT ID, V FROM PUSHED WHERE ID = {index} EMIT CHANGES LIMIT 1;"}
        started = time.perf_counter()
        with client.stream("POST", "/query-stream", json=body) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            next(lines)  # the header: the query runs; produce until its row arrives
            stop = threading.Event()

            def produce(key: int = index, stop: threading.Event = stop) -> None:
                while not stop.is_set():
                    producer.produce(topic, key=struct.pack(">i", key), value=b'{"V":"x"}')
                    producer.flush(10)
                    stop.wait(0.05)

            producing = threading.Thread(target=produce, daemon=True)
            producing.start()
            row = next(line for line in lines if line.strip())
            samples.append(time.perf_counter() - started)
            stop.set()
            producing.join()
        assert json.loads(row) == [index, "x"], row
    return summary_ms(samples)
