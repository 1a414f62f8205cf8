"""The REST edge against hostile and broken clients: nested JSON, bodies that never finish,
unexpected failures, password guessing, the auth file's format, and a health check that follows
Kafka and the command log.

Node processes run on the session's real broker; the login limiter, the JSON depth check and the
health probe's cache are also tested on their own, with a fake clock where time matters.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import logging
import select
import signal
import socket
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from starlette.middleware.base import BaseHTTPMiddleware

from metastore.cluster.health import HealthProbe
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from metastore.log.topic import command_topic_name
from metastore.server.http.app import create_app
from metastore.server.http.auth import BasicAuth, LoginThrottle
from metastore.server.http.http_limits import HttpLimits, JsonTooDeepError, check_json_depth, decode_json
from metastore.server.node import Node, NodeConfig
from tests.support.servers import ServerProcess, gauge
from tests.support.waiting import eventually

ServerFactory = Callable[..., ServerProcess]
NESTED = b'{"ksql": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def error_body(response: httpx.Response, status: int, code: int) -> dict[str, object]:
    assert response.status_code == status, response.text[:500]
    body = response.json()
    assert body["@type"] == "generic_error" and body["error_code"] == code, body
    return dict(body)


# --- nested JSON ---------------------------------------------------------------------------

def test_json_depth_is_bounded_without_recursion() -> None:
    check_json_depth("[" * 64 + "]" * 64, 64)
    with pytest.raises(JsonTooDeepError):
        check_json_depth("[" * 65 + "]" * 65, 64)
    with pytest.raises(JsonTooDeepError):
        check_json_depth('{"a": {"b": ' * 40 + "1" + "}" * 80, 64)
    check_json_depth('{"ksql": "' + "[{" * 100_000 + '"}', 2)
    check_json_depth(r'{"ksql": "\"[[[[\\"}', 1)
    with pytest.raises(JsonTooDeepError):
        decode_json(NESTED, 64)
    assert decode_json('{"ksql": "[["}'.encode("utf-16"), 1) == {"ksql": "[["}
    with pytest.raises(ValueError, match="codec"):
        decode_json(b'{"ksql": "\xff"}', 64)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_numbers_are_json_numbers(constant: str) -> None:
    """Python's decoder reads NaN and Infinity; JSON (and ksqlDB's Jackson) has no such number."""
    with pytest.raises(ValueError, match=f"{constant} is not a JSON number"):
        decode_json(f'{{"ksql": "SHOW STREAMS;", "streamsProperties": {{"x": {constant}}}}}'
                    .encode(), 64)


def test_deeply_nested_json_is_a_400(server: ServerProcess) -> None:
    client = server.http()
    for path in ("/ksql", "/query"):
        response = client.post(path, content=NESTED, headers={"Content-Type": "application/json"})
        body = error_body(response, 400, 40000)
        assert "nested deeper than 64 levels" in str(body["message"])
    nested_properties = {"ksql": "SHOW STREAMS;", "streamsProperties": {"a": [[[[1]]]]}}
    assert client.post("/ksql", json=nested_properties).status_code == 200
    too_deep = {"ksql": "SHOW STREAMS;", "streamsProperties": {"a": _nest(70)}}
    error_body(client.post("/ksql", json=too_deep), 400, 40000)


def _nest(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


# --- bodies that never finish --------------------------------------------------------------

def _connect(server: ServerProcess) -> socket.socket:
    address = urlsplit(server.url)
    assert address.hostname is not None and address.port is not None
    return socket.create_connection((address.hostname, address.port), timeout=10)


def _post_head(length: int | str) -> bytes:
    return (f"POST /ksql HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode("latin-1")


def _read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a timeout fails the test)."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def _status_and_json(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in
               (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), headers, body


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response (with a Content-Length) from a connection that stays open."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    status, headers, body = _status_and_json(received)
    while len(body) < int(headers["content-length"]):
        body += sock.recv(65536)
    return status, headers, body


@pytest.mark.serial  # measures the machine: alone, after the parallel phase
def test_a_body_that_stops_is_a_408_after_the_idle_timeout(
        server_factory: ServerFactory) -> None:
    server = server_factory("--http-limit", "body_idle_timeout_seconds=1",
                            "--http-limit", "body_timeout_seconds=4",
                            "--http-limit", "max_body_bytes=1000")
    with _connect(server) as sock:
        sock.sendall(_post_head(100) + b'{"ksql": "SHOW')
        started = time.monotonic()
        raw = _read_until_closed(sock)
        elapsed = time.monotonic() - started
    status, headers, body = _status_and_json(raw)
    assert status == 408, raw
    assert 0.8 < elapsed < 3.5, elapsed
    assert headers["connection"] == "close"
    assert b'"error_code":40800' in body and b"generic_error" in body
    client = server.http()
    assert client.post("/ksql", json={"ksql": "SHOW STREAMS;"}).status_code == 200
    chunked = client.post("/ksql", content=iter([b'{"ksql": "', b"x" * 600, b"y" * 600, b'"}']))
    assert "content-length" not in chunked.request.headers
    error_body(chunked, 413, 41300)
    for length in ("9" * 5000, "\xb2"):
        with _connect(server) as sock:
            sock.sendall(_post_head(length) + b"{}")
            status, _, _ = _status_and_json(_read_until_closed(sock))
        assert status in (400, 413), (length, status)


@pytest.mark.serial  # measures the machine: alone, after the parallel phase
def test_a_body_dribbled_slowly_is_a_408_after_the_total_timeout(
        server_factory: ServerFactory) -> None:
    server = server_factory("--http-limit", "body_idle_timeout_seconds=1",
                            "--http-limit", "body_timeout_seconds=3")
    with _connect(server) as sock:
        sock.sendall(_post_head(10_000) + b'{"ksql": "')
        started = time.monotonic()
        sent = 0
        while not select.select([sock], [], [], 0.3)[0]:
            sock.sendall(b"x")
            sent += 1
            assert time.monotonic() - started < 10, "the server never stopped the upload"
        elapsed = time.monotonic() - started
        raw = _read_until_closed(sock)
    status, headers, _ = _status_and_json(raw)
    assert status == 408, raw
    assert 2.8 < elapsed < 6, elapsed
    assert sent >= 8, "the client kept sending within the idle timeout"
    assert headers["connection"] == "close"


def test_a_body_left_unread_closes_the_connection(server: ServerProcess) -> None:
    """An answer given before the body was read closes the connection: otherwise a client could
    hold it open for ever by dribbling the rest of the body, which the server discards."""
    with _connect(server) as sock:
        sock.sendall(b"GET /info HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\n\r\nab")
        sock.settimeout(5)
        status, headers, _ = _status_and_json(_read_until_closed(sock))
    assert status == 200 and headers["connection"] == "close"
    whole = b'{"ksql": "SHOW STREAMS;"}'
    with _connect(server) as sock:
        for _ in range(2):
            sock.sendall(_post_head(len(whole)) + whole)
            status, headers, _ = _read_response(sock)
            assert status == 200 and "connection" not in headers, "kept alive"


def test_http_limits_from_settings() -> None:
    limits = HttpLimits.from_settings({"body_timeout_seconds": "2.5", "max_body_bytes": 10})
    assert limits.body_timeout_seconds == 2.5 and limits.max_body_bytes == 10
    assert limits.max_failed_logins == HttpLimits().max_failed_logins
    with pytest.raises(ValueError, match="unknown HTTP limit"):
        HttpLimits.from_settings({"max_body": "1"})
    with pytest.raises(ValueError, match="an integer"):
        HttpLimits.from_settings({"max_body_bytes": "1.5"})
    with pytest.raises(ValueError, match="must be positive"):
        HttpLimits(body_idle_timeout_seconds=0)


# --- unexpected failures -------------------------------------------------------------------

def test_an_unexpected_failure_answers_an_incident_id_and_no_internals(
        node_factory: Callable[..., Node], caplog: pytest.LogCaptureFixture) -> None:
    """A pull-query runner (Spark, on a real node) that fails in a way nobody planned for."""

    def failing_runner(text: str, config: object) -> object:
        raise RuntimeError(f"secret internal detail while running {text}")

    async def send(path: str, text: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://node") as client:
            return await client.post(path, json={"ksql": text})

    app = create_app(node_factory(), query_runner=failing_runner)
    with caplog.at_level(logging.ERROR, logger="metastore.server.http.app"):
        response = asyncio.run(send("/query", "SELECT * FROM X;"))
    body = error_body(response, 500, 50000)
    message = str(body["message"])
    assert "secret" not in response.text and "RuntimeError" not in response.text
    assert message.startswith("Internal error (incident ")
    assert message.endswith("); the node's log has the details")
    incident = message.removeprefix("Internal error (incident ").split(")")[0]
    [record] = [r for r in caplog.records if incident in r.getMessage()]
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert "secret internal detail" in caplog.text and "Traceback" in caplog.text
    assert asyncio.run(send("/ksql", "SHOW STREAMS;")).status_code == 200


def test_the_guard_leaves_the_request_body_to_the_endpoints() -> None:
    """Starlette's BaseHTTPMiddleware reads the receive channel that /inserts-stream reads row by
    row (and lost body chunks before Starlette 0.38.3): the guard is plain ASGI middleware, and
    the project requires a Starlette without that bug."""
    app = create_app(Node(NodeConfig("svc", "127.0.0.1:1")))
    assert app.user_middleware, "the guard is registered"
    assert not [m for m in app.user_middleware if issubclass(m.cls, BaseHTTPMiddleware)]
    with (Path(__file__).resolve().parents[2] / "pyproject.toml").open("rb") as file:
        dependencies = tomllib.load(file)["project"]["dependencies"]
    assert "starlette>=0.38.3" in dependencies


# --- logins --------------------------------------------------------------------------------

def test_failed_logins_lock_a_user_out_then_expire_and_not_the_others_behind_its_address(
        ) -> None:
    clock = FakeClock()
    throttle = LoginThrottle(max_failures=3, window=60, lockout=30, clock=clock)
    for _ in range(2):
        throttle.failed("alice", "10.0.0.1")
    assert throttle.retry_after("alice", "10.0.0.1") == 0
    throttle.failed("alice", "10.0.0.1")
    assert throttle.retry_after("alice", "10.0.0.1") == 30
    assert throttle.retry_after("alice", "10.0.0.2") == 30, "the user, from anywhere"
    assert throttle.retry_after("bob", "10.0.0.1") == 0, "another user behind the same address"
    assert throttle.retry_after(None, "10.0.0.1") == 0
    clock.now += 29.5
    assert throttle.retry_after("alice", "10.0.0.1") == 0.5
    clock.now += 0.5
    assert throttle.retry_after("alice", "10.0.0.1") == 0
    for _ in range(5):  # failures spread wider than the window never add up to a lockout
        throttle.failed("alice", "10.0.0.1")
        clock.now += 31
    assert throttle.retry_after("alice", "10.0.0.1") == 0


def test_many_users_failing_from_one_address_lock_the_address_out() -> None:
    clock = FakeClock()
    throttle = LoginThrottle(max_failures=3, window=60, lockout=30, max_users_per_address=5,
                             clock=clock)
    for index in range(4):
        throttle.failed(f"user-{index}", "10.0.0.9")
    assert throttle.retry_after("carol", "10.0.0.9") == 0
    throttle.failed("user-4", "10.0.0.9")
    assert throttle.retry_after("carol", "10.0.0.9") == 30, "password spraying"
    assert throttle.retry_after("carol", "10.0.0.10") == 0, "carol herself is not locked"
    clock.now += 30
    for index in range(10):  # the same users again, spread wider than the window
        throttle.failed(f"user-{index % 4}", "10.0.0.9")
        clock.now += 61
    assert throttle.retry_after("carol", "10.0.0.9") == 0


def test_login_bookkeeping_is_bounded() -> None:
    throttle = LoginThrottle(max_failures=1, lockout=60, max_clients=100, clock=FakeClock())
    throttle.failed("first", "10.0.0.1")
    assert throttle.retry_after("first", "10.0.0.2") == 60
    for index in range(10_000):
        throttle.failed(f"user-{index}", f"10.{index // 256}.{index % 256}.1")
    assert throttle.tracked() == 200
    assert throttle.retry_after("first", "10.0.0.2") == 0, "the oldest user is forgotten first"


def test_failed_logins_over_http_are_answered_429_until_the_lockout_ends(
        server_factory: ServerFactory, tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text("alice:s3cret  \nbob:b0b\n")
    server = server_factory("--auth-file", str(users), "--http-limit", "max_failed_logins=3",
                            "--http-limit", "login_lockout_seconds=2")
    info = f"{server.url}/info"
    assert httpx.get(info, auth=("alice", "s3cret  ")).status_code == 200
    assert httpx.get(info).status_code == 401, "no credentials: not a login attempt"
    for password in ("s3cret", "wrong", "s3cret "):
        assert httpx.get(info, auth=("alice", password)).status_code == 401
    locked = httpx.get(info, auth=("alice", "s3cret  "))
    body = error_body(locked, 429, 42900)
    assert "Too many failed logins" in str(body["message"])
    assert locked.headers["Retry-After"] in ("1", "2")
    assert httpx.post(f"{server.url}/ksql", json={"ksql": "SHOW STREAMS;"},
                      auth=("alice", "s3cret  ")).status_code == 429
    assert httpx.get(info, auth=("bob", "b0b")).status_code == 200, \
        "another user behind the same address is not locked out"
    assert httpx.get(info).status_code == 401
    assert httpx.get(f"{server.url}/healthcheck").status_code == 200
    time.sleep(2.1)
    assert httpx.get(info, auth=("alice", "s3cret  ")).status_code == 200


def test_the_auth_file_keeps_passwords_exactly(tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_bytes(b"\xef\xbb\xbfalice:trailing  \n  # a comment\n\n   \n"
                      b"bob: leading\r\ncarol:a:b#c\ndave:\n")
    auth = BasicAuth.from_file(users)
    assert auth.user_for(_basic("alice", "trailing  ")) == "alice"
    assert auth.user_for(_basic("alice", "trailing")) is None
    assert auth.user_for(_basic("bob", " leading")) == "bob"
    assert auth.user_for(_basic("bob", " leading\r")) is None
    assert auth.user_for(_basic("carol", "a:b#c")) == "carol"
    assert auth.user_for(_basic("dave", "")) == "dave"
    for content, line, problem in [("alice:x\n alice:y\n", 2, "surrounding spaces"),
                                   ("alice :x\n", 1, "surrounding spaces"),
                                   ("# users\n:x\n", 2, "expected 'user:password'"),
                                   ("alice\n", 1, "expected 'user:password'")]:
        users.write_text(content)
        with pytest.raises(ValueError, match=f"{users}:{line}: .*{problem}"):
            BasicAuth.from_file(users)
    users.write_text("# nobody\n\n")
    with pytest.raises(ValueError, match="no credentials"):
        BasicAuth.from_file(users)


def _basic(user: str, password: str) -> str:
    import base64

    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# --- health --------------------------------------------------------------------------------

def test_healthcheck_reports_a_deleted_command_topic(server: ServerProcess,
                                                     kafka_admin: Admin) -> None:
    healthy = httpx.get(f"{server.url}/healthcheck", timeout=10)
    assert healthy.status_code == 200
    assert healthy.json() == {"isHealthy": True, "details": {
        "metastore": {"isHealthy": True}, "kafka": {"isHealthy": True},
        "commandRunner": {"isHealthy": True, "state": "READY"}}}
    topic = command_topic_name(server.service_id)
    kafka_admin.delete(topic)

    def unhealthy() -> httpx.Response | None:
        response = httpx.get(f"{server.url}/healthcheck", timeout=10)
        return response if response.status_code != 200 else None

    response = eventually(unhealthy, 30, "the health check to notice the deleted topic")
    assert response.status_code == 503
    body = response.json()
    assert body["isHealthy"] is False
    assert body["details"]["kafka"] == {"isHealthy": True}
    assert body["details"]["metastore"] == {
        "isHealthy": False, "reason": f"the command topic {topic} does not exist"}


def test_the_health_probe_asks_kafka_at_most_once_per_ttl(kafka_settings: KafkaSettings,
                                                          topic_factory: Callable[..., str]) -> None:
    clock = FakeClock()
    probe = HealthProbe(Admin(kafka_settings, timeout=3), topic_factory(), ttl=2, clock=clock)
    for _ in range(50):
        assert probe.check().healthy
    assert probe.probes == 1
    clock.now += 1.9
    probe.check()
    assert probe.probes == 1
    clock.now += 0.2
    probe.check()
    assert probe.probes == 2
    missing = HealthProbe(Admin(kafka_settings, timeout=3), "no-such-topic-here", clock=clock)
    found = missing.check()
    assert found.kafka_reachable and not found.command_topic_exists


@pytest.mark.serial  # measures the machine: alone, after the parallel phase
def test_the_health_probe_answers_quickly_when_kafka_is_down() -> None:
    probe = HealthProbe(Admin(KafkaSettings("127.0.0.1:1"), timeout=1), "any", timeout=1.5)
    started = time.monotonic()
    found = probe.check()
    assert time.monotonic() - started < 4
    assert not found.kafka_reachable and not found.healthy
    assert found.reason == "Kafka did not answer within 1.5 s"


def test_statements_waiting_on_the_log_leave_health_and_queries_their_threads(
        server_factory: ServerFactory) -> None:
    """Requests waiting for a commandSequenceNumber far ahead fill every thread of the
    statements lane and its bound: another statement is refused at once, and /healthcheck,
    /status and /query are still answered at once."""
    server = server_factory("--http-limit", "statement_threads=2",
                            "--http-limit", "max_concurrency=6", "--read-timeout", "60")
    far = {"ksql": "SHOW STREAMS;", "commandSequenceNumber": 10**9}
    pool = concurrent.futures.ThreadPoolExecutor(6)
    try:
        for _ in range(6):
            pool.submit(httpx.post, f"{server.url}/ksql", json=far, timeout=90)
        eventually(lambda: gauge(server, "metastore_http_statements_in_flight") == 6, 30,
                   "six statements waiting")
        refused = httpx.post(f"{server.url}/ksql", json={"ksql": "SHOW STREAMS;"}, timeout=10)
        error_body(refused, 503, 50300)
        assert "statements requests" in refused.json()["message"]
        started = time.monotonic()
        assert httpx.get(f"{server.url}/healthcheck", timeout=10).status_code == 200
        assert httpx.get(f"{server.url}/status", timeout=10).status_code == 200
        query = httpx.post(f"{server.url}/query", json={"ksql": "SELECT * FROM NOPE;"},
                           timeout=10)
        assert "requests at once" not in query.text  # answered (Spark is off here), not queued
        assert time.monotonic() - started < 8
    finally:
        server.stop(signal.SIGKILL)  # ends the waiting requests at once
        pool.shutdown(wait=True)


def _open_inserts_stream(server: ServerProcess, user: str, password: str,
                         target: str) -> socket.socket:
    """An inserts stream of ``user`` that sends its arguments and then nothing (HTTP/1.1)."""
    address = urlsplit(server.url)
    assert address.hostname is not None and address.port is not None
    sock = socket.create_connection((address.hostname, address.port), timeout=30)
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    sock.sendall(f"POST /inserts-stream HTTP/1.1\r\nHost: test\r\nAuthorization: Basic {token}"
                 "\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
    arguments = f'{{"target":"{target}"}}\n'.encode()
    sock.sendall(f"{len(arguments):x}\r\n".encode() + arguments + b"\r\n")
    return sock


def _answer(sock: socket.socket, until: bytes) -> bytes:
    received = b""
    while until not in received:
        more = sock.recv(65536)
        if not more:
            break
        received += more
    return received


def test_one_clients_idle_streams_hold_its_share_only_and_end_at_their_deadline(
        server_factory: ServerFactory, tmp_path: Path) -> None:
    """Alice's inserts streams that never send a row fill her share of the inserts lane: her
    next one is answered 429, Bob (behind the same address) is served meanwhile, and her
    streams end with a 408 error row at their idle deadline, which frees her share."""
    users = tmp_path / "users"
    users.write_text("alice:a\nbob:b\n")
    server = server_factory("--auth-file", str(users),
                            "--http-limit", "max_requests_per_client=3",
                            "--http-limit", "inserts_idle_timeout_seconds=8")
    created = httpx.post(f"{server.url}/ksql", auth=("bob", "b"), timeout=30, json={
        "ksql": "CREATE STREAM IDLE (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='idle-stream', "
                "VALUE_FORMAT='JSON', PARTITIONS=1);"})
    assert created.status_code == 200, created.text
    held = [_open_inserts_stream(server, "alice", "a", "IDLE") for _ in range(3)]
    try:
        for sock in held:
            assert _answer(sock, b"\r\n\r\n").startswith(b"HTTP/1.1 200"), "streams started"
        fourth = _open_inserts_stream(server, "alice", "a", "IDLE")
        with fourth:
            refused = _answer(fourth, b"}")
        assert refused.startswith(b"HTTP/1.1 429") and b"42900" in refused, refused
        started = time.monotonic()
        shown = httpx.post(f"{server.url}/ksql", json={"ksql": "SHOW STREAMS;"},
                           auth=("bob", "b"), timeout=10)
        inserted = httpx.post(f"{server.url}/inserts-stream", auth=("bob", "b"), timeout=10,
                              content=b'{"target":"IDLE"}\n{"ID":1,"V":"x"}\n')
        answered = time.monotonic() - started
        assert shown.status_code == 200 and inserted.status_code == 200, inserted.text
        assert b'"status":"ok"' in inserted.content
        metrics = httpx.get(f"{server.url}/metrics", auth=("bob", "b"), timeout=10).text
        assert "\nmetastore_http_inserts_in_flight 3.0\n" in metrics, \
            "Bob was answered while Alice's three streams were held, not after them"
        assert answered < 6, f"not queued behind Alice's streams' deadline: {answered:.3f} s"
        for sock in held:
            ended = _answer(sock, b"0\r\n\r\n")
            assert b'"status":"error","seq":0,"error_code":40800' in ended, ended
            assert b"No row arrived within 8 s" in ended
    finally:
        for sock in held:
            sock.close()
    again = httpx.post(f"{server.url}/inserts-stream", auth=("alice", "a"), timeout=10,
                       content=b'{"target":"IDLE"}\n{"ID":2,"V":"y"}\n')
    assert again.status_code == 200 and b'"status":"ok"' in again.content, again.text
