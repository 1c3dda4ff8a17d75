"""`llmwiki_agent_run` with MCP progress: when the call carries a `progressToken` and the client
accepts `text/event-stream`, the reply is an SSE stream of `notifications/progress` (each source's
step, then the answer as it is generated) ending with the unchanged JSON-RPC result."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web

from bridge.core.gather import SourceOutcome
from bridge.service import RunReports
from bridge.support.errors import BridgeError
from bridge.web.errors import http_error
from common.errors import CodedError
from common.json_wire import json_bytes
from common.logging import REQUEST_ID
from common.mcp import INTERNAL_ERROR, Era, McpError, request_id_of, response

if TYPE_CHECKING:
    from bridge.web.mcp import BridgeMcp

PROGRESS_TOOL = "llmwiki_agent_run"
log = structlog.get_logger("llmwiki.bridge.mcp")


def progress_token(message: Mapping[str, Any], request: web.Request) -> str | int | None:
    """The call's progress token when it is an agent run whose client reads an SSE reply."""
    params = message.get("params")
    if message.get("method") != "tools/call" or not isinstance(params, dict) \
            or params.get("name") != PROGRESS_TOOL:
        return None
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if isinstance(token, bool) or not isinstance(token, str | int):
        return None
    accepts = {part.split(";", 1)[0].strip().lower() for part in request.headers.get("Accept", "").split(",")}
    return token if "text/event-stream" in accepts else None


def _source_text(outcome: SourceOutcome) -> str:
    if outcome.failed:
        return f"Knowledge Source {outcome.source.id} failed."
    count = len(outcome.evidence.citations) if outcome.evidence is not None else 0
    return f"Knowledge Source {outcome.source.id} answered with {count} citation(s)."


def _event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + json_bytes(message, exact_floats=False) + b"\n\n"


async def answer_with_progress(request: web.Request, dispatcher: BridgeMcp, message: Mapping[str, Any],
                               era: Era, token: str | int, trace_id: str) -> web.StreamResponse:
    """The call answered over SSE: progress notifications as the run reports, then its reply. A
    client that hangs up cancels the run."""
    notes: asyncio.Queue[str] = asyncio.Queue()
    dispatcher.reports = RunReports(source_done=lambda outcome: notes.put_nowait(_source_text(outcome)),
                                    answer_delta=notes.put_nowait)
    call = asyncio.ensure_future(dispatcher.answer(message, era, request[REQUEST_ID], trace_id))
    stream = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await stream.prepare(request)
    counter = itertools.count(1)
    try:
        while True:
            waiter = asyncio.ensure_future(notes.get())
            await asyncio.wait({call, waiter}, return_when=asyncio.FIRST_COMPLETED)
            texts = [waiter.result()] if waiter.done() else []
            if not waiter.done():
                waiter.cancel()
            while not notes.empty():
                texts.append(notes.get_nowait())
            for text in texts:
                await stream.write(_event({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                    "progressToken": token, "progress": next(counter), "message": text}}))
            if call.done() and notes.empty():
                break
        await stream.write(_reply(call, message))
    except (ConnectionResetError, asyncio.CancelledError):
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await call
        raise
    await stream.write_eof()
    return stream


def _reply(call: asyncio.Future[web.Response], message: Mapping[str, Any]) -> bytes:
    """The JSON-RPC reply as the stream's last event. A run that failed after the stream began
    cannot change the HTTP status any more: its coded error goes in the JSON-RPC error's data."""
    try:
        reply = call.result()
    except (BridgeError, CodedError) as exc:
        coded = http_error(exc) if isinstance(exc, BridgeError) else exc
        error = McpError(INTERNAL_ERROR, coded.message, coded.body())
        return _event(response(request_id_of(message), error=error))
    body = reply.body
    assert isinstance(body, bytes)
    return b"event: message\ndata: " + body + b"\n\n"
