"""What every request goes through before its route: credentials and failed logins, the body's
declared length, and the body read within its time and size limits and parsed (JSON nesting
bounded); then an unexpected failure answered without the server's internals."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

from fastapi import Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.datastructures import MutableHeaders
from starlette.requests import ClientDisconnect, HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from metastore.server.http import error_codes as codes
from metastore.server.http.answers import (
    KsqlRequest,
    KsqlResponse,
    error_response,
    generic_error,
    internal_error,
)
from metastore.server.http.auth import BasicAuth, LoginThrottle, claimed_user
from metastore.server.http.http_limits import HttpLimits, decode_json
from metastore.server.peer_certificates import CertificateUsers

UNAUTHENTICATED_PATHS = frozenset({"/healthcheck", "/chc/live", "/chc/ready", "/v1/metadata",
                                   "/v1/metadata/id"})
"""Load balancers and orchestrators probe health, and read the server's metadata, without
credentials (ksqlDB's skipped paths, and its probes)."""
INTERACTIVE_PATHS = frozenset({"/ksql", "/ksql/terminate", "/query", "/query-stream",
                               "/close-query", "/inserts-stream", "/ws/query"})
"""What a node in headless mode does not serve: statements and queries (its health, status
and metrics stay)."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
INSERTS_STREAM_PATH = "/inserts-stream"
"""Its body is not bounded as a whole: it streams rows, each bounded on its own."""


class RequestGate:
    """The checks of a request before its route, and the reading of its body, under ``limits``;
    ``auth``: the users (None: every request is let in); ``headless``: the queries file a node
    in headless mode runs (None: the node is interactive)."""

    def __init__(self, limits: HttpLimits, auth: BasicAuth | None,
                 headless: str | None = None,
                 certificates: CertificateUsers | None = None) -> None:
        """``certificates``: users are known by their client certificate (no ``auth``)."""
        self.limits = limits
        self.auth = auth
        self.headless = headless
        self.certificates = certificates
        self._logins = LoginThrottle(limits.max_failed_logins, limits.failed_login_window_seconds,
                                     limits.login_lockout_seconds, limits.max_tracked_clients,
                                     limits.max_failed_users_per_address)

    def refuse(self, request: Request) -> KsqlResponse | None:
        """The answer refusing ``request`` before its body is read, or None."""
        return self.refuse_cross_site(request) or self.authenticate(request) \
            or self.refuse_interactive(request) or self.check_length(request)

    def refuse_cross_site(self, request: HTTPConnection) -> KsqlResponse | None:
        """Refuse a state-changing request a browser sends on behalf of another site (a form
        posting to /ksql while the browser holds the console's credentials): browsers say so in
        ``Sec-Fetch-Site`` or an ``Origin`` not this node's; other clients send neither."""
        if request.scope.get("method") in SAFE_METHODS:
            return None
        site = request.headers.get("sec-fetch-site")
        if site is not None:  # the browser's own word, whatever a proxy did to Host
            foreign = site not in ("same-origin", "none")
        else:
            origin = request.headers.get("origin")
            host = request.headers.get("host", "").lower()
            foreign = origin is not None and (
                origin == "null" or origin.split("://", 1)[-1].lower() != host)
        if foreign:
            return generic_error(403, codes.FORBIDDEN, "Cross-site requests are refused: this "
                                 "node's API answers its own pages and non-browser clients")
        return None

    def refuse_interactive(self, request: HTTPConnection) -> KsqlResponse | None:
        """A statement or query sent to a node in headless mode: refused, as the node runs
        its queries file only."""
        if self.headless is None or request.url.path not in INTERACTIVE_PATHS:
            return None
        return generic_error(403, codes.FORBIDDEN, f"This node runs in headless mode, from the "
                             f"queries file {self.headless}: interactive statements and "
                             "queries are disabled.")

    def authenticate(self, request: HTTPConnection) -> KsqlResponse | None:
        """Refuse a request without valid credentials; count and limit failed logins.

        Only a request that presents credentials is a login attempt: clients that send none
        first (browsers, curl) are answered 401 without counting against them."""
        if request.url.path in UNAUTHENTICATED_PATHS:
            return None
        if self.auth is None:
            return self._certificate_user_missing(request)
        address = request.client.host if request.client is not None else ""
        header = request.headers.get("authorization")
        user = claimed_user(header)
        wait = self._logins.retry_after(user, address)
        if wait > 0:
            return generic_error(429, codes.TOO_MANY_REQUESTS, "Too many failed logins; retry "
                                 "later.", {"Retry-After": str(math.ceil(wait))})
        if self.auth.user_for(header) is not None:
            return None
        if header is not None:
            self._logins.failed(user, address)
        return generic_error(401, codes.UNAUTHORIZED, "Unauthorized",
                             {"WWW-Authenticate": 'Basic realm="metastore"'})

    def _certificate_user_missing(self, request: HTTPConnection) -> KsqlResponse | None:
        if self.certificates is None or self.certificates.user(request.scope) is not None:
            return None
        return generic_error(401, codes.UNAUTHORIZED, "Unauthorized: this node knows its users "
                             "by their client certificate, and this connection showed none its "
                             "ssl.principal.mapping.rules map to a user")

    def user_of(self, request: HTTPConnection) -> str | None:
        """The authenticated user of a request (None without authentication)."""
        if self.auth is None:
            return None if self.certificates is None else self.certificates.user(request.scope)
        return self.auth.user_for(request.headers.get("authorization"))

    def check_length(self, request: Request) -> KsqlResponse | None:
        declared = request.headers.get("content-length")
        if declared is None or request.url.path == INSERTS_STREAM_PATH:  # bounded per row
            return None
        if not (declared.isascii() and declared.isdigit()):
            return error_response(codes.BAD_REQUEST, "Invalid Content-Length header")
        if len(declared) > 18 or int(declared) > self.limits.max_body_bytes:
            return self._too_large()
        return None

    def _too_large(self) -> KsqlResponse:
        return generic_error(413, codes.PAYLOAD_TOO_LARGE, f"Request body larger than "
                             f"{self.limits.max_body_bytes} bytes", {"Connection": "close"})

    def _too_slow(self) -> KsqlResponse:
        limits = self.limits
        return generic_error(408, codes.REQUEST_TIMEOUT, f"The request body was not received in time "
                             f"(at most {limits.body_timeout_seconds:g} s for the whole body and "
                             f"{limits.body_idle_timeout_seconds:g} s between two parts of it)",
                             {"Connection": "close"})

    async def read_body(self, request: Request) -> bytes | KsqlResponse:
        """The whole body, read within the time and size limits, or the answer refusing it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.body_timeout_seconds
        body = bytearray()
        chunks = request.stream()
        try:
            while True:
                wait = min(deadline - loop.time(), self.limits.body_idle_timeout_seconds)
                async with asyncio.timeout(max(wait, 0.0)):
                    chunk = await anext(chunks, None)
                if chunk is None:
                    request.state.body_read = True
                    return bytes(body)
                body += chunk
                if len(body) > self.limits.max_body_bytes:
                    return self._too_large()
        except TimeoutError:
            return self._too_slow()
        except ClientDisconnect:
            return error_response(codes.BAD_REQUEST, "The client closed the connection before "
                                  "sending the whole body")
        finally:
            await chunks.aclose()

    def parse_request(self, body: bytes) -> KsqlRequest | KsqlResponse:
        """A ``/ksql`` or ``/query`` body, or the answer refusing it."""
        try:
            data = decode_json(body, self.limits.max_json_depth)
        except ValueError as error:
            return error_response(codes.BAD_REQUEST, f"Malformed JSON in request: {error}")
        try:
            return KsqlRequest.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            return error_response(codes.BAD_REQUEST,
                                  f"Invalid request: {where or 'body'}: {first.get('msg')}")


class Guard:
    """What every request goes through: ``refuse`` may answer it first (bad credentials, a body
    too large), an unexpected failure before the answer started is answered by
    :func:`internal_error`, and the answer's ``Connection`` header fits the protocol (none in
    HTTP/2; ``close`` where a declared body was left unread).

    Plain ASGI, not Starlette's ``BaseHTTPMiddleware``: that one reads the request's receive
    channel itself, which ``/inserts-stream`` reads row by row, and Starlette before 0.38.3 lost
    body chunks between the two."""

    def __init__(self, app: ASGIApp, refuse: Callable[[Request], Response | None]) -> None:
        self._app = app
        self._refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        request = Request(scope, receive)
        started = False

        async def send_fitted(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                if scope.get("http_version", "1.1") == "2":
                    del headers["connection"]  # HTTP/2 has no connection-specific headers
                elif _body_left_unread(request):
                    headers["connection"] = "close"
            await send(message)

        try:
            refusal = self._refuse(request)
            if refusal is not None:
                await refusal(scope, receive, send_fitted)
            else:
                await self._app(scope, receive, send_fitted)
        except Exception:  # the server never dies of a request, nor tells its internals
            if started:
                raise  # too late for an answer: the server aborts the response
            await internal_error(request)(scope, receive, send_fitted)


def _body_left_unread(request: Request) -> bool:
    """Whether the request declared a body that was not read: answered before it (refused, or
    an endpoint without a body). Its connection must close, or a client could keep it open for
    ever by sending the rest of the body slowly (the server discards it, and every byte resets
    the keep-alive timeout)."""
    declared = request.headers.get("content-length", "0") != "0"
    chunked = "transfer-encoding" in request.headers
    return (declared or chunked) and not getattr(request.state, "body_read", False)


