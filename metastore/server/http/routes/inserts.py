"""``POST /inserts-stream``: newline-delimited rows into a stream, each acknowledged once Kafka
has it (:mod:`metastore.server.http.inserts_stream`)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import Response

from metastore.server.http import streaming
from metastore.server.http.answers import failure
from metastore.server.http.context import ServerContext
from metastore.server.http.inserts_stream import InsertsStreamResponse
from metastore.server.http.request_gate import INSERTS_STREAM_PATH


def router(context: ServerContext) -> APIRouter:
    api = APIRouter()

    @api.post(INSERTS_STREAM_PATH)
    async def inserts_stream(request: Request) -> Response:
        request.state.body_read = True  # the response reads the body, row by row
        return InsertsStreamResponse(context.node, context.limits,
                                     streaming.wants_delimited(request), failure,
                                     lambda: int(time.time() * 1000), context.threads,
                                     context.gate.user_of(request))

    return api
