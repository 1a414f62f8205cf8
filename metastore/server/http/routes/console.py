"""The web console (``GET /console/``): a page of plain ES modules and a style sheet shipped in
the package (``metastore/server/console/``), served as they are, with no build step and nothing
fetched from elsewhere, behind the same authentication as the API it calls. It adds no
capability of its own: each view reads an endpoint a client or the CLI also reads
(``/clusterStatus``, ``/v1/metastore``, ``/ksql``, ``/query-stream``, ``/close-query``,
``/v1/metastore/log``)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse, Response

from metastore import __version__
from metastore.server.http import error_codes as codes
from metastore.server.http.answers import error_response
from metastore.server.http.context import ServerContext

ASSETS = Path(__file__).resolve().parents[2] / "console"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
SERVED = {path.name: path for path in ASSETS.iterdir() if path.suffix in TYPES}
"""The assets, by name, found once: a request names one of them or is refused."""


def router(context: ServerContext) -> APIRouter:
    del context  # the page calls the API like any client
    api = APIRouter()

    @api.get("/console", include_in_schema=False)
    async def console() -> Response:
        return RedirectResponse("/console/", status_code=307)

    @api.get("/console/", include_in_schema=False)
    async def page() -> Response:
        return _asset("index.html")

    @api.get("/console/{name}", include_in_schema=False)
    async def asset(name: str) -> Response:
        return _asset(name)

    return api


def _asset(name: str) -> Response:
    path = SERVED.get(name)
    if path is None:
        return error_response(codes.NOT_FOUND, f"The console has no file {name!r}")
    return FileResponse(path, media_type=TYPES[path.suffix], headers={
        "Cache-Control": "no-cache", "X-Console-Version": __version__,
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'"})
